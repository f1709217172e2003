"""spmm's argument checks (out untouched on every rejection), prune, SparseLinear."""
import numpy as np
import pytest
from sparse_helpers import BF16, DTYPES, block_sparse, result_dtype

from pytpp.sparse import BCSC, BSR, SparseLinear, prune, spmm


def _bad_calls(A):
    f32 = np.ones((8, 3), np.float32)
    yield (A, np.ones((8, 3), np.float64)), ValueError, "dtype"
    yield (A, np.ones((6, 3), np.float32)), ValueError, "rows"
    yield (A, np.ones(8, np.float32)), ValueError, "2-D"
    yield (np.ones((3, 5), np.float32), A), ValueError, "columns"
    yield (A, A), TypeError, "exactly one"
    yield (f32, f32), TypeError, "exactly one"
    yield (A, "x"), TypeError, "b"


def test_bad_input_leaves_out_untouched(rng):
    A = BSR.from_dense(block_sparse(rng, (4, 8), (2, 2), 0.5, np.float32), block=(2, 2))
    for args, exc, msg in _bad_calls(A):
        out = np.full((4, 3), 7.0, np.float32)
        with pytest.raises(exc, match=msg):
            spmm(*args, out=out)
        assert np.all(out == 7.0)
    b = np.ones((8, 3), np.float32)
    for out, exc in [(np.full((4, 4), 7.0, np.float32), ValueError),
                     (np.full((4, 3), 7.0, np.float64), TypeError),
                     ([[0.0] * 3] * 4, TypeError)]:
        with pytest.raises(exc, match="out"):
            spmm(A, b, out=out)
        if isinstance(out, np.ndarray):
            assert np.all(out == 7.0)
    ro = np.zeros((4, 3), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        spmm(A, b, out=ro)


def test_matmul_operators(rng):
    a = block_sparse(rng, (16, 24), (4, 8), 0.5, np.float32)
    A = BSR.from_dense(a, block=(4, 8))
    b = rng.standard_normal((24, 5)).astype(np.float32)
    x = rng.standard_normal((5, 16)).astype(np.float32)
    np.testing.assert_array_equal(A @ b, spmm(A, b))
    np.testing.assert_array_equal(x @ A, spmm(x, A))
    with pytest.raises(TypeError):
        A @ A


@pytest.mark.parametrize("density", [0.0, 0.2, 0.5, 1.0])
def test_prune(rng, density):
    w = rng.standard_normal((32, 48)).astype(np.float32)
    P = prune(w, (8, 8), density)
    nb = 4 * 6
    assert P.nblocks == round(density * nb)
    norms = np.sqrt(np.square(w.astype(np.float64)).reshape(4, 8, 6, 8).sum(axis=(1, 3)))
    kept = P.to_dense().reshape(4, 8, 6, 8).any(axis=(1, 3))
    if 0 < P.nblocks < nb:
        assert norms[kept].min() >= norms[~kept].max()
    # kept blocks carry w's values
    d = P.to_dense()
    np.testing.assert_array_equal(d[d != 0], w[d != 0])


def test_prune_bad_args():
    w = np.ones((8, 8), np.float32)
    with pytest.raises(ValueError, match="density"):
        prune(w, (2, 2), 1.5)
    with pytest.raises(ValueError, match="density"):
        prune(w, (2, 2), -0.1)
    with pytest.raises(ValueError, match="block"):
        prune(w, (3, 2), 0.5)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("cls", [BSR, BCSC])
@pytest.mark.parametrize("bias", [False, True])
def test_sparse_linear(isa, rng, dtype, cls, bias):
    """The BERT FFN shape, scaled down: weight (out, in) pruned to 20% in 8 x 8 blocks."""
    w = prune(rng.standard_normal((48, 32)).astype(dtype), (8, 8), 0.2)
    W = w if cls is BSR else BCSC.from_scipy(w.to_scipy(), block=None) \
        if dtype != BF16 else BCSC.from_dense(w.to_dense(), block=(8, 8))
    bvec = rng.standard_normal(48).astype(np.float32) if bias else None
    lin = SparseLinear(W, bias=bvec)
    x = rng.standard_normal((2, 5, 32)).astype(dtype)
    y = lin(x)
    rd = result_dtype(dtype)
    assert y.shape == (2, 5, 48) and y.dtype == rd
    ref_w = w.to_dense().T
    got = y.reshape(10, 48) - (bvec.astype(rd) if bias else 0)
    # subtracting the bias back adds one rounding: loosen by one ulp of |y|
    slack = np.abs(y.reshape(10, 48)).astype(np.float64) * np.finfo(rd).eps * 2 if bias else 0
    ref = x.reshape(10, 32).astype(np.float64) @ ref_w.astype(np.float64)
    bound = 32 * np.finfo(rd).eps * (np.abs(x.reshape(10, 32).astype(np.float64))
                                     @ np.abs(ref_w.astype(np.float64))) + slack + 1e-30
    assert np.all(np.abs(got - ref) <= bound)
    with pytest.raises(ValueError, match="in_features|x"):
        lin(np.ones((3, 31), dtype))
