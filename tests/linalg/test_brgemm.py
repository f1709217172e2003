"""pytpp.brgemm (numpy-level batch-reduce GEMM) against float64 numpy: strides, broadcasting,
out=, zero sizes, errors. Tolerance as in tests/tpp/test_brgemm_handle.py: 4*N*eps*(|A||B|)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pytpp


def ref_brgemm(a, b, c=None, beta=1.0):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    r = np.einsum("...bik,...bkj->...ij", a64, b64)
    mag = np.einsum("...bik,...bkj->...ij", np.abs(a64), np.abs(b64))
    if c is not None:
        r = r + beta * c
        mag = mag + abs(beta) * np.abs(c)
    return r, mag


def assert_close(got, a, b, c=None, beta=1.0):
    ref, mag = ref_brgemm(a, b, c, beta)
    n_terms = a.shape[-3] * a.shape[-1] + 2
    eps = np.finfo(got.dtype).eps
    assert got.shape == ref.shape
    np.testing.assert_array_less(np.abs(got - ref), 4 * n_terms * eps * mag + 1e-300)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("nb,m,n,k", [(1, 1, 1, 1), (3, 7, 17, 33), (2, 63, 65, 1), (5, 33, 7, 63)])
def test_basic(isa, rng, dtype, nb, m, n, k):
    a = rng.standard_normal((nb, m, k)).astype(dtype)
    b = rng.standard_normal((nb, k, n)).astype(dtype)
    assert_close(pytpp.brgemm(a, b), a, b)


@pytest.mark.parametrize("layout", ["transposed_a", "transposed_b", "fortran", "negative", "sliced"])
def test_any_strides(isa, rng, layout):
    nb, m, n, k = 3, 17, 19, 9
    a = rng.standard_normal((nb, m, k))
    b = rng.standard_normal((nb, k, n))
    if layout == "transposed_a":
        a = np.ascontiguousarray(a.transpose(0, 2, 1)).transpose(0, 2, 1)
    elif layout == "transposed_b":
        b = np.ascontiguousarray(b.transpose(0, 2, 1)).transpose(0, 2, 1)
    elif layout == "fortran":
        a, b = np.asfortranarray(a), np.asfortranarray(b)
    elif layout == "negative":
        a, b = a[::-1, ::-1, ::-1], b[:, ::-1, ::-1]
    else:
        a = rng.standard_normal((2 * nb, m + 4, 3 * k))[::2, 2:-2, ::3]
        b = rng.standard_normal((nb, k, 2 * n))[:, :, ::2]
    assert_close(pytpp.brgemm(a, b), a, b)


def test_c_beta_and_out(isa, rng):
    a = rng.standard_normal((4, 6, 5)).astype(np.float32)
    b = rng.standard_normal((4, 5, 7)).astype(np.float32)
    c = rng.standard_normal((6, 7)).astype(np.float32)
    assert_close(pytpp.brgemm(a, b, c, beta=0.5), a, b, c, 0.5)
    c_orig = c.copy()
    out = np.empty((6, 7), np.float32)
    r = pytpp.brgemm(a, b, c, beta=2.0, out=out)
    assert r is out
    np.testing.assert_array_equal(c, c_orig)  # c is only read when out is another array
    assert_close(out, a, b, c_orig, 2.0)
    r = pytpp.brgemm(a, b, c, out=c)  # in-place accumulation
    assert r is c
    assert_close(c, a, b, c_orig, 1.0)


def test_out_with_strides(isa, rng):
    a = rng.standard_normal((2, 5, 3)); b = rng.standard_normal((2, 3, 4))
    big = np.zeros((10, 12))
    out = big[::2, ::3]  # non-unit column stride: computed aside, copied in
    pytpp.brgemm(a, b, out=out)
    assert_close(out, a, b)
    assert np.count_nonzero(big) == np.count_nonzero(out)


def test_leading_dims_broadcast(isa, rng):
    a = rng.standard_normal((3, 1, 4, 5, 6))
    b = rng.standard_normal((2, 4, 6, 7))
    got = pytpp.brgemm(a, b)
    assert got.shape == (3, 2, 5, 7)
    assert_close(got, np.broadcast_to(a, (3, 2, 4, 5, 6)), np.broadcast_to(b, (3, 2, 4, 6, 7)))
    out = np.zeros((3, 2, 7, 5)).transpose(0, 1, 3, 2)  # leading dims that do not merge
    pytpp.brgemm(a, b, out=out)
    np.testing.assert_allclose(out, got, rtol=1e-12, atol=1e-12)


def test_mixed_dtypes_promote(rng):
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((2, 4, 5))
    got = pytpp.brgemm(a, b)
    assert got.dtype == np.float64
    assert_close(got, a, b)


@pytest.mark.parametrize("shape_a,shape_b,shape_c", [
    ((0, 3, 4), (0, 4, 5), (3, 5)), ((2, 0, 4), (2, 4, 5), (0, 5)),
    ((2, 3, 0), (2, 0, 5), (3, 5)), ((2, 3, 4), (2, 4, 0), (3, 0)), ((0, 2, 3, 4), (2, 4, 5), (0, 3, 5))])
def test_zero_size(isa, shape_a, shape_b, shape_c):
    got = pytpp.brgemm(np.ones(shape_a), np.ones(shape_b))
    assert got.shape == shape_c
    np.testing.assert_array_equal(got, 0.0)
    c = np.full(shape_c, 3.0)
    np.testing.assert_array_equal(pytpp.brgemm(np.ones(shape_a), np.ones(shape_b), c, beta=2.0), 6.0)


def test_nan_propagates(isa):
    a = np.ones((2, 3, 3)); a[1, 0, 0] = np.nan
    got = pytpp.brgemm(a, np.ones((2, 3, 3)))
    assert np.isnan(got[0]).all() and np.isfinite(got[1:]).all()


class TestErrors:
    def test_messages(self):
        a = np.ones((2, 3, 4)); b = np.ones((2, 4, 5))
        with pytest.raises(TypeError, match="pytpp.brgemm: a has dtype int64; expected float64, float32"):
            pytpp.brgemm(np.ones((2, 3, 4), np.int64), b)
        with pytest.raises(TypeError, match="b has dtype complex128"):
            pytpp.brgemm(a, b.astype(complex))
        with pytest.raises(ValueError, match="a must have at least 3 dimensions"):
            pytpp.brgemm(np.ones((3, 4)), b)
        with pytest.raises(ValueError, match="k must match"):
            pytpp.brgemm(a, np.ones((2, 3, 5)))
        with pytest.raises(ValueError, match="a has 2 blocks but b has 3"):
            pytpp.brgemm(a, np.ones((3, 4, 5)))
        with pytest.raises(ValueError, match="do not broadcast"):
            pytpp.brgemm(np.ones((2, 2, 3, 4)), np.ones((3, 2, 4, 5)))
        with pytest.raises(ValueError, match="c has shape"):
            pytpp.brgemm(a, b, np.ones((4, 5)))
        with pytest.raises(ValueError, match="out has shape"):
            pytpp.brgemm(a, b, out=np.empty((5, 3)))
        with pytest.raises(TypeError, match="cannot write a float64 result into out of dtype int32"):
            pytpp.brgemm(a, b, out=np.empty((3, 5), np.int32))
        ro = np.empty((3, 5)); ro.flags.writeable = False
        with pytest.raises(ValueError, match="out is read-only"):
            pytpp.brgemm(a, b, out=ro)
        buf = np.ones((2, 3, 5))   # out inside a: computed from a copy, as numpy does
        ref = np.einsum("bik,bkj->ij", buf[:, :, :4].copy(), b)
        pytpp.brgemm(buf[:, :, :4], b, out=buf[0])
        np.testing.assert_array_equal(buf[0], ref)


@settings(max_examples=60, deadline=None)
@given(nb=st.integers(0, 5), m=st.integers(0, 40), n=st.integers(0, 70), k=st.integers(0, 40),
       dtype=st.sampled_from([np.float32, np.float64]), level=st.sampled_from(pytpp.available_isas()),
       transpose_a=st.booleans(), seed=st.integers(0, 2**31))
def test_hypothesis_random_shapes(nb, m, n, k, dtype, level, transpose_a, seed):
    r = np.random.default_rng(seed)
    a = r.standard_normal((nb, k, m) if transpose_a else (nb, m, k)).astype(dtype)
    if transpose_a:
        a = a.transpose(0, 2, 1)
    b = r.standard_normal((nb, k, n)).astype(dtype)
    with pytpp.use_isa(level):
        got = pytpp.brgemm(a, b)
    assert_close(got, a, b)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("layout", ["contiguous", "transposed_a", "sliced"])
def test_many_products_streaming_from_memory(isa, rng, dtype, threads, layout):
    # independent products whose operands together exceed L2 run the streaming path: chunks,
    # each tile's kernel fetching a share of the next chunk, the last chunk of one product
    # fetching the first of the next product of its thread; none of it may change a result
    many, nb, m, n, k = 9, 13, 33, 47, 63
    a = rng.standard_normal((many, nb, m, k)).astype(dtype)
    b = rng.standard_normal((many, nb, k, n)).astype(dtype)
    if layout == "transposed_a":
        a = np.ascontiguousarray(a.swapaxes(-1, -2)).swapaxes(-1, -2)
    elif layout == "sliced":
        a = rng.standard_normal((many, nb, m, 2 * k)).astype(dtype)[..., ::2]
        b = rng.standard_normal((many, nb, k, n + 5)).astype(dtype)[..., 3:n + 3]
    assert a.nbytes + b.nbytes > 2 * 2**20
    old = pytpp.get_num_threads()
    try:
        pytpp.set_num_threads(threads)
        got = pytpp.brgemm(a, b)
    finally:
        pytpp.set_num_threads(old)
    assert_close(got, a, b)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("m,n,k", [(7, 64, 64), (64, 17, 5), (1, 200, 33)])
def test_long_reduction_streaming_shapes(isa, rng, dtype, m, n, k):
    # one reduction beyond L2 with shapes whose next-chunk share exceeds a tile's k steps (few
    # rows of A, short k): the helper issues what the kernel cannot pace
    nb = int(3 * 2**20 // ((m * k + k * n) * np.dtype(dtype).itemsize)) + 3
    a = rng.standard_normal((nb, m, k)).astype(dtype)
    b = rng.standard_normal((nb, k, n)).astype(dtype)
    c = rng.standard_normal((m, n)).astype(dtype)
    assert_close(pytpp.brgemm(a, b, c, beta=0.5), a, b, c, 0.5)
