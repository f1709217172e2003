"""pytpp.matmul, float32/float64: np.matmul semantics and accuracy on every ISA level.

Accuracy contract: each output is a k-term dot product computed with fused multiply-adds in the
operand dtype, so |C - C_exact| <= k * eps * (|A| |B|) (Higham's bound for recursive summation,
which blocked summation never exceeds); we test against 2x that bound, with C_exact from float64
(float32 inputs) or from float64 plus the same bound (float64 inputs, whose reference itself has
k * eps error).
"""
import itertools

import ml_dtypes
import numpy as np
import pytest

import pytpp
from pytpp._core import _matmul as _cm

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402

DTYPES = [np.float32, np.float64]


def check(c, a, b, dtype=None):
    """c equals a @ b within 2 k eps |a||b| (per element)."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    ref = np.matmul(a64, b64)
    mag = np.matmul(np.abs(a64), np.abs(b64))
    k = a64.shape[-1] if a64.ndim else 1
    eps = np.finfo(dtype or np.result_type(a, b)).eps
    tol = 2.0 * max(k, 1) * eps * mag + np.finfo(np.float64).tiny
    assert c.shape == ref.shape
    err = np.abs(np.asarray(c, np.float64) - ref)
    assert np.all(err <= tol), f"max error {err.max()} > tolerance {tol.max()}"


def rand(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


ODD = [1, 7, 17, 33, 63, 65]
# a spread of (m, n, k) over the odd sizes rather than all 216 triples
TRIPLES = sorted(set(itertools.islice(
    ((m, n, k) for m, n, k in itertools.product(ODD, ODD, ODD) if (m + 2 * n + 3 * k) % 5 == 0),
    40))) + [(1, 1, 1), (65, 65, 65), (1, 65, 1), (65, 1, 65)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,k", TRIPLES)
def test_odd_sizes(isa, dtype, m, n, k, rng):
    a, b = rand(rng, (m, k), dtype), rand(rng, (k, n), dtype)
    c = pytpp.matmul(a, b)
    assert c.dtype == dtype
    check(c, a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,k", [(130, 97, 300), (257, 129, 1100), (12, 300, 2100),
                                   (300, 5, 700), (97, 1, 513), (1, 200, 700)])
def test_packed_path(isa, threads, dtype, m, n, k, rng):
    """Sizes large enough for the Goto path: several kc blocks, edge tiles, thread grids."""
    a, b = rand(rng, (m, k), dtype), rand(rng, (k, n), dtype)
    check(pytpp.matmul(a, b), a, b)


@pytest.mark.parametrize("dtype", DTYPES)
def test_all_loops_with_tiny_blocks(isa, threads, dtype, rng):
    """Force every loop of the five to iterate several times with partial last blocks."""
    code = _cm.DT_F32 if dtype == np.float32 else _cm.DT_F64
    level = pytpp._config.LEVELS.index(isa)
    blk = _cm.blocking(code, level)
    blk.update(kc=16, mc=3 * blk["mr"], nc=2 * blk["nr"])
    m, n, k = 5 * blk["mr"] + 3, 7 * blk["nr"] + 5, 71
    for a, b in [(rand(rng, (m, k), dtype), rand(rng, (k, n), dtype)),
                 (rand(rng, (k, m), dtype).T, rand(rng, (n, k), dtype)[::-1].T)]:
        c = np.empty((m, n), dtype)
        _cm.gemm_blocked(a, b, c, code, level, blk)
        check(c, a, b)


def views(x):
    """The same matrix through C, Fortran, transposed, strided and negative-stride layouts."""
    yield "C", np.ascontiguousarray(x)
    yield "F", np.asfortranarray(x)
    yield "T", np.ascontiguousarray(x.T).T
    big = np.zeros((x.shape[0] * 2, x.shape[1] * 3), x.dtype)
    big[::2, ::3] = x
    yield "strided", big[::2, ::3]
    yield "neg", np.ascontiguousarray(x[::-1, ::-1])[::-1, ::-1]
    yield "negrow", np.ascontiguousarray(x[::-1])[::-1]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,k", [(7, 9, 5), (70, 90, 130), (150, 140, 1100)])
def test_layouts(isa, dtype, m, n, k, rng):
    a0, b0 = rand(rng, (m, k), dtype), rand(rng, (k, n), dtype)
    for (na, a), (nb, b) in itertools.product(views(a0), views(b0)):
        c = pytpp.matmul(a, b)
        np.testing.assert_array_equal(a, a0)
        check(c, a0, b0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_out_layouts(isa, dtype, rng):
    a, b = rand(rng, (40, 50), dtype), rand(rng, (50, 30), dtype)
    for name, out in [("C", np.empty((40, 30), dtype)), ("F", np.empty((40, 30), dtype, order="F")),
                      ("strided", np.empty((80, 90), dtype)[::2, ::3]),
                      ("neg", np.empty((40, 30), dtype)[::-1, ::-1])]:
        r = pytpp.matmul(a, b, out=out)
        assert r is out
        check(out, a, b)


def test_one_d_promotion(rng):
    a, b = rand(rng, (5, 7), np.float64), rand(rng, (7, 3), np.float64)
    v7, v5 = rand(rng, 7, np.float64), rand(rng, 5, np.float64)
    for x, y in [(v7, b), (a, v7), (v5, a), (v7, v7)]:
        r, ref = pytpp.matmul(x, y), np.matmul(x, y)
        assert np.shape(r) == np.shape(ref) and type(r) is type(ref)
        np.testing.assert_allclose(r, ref, rtol=1e-12)
    # stacks with 1-D operands
    s = rand(rng, (4, 5, 7), np.float64)
    np.testing.assert_allclose(pytpp.matmul(s, v7), np.matmul(s, v7), rtol=1e-12)
    np.testing.assert_allclose(pytpp.matmul(v5, s), np.matmul(v5, s), rtol=1e-12)
    out = np.empty(())
    assert pytpp.matmul(v7, v7, out=out) is out
    np.testing.assert_allclose(out, v7 @ v7)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sa,sb", [((2, 1, 5, 7), (3, 7, 4)), ((5, 7), (3, 7, 4)),
                                   ((3, 5, 7), (7, 4)), ((1, 3, 6, 70), (2, 1, 70, 65)),
                                   ((4, 33, 17), (4, 17, 33))])
def test_broadcast_stacks(isa, threads, dtype, sa, sb, rng):
    a, b = rand(rng, sa, dtype), rand(rng, sb, dtype)
    c = pytpp.matmul(a, b)
    assert c.shape == np.matmul(a, b).shape
    check(c, a, b)
    # a non-contiguous stack and out
    at = np.swapaxes(rand(rng, sa[:-2] + sa[-2:][::-1], dtype), -1, -2)
    out = np.empty(c.shape[:-2] + c.shape[-2:][::-1], dtype).swapaxes(-1, -2)
    pytpp.matmul(at, b, out=out)
    check(out, at, b)


def test_zero_size():
    for sa, sb in [((0, 5), (5, 3)), ((4, 5), (5, 0)), ((4, 0), (0, 3)), ((0, 4, 5), (5, 3)),
                   ((2, 0, 5), (2, 5, 3)), ((0,), (0,)), ((3, 0), (0,))]:
        a, b = np.ones(sa, np.float32), np.ones(sb, np.float32)
        r, ref = pytpp.matmul(a, b), np.matmul(a, b)
        assert np.shape(r) == ref.shape and np.asarray(r).dtype == ref.dtype
        np.testing.assert_array_equal(r, ref)
    out = np.full((4, 3), np.nan)
    pytpp.matmul(np.ones((4, 0)), np.ones((0, 3)), out=out)
    np.testing.assert_array_equal(out, 0.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,k", [(5, 6, 7), (130, 70, 300)])
def test_nan_inf_propagation(isa, dtype, m, n, k, rng):
    a, b = rand(rng, (m, k), dtype), rand(rng, (k, n), dtype)
    a[1, 2] = np.nan
    a[3, 0] = np.inf
    b[4, 5] = -np.inf
    b[0, 1] = 0.0   # inf * 0 -> nan in row 3, column 1
    with np.errstate(invalid="ignore"):
        ref = np.matmul(a, b)
    c = pytpp.matmul(a, b)
    np.testing.assert_array_equal(np.isnan(c), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(c), np.isinf(ref))
    np.testing.assert_array_equal(np.sign(c[np.isinf(c)]), np.sign(ref[np.isinf(ref)]))
    # out full of NaN is overwritten, never read
    out = np.full((m, n), np.nan, dtype)
    pytpp.matmul(a, b, out=out)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))


def test_dtypes_and_promotion(rng):
    a32, b64 = rand(rng, (6, 5), np.float32), rand(rng, (5, 4), np.float64)
    assert pytpp.matmul(a32, b64).dtype == np.float64
    r = pytpp.matmul(a32, a32.T, dtype=np.float64)
    assert r.dtype == np.float64
    check(r, a32, a32.T, dtype=np.float64)
    out = np.empty((6, 6), np.float64)
    pytpp.matmul(a32, a32.T, out=out)
    check(out, a32, a32.T, dtype=np.float32)
    lst = pytpp.matmul([[1.0, 2.0]], [[3.0], [4.0]])
    np.testing.assert_array_equal(lst, [[11.0]])


def test_out_overlapping_inputs(rng):
    a = rand(rng, (8, 8), np.float64)
    b = rand(rng, (8, 8), np.float64)
    ref = a @ b
    x = a.copy()
    pytpp.matmul(x, b, out=x)   # numpy semantics: as if the inputs were copied first
    np.testing.assert_allclose(x, ref, rtol=1e-12)
    y = b.copy()
    pytpp.matmul(a, y, out=y)
    np.testing.assert_allclose(y, ref, rtol=1e-12)
    z = a.copy()
    pytpp.matmul(z, z.T, out=z)
    np.testing.assert_allclose(z, a @ a.T, rtol=1e-12)


def _bad_calls():
    """(a, b, kwargs) of calls np.matmul refuses."""
    a = np.ones((3, 4))
    ro = np.empty((3, 2))
    ro.flags.writeable = False
    return [
        (np.float64(2.0), a, {}),                                   # 0-d operand
        (a, np.ones((3, 2)), {}),                                   # core dimensions
        (np.ones((2, 3, 4)), np.ones((3, 4, 2)), {}),               # leading dimensions
        (a, np.ones((4, 2)), {"out": np.empty((3, 3))}),            # out shape
        (a, np.ones((4, 2)), {"out": np.empty((3, 2), np.int32)}),  # out cast (same_kind)
        (a, np.ones((4, 2)), {"out": ro}),                          # read-only out
        (a, np.ones((4, 2)), {"dtype": np.int8}),                   # input cast to dtype=
        (a, np.ones((4, 2)), {"out": [[0, 0]] * 3}),                # out not an array
        (np.ones((2, 2), np.float32), np.ones((3, 2), np.float32), {}),   # fast path's dtype
    ]


@pytest.mark.parametrize("a,b,kwargs", _bad_calls())
def test_errors_are_numpys(a, b, kwargs):
    """A drop-in: pytpp raises what np.matmul raises, the same exception type and message."""
    with pytest.raises(Exception) as expected:
        np.matmul(a, b, **kwargs)
    with pytest.raises(expected.type) as got:
        pytpp.matmul(a, b, **kwargs)
    assert type(got.value) is expected.type
    assert str(got.value) == str(expected.value)


def test_packed_left_operand_is_refused():
    p = pytpp.linalg.pack(np.ones((2, 2)))
    with pytest.raises(TypeError, match="PackedMatrix can only be the right operand"):
        pytpp.matmul(p, np.ones((2, 2)))


def test_threads_give_identical_bits(rng):
    """Threads split C, never the k reduction: 1 and 2 threads give the same bits."""
    a, b = rand(rng, (300, 500), np.float32), rand(rng, (500, 400), np.float32)
    old = pytpp.get_num_threads()
    try:
        pytpp.set_num_threads(1)
        c1 = pytpp.matmul(a, b)
        pytpp.set_num_threads(2)
        c2 = pytpp.matmul(a, b)
    finally:
        pytpp.set_num_threads(old)
    np.testing.assert_array_equal(c1, c2)


def test_matches_operator_semantics(rng):
    a, b = rand(rng, (3, 4), np.float64), rand(rng, (4, 5), np.float64)
    np.testing.assert_allclose(pytpp.matmul(a, b), a @ b, rtol=1e-12)
    assert pytpp.linalg.matmul is pytpp.matmul


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(0, 40),
       lead_a=st.sampled_from([(), (1,), (3,), (2, 1)]), lead_b=st.sampled_from([(), (1,), (3,)]),
       ta=st.booleans(), tb=st.booleans(), sa=st.integers(1, 2), sb=st.integers(1, 2),
       flip=st.booleans(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_random_shapes_and_strides(m, n, k, lead_a, lead_b, ta, tb, sa, sb, flip, dtype, seed):
    rng = np.random.default_rng(seed)

    def make(lead, r, c, trans, step):
        base = rand(rng, lead + ((c, r) if trans else (r, c)), dtype)
        x = np.swapaxes(base, -1, -2) if trans else base
        if step > 1:
            big = np.zeros(lead + (r * step, c), dtype)
            big[..., ::step, :] = x
            x = big[..., ::step, :]
        return x[..., ::-1, :] if flip else x

    a, b = make(lead_a, m, k, ta, sa), make(lead_b, k, n, tb, sb)
    check(pytpp.matmul(a, b), a, b)


@pytest.mark.parametrize("dtype", DTYPES + [np.dtype(ml_dtypes.bfloat16)])
def test_one_d_operands_take_the_fast_path_with_numpys_shapes(isa, dtype, rng):
    """1-D operands (a row on the left, a column on the right, strided or reversed): numpy's
    result shapes and types (a scalar for two vectors), the bits of the same product written
    with 2-D operands."""
    m = rng.standard_normal((37, 300)).astype(dtype)
    x = rng.standard_normal(600).astype(dtype)
    for v in (x[:300], x[::2], x[::-2]):
        np.testing.assert_array_equal(pytpp.matmul(v, m.T), pytpp.matmul(v[None, :], m.T)[0])
        np.testing.assert_array_equal(pytpp.matmul(m, v), pytpp.matmul(m, v[:, None])[:, 0])
        d = pytpp.matmul(v, x[:300])
        assert np.ndim(d) == 0 and not isinstance(d, np.ndarray)
        assert d == pytpp.matmul(v[None, :], x[:300, None])[0, 0]
        # the dot product's four chains against float64: 2 k eps sum |v x| (bf16: the inputs
        # are exact in float32 and the products accumulate in float32)
        v64, x64 = v.astype(np.float64), x[:300].astype(np.float64)
        eps = np.finfo(np.float64 if dtype == np.float64 else np.float32).eps
        assert abs(float(d) - v64 @ x64) <= 2 * 300 * eps * (np.abs(v64) @ np.abs(x64))
    assert pytpp.matmul(x[:0], x[:0]) == 0.0
