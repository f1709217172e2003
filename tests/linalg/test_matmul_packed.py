"""PackedMatrix / pack: constant right-hand matrices packed once, multiplied many times.
Tolerances as in test_matmul.py (2 k eps |A||B|); bf16 results must equal the unpacked path's
bits (same kernels, same chains)."""
import numpy as np
import pytest

import pytpp
from pytpp.linalg import PackedMatrix, pack

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)


def check(c, a, b, dtype):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    tol = 2.0 * max(a.shape[-1], 1) * np.finfo(dtype).eps * (np.abs(a64) @ np.abs(b64)) + 1e-300
    assert c.shape == (a64 @ b64).shape
    assert np.all(np.abs(c - a64 @ b64) <= tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k,n", [(1, 1), (7, 33), (300, 65), (1100, 130)])
def test_packed_matches(isa, threads, dtype, k, n, rng):
    b = rng.standard_normal((k, n)).astype(dtype)
    pb = pack(b)
    assert pb.shape == (k, n) and pb.dtype == dtype
    assert pb.nbytes <= b.nbytes + k * 64 * 8  # about the size of the matrix (n padded to NR)
    for shape in [(1, k), (17, k), (3, 40, k), (k,)]:
        a = rng.standard_normal(shape).astype(dtype)
        c = pytpp.matmul(a, pb)
        assert c.shape == np.matmul(a, b).shape
        check(c, a, b, dtype)
        np.testing.assert_allclose(a @ pb, c)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16])
@pytest.mark.parametrize("n,k,width", [(45, 7, 8), (80, 1101, 1104), (33, 2051, 2052)])
def test_packed_transposed_weight_equals_contiguous(isa, threads, dtype, n, k, width, rng):
    """PackedMatrix(w.T) of a view of wider rows (the level's transpose kernel packs its
    panels; partial panels, odd depths, several k blocks, threads over the blocks) holds what
    PackedMatrix of the contiguous copy holds: the same products, bit for bit."""
    w = rng.standard_normal((n, width)).astype(dtype)[:, :k]
    a = rng.standard_normal((19, k)).astype(dtype)
    got = pytpp.matmul(a, PackedMatrix(w.T))
    want = pytpp.matmul(a, PackedMatrix(np.ascontiguousarray(w.T)))
    np.testing.assert_array_equal(got, want)


def test_packed_transposed_source_and_views(rng):
    w = rng.standard_normal((80, 50)).astype(np.float32)
    pb = PackedMatrix(w.T)  # packs the transposed view without a copy of w
    a = rng.standard_normal((6, 2, 30, 50)).astype(np.float32)[:, 1, ::-1]  # strided stack
    check(pytpp.matmul(a, pb), a, w.T, np.float32)
    out = np.empty((6, 80, 30), np.float32).swapaxes(1, 2)
    assert pytpp.matmul(a, pb, out=out) is out
    check(out, a, w.T, np.float32)


def test_packed_bf16(rng):
    b = rng.standard_normal((129, 70)).astype(BF16)
    a = rng.standard_normal((3, 33, 129)).astype(BF16)
    pb = pack(b)
    c = pytpp.matmul(a, pb)
    np.testing.assert_array_equal(c, pytpp.matmul(a, b))
    c16 = pytpp.matmul(a, pb, dtype=BF16)
    np.testing.assert_array_equal(c16.view(np.uint16), c.astype(BF16).view(np.uint16))
    # float32 weights accept bf16 activations (safe cast); bf16 weights refuse float32 ones
    pf = pack(b.astype(np.float32))
    np.testing.assert_array_equal(pytpp.matmul(a, pf), pytpp.matmul(a.astype(np.float32), b.astype(np.float32)))
    with pytest.raises(TypeError, match="does not cast safely"):
        pytpp.matmul(a.astype(np.float32), pb)


def test_packed_errors_and_zero(rng):
    with pytest.raises(ValueError, match="must be 2-D"):
        pack(np.ones((2, 3, 4)))
    with pytest.raises(TypeError, match="int64"):
        pack(np.ones((3, 4), np.int64))
    pb = pack(np.ones((3, 4)))
    with pytest.raises(ValueError, match="core dimensions"):
        pytpp.matmul(np.ones((2, 5)), pb)
    with pytest.raises(TypeError, match="right operand"):
        pytpp.matmul(pb, np.ones((4, 2)))
    np.testing.assert_array_equal(pytpp.matmul(np.ones((0, 3)), pb), np.zeros((0, 4)))
    pz = pack(np.ones((0, 4)))
    np.testing.assert_array_equal(pytpp.matmul(np.ones((2, 0)), pz), np.zeros((2, 4)))
    assert "PackedMatrix" in repr(pb)
