"""BRGEMM kernel handles (pytpp.tpp.brgemm) against a float64 numpy reference.

Tolerance: each C element is a sum of nb*k products. With unit-scale random inputs the rounding
error of a float32 (float64) sum of N terms is bounded by ~N*eps*sum|a_ip*b_pj| (Higham 3.1);
we check |C - C_ref| <= 4*N*eps*(|A||B|)_ij + tiny, which is that bound with a 4x margin for the
alpha/beta epilogue. The reference runs in float64 on the same (already-rounded) inputs.
"""
import numpy as np
import pytest

import pytpp

SIZES = [1, 2, 7, 17, 33, 63, 65]


def reference(blocks_a, blocks_b, c0, alpha, beta, trans_a=False, trans_b=False):
    acc = np.zeros_like(c0, dtype=np.float64)
    mag = np.zeros_like(c0, dtype=np.float64)
    for a, b in zip(blocks_a, blocks_b):
        a = a.astype(np.float64).T if trans_a else a.astype(np.float64)
        b = b.astype(np.float64).T if trans_b else b.astype(np.float64)
        acc += a @ b
        mag += np.abs(a) @ np.abs(b)
    ref = alpha * acc + (beta * c0.astype(np.float64) if beta else 0)
    n_terms = max(1, sum(a.size for a in blocks_a) // max(1, c0.shape[0]))
    return ref, mag * abs(alpha) + abs(beta) * np.abs(c0), n_terms


def check(c, ref, mag, n_terms, dtype):
    eps = np.finfo(dtype).eps
    tol = 4 * (n_terms + 2) * eps * mag + 1e-300
    err = np.abs(c.astype(np.float64) - ref)
    assert np.all(err <= tol), f"max err {err.max()} vs tol {tol[err.argmax() // tol.shape[1]].max()}"


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (7, 17, 33), (65, 63, 7), (33, 65, 17), (12, 64, 64),
                                   (64, 64, 64), (13, 1, 5), (1, 40, 3)])
@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_stride_mode(isa, rng, dtype, m, n, k, beta):
    nb = 5
    a = rng.standard_normal((nb, m, k)).astype(dtype)
    b = rng.standard_normal((nb, k, n)).astype(dtype)
    c = rng.standard_normal((m, n)).astype(dtype)
    ref, mag, nt = reference(a, b, c, 1.0, beta)
    kern = pytpp.tpp.brgemm(m, n, k, dtype=dtype, beta=beta)
    assert kern.isa == isa
    out = kern(a, b, c.copy(), nb)
    check(out, ref, mag, nt, dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_beta0_never_reads_c(isa, rng, dtype):
    a = rng.standard_normal((3, 9, 5)).astype(dtype)
    b = rng.standard_normal((3, 5, 19)).astype(dtype)
    c = np.full((9, 19), np.nan, dtype)
    pytpp.tpp.brgemm(9, 19, 5, dtype=dtype, beta=0.0)(a, b, c, 3)
    assert np.isfinite(c).all()
    np.testing.assert_allclose(c, np.einsum("bik,bkj->ij", a, b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("trans_a,trans_b", [(False, True), (True, False), (True, True)])
def test_transposes_and_leading_dims(isa, rng, dtype, trans_a, trans_b):
    m, n, k, nb = 17, 33, 7, 4
    a_rows, a_cols = (k, m) if trans_a else (m, k)
    b_rows, b_cols = (n, k) if trans_b else (k, n)
    lda, ldb, ldc = a_cols + 3, b_cols + 5, n + 2
    abuf = rng.standard_normal((nb, a_rows, lda)).astype(dtype)
    bbuf = rng.standard_normal((nb, b_rows, ldb)).astype(dtype)
    cbuf = rng.standard_normal((m, ldc)).astype(dtype)
    kern = pytpp.tpp.brgemm(m, n, k, dtype=dtype, lda=lda, ldb=ldb, ldc=ldc, trans_a=trans_a,
                            trans_b=trans_b, alpha=0.5, beta=1.0)
    blocks_a = [x[:, :a_cols] for x in abuf]
    blocks_b = [x[:, :b_cols] for x in bbuf]
    ref, mag, nt = reference(blocks_a, blocks_b, cbuf[:, :n], 0.5, 1.0, trans_a, trans_b)
    out = kern(abuf, bbuf, cbuf.copy(), nb)
    check(out[:, :n], ref, mag, nt, dtype)
    np.testing.assert_array_equal(out[:, n:], cbuf[:, n:])  # padding columns untouched


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_offset_mode(isa, rng, dtype):
    m, n, k = 9, 21, 6
    pool_a = rng.standard_normal(1000).astype(dtype)
    pool_b = rng.standard_normal(1000).astype(dtype)
    offs_a = np.array([0, 100, 37, 500, 37])
    offs_b = np.array([3, 900 - k * n, 250, 0, 3])
    c = np.zeros((m, n), dtype)
    kern = pytpp.tpp.brgemm(m, n, k, dtype=dtype, batch="offset")
    kern(pool_a, pool_b, c, offs_a, offs_b)
    blocks_a = [pool_a[o:o + m * k].reshape(m, k) for o in offs_a]
    blocks_b = [pool_b[o:o + k * n].reshape(k, n) for o in offs_b]
    ref, mag, nt = reference(blocks_a, blocks_b, np.zeros((m, n)), 1.0, 1.0)
    check(c, ref, mag, nt, dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_address_mode(isa, rng, dtype):
    m, n, k = 7, 40, 5
    a = rng.standard_normal((6, m, k)).astype(dtype)
    b = rng.standard_normal((4, k, n)).astype(dtype)
    ia, ib = np.array([5, 0, 0, 3, 2]), np.array([1, 3, 0, 0, 2])
    kern = pytpp.tpp.brgemm(m, n, k, dtype=dtype, batch="address", beta=0.0)
    c1 = kern(a, b, np.empty((m, n), dtype), ia, ib)
    c2 = kern([a[i] for i in ia], [b[j] for j in ib], np.empty((m, n), dtype))
    ref, mag, nt = reference(a[ia], b[ib], np.zeros((m, n)), 1.0, 0.0)
    check(c1, ref, mag, nt, dtype)
    np.testing.assert_array_equal(c1, c2)


def test_long_batch_is_chunked_correctly(isa, rng):
    # longer than one chunk of the driver (operands exceed half of L2): results must not change
    nb, m = 700, 24
    a = rng.standard_normal((nb, m, m)).astype(np.float32)
    b = rng.standard_normal((nb, m, m)).astype(np.float32)
    c = np.ones((m, m), np.float32)
    kern = pytpp.tpp.brgemm(m, m, m, dtype=np.float32, beta=1.0)
    ref, mag, nt = reference(a, b, c, 1.0, 1.0)
    check(kern(a, b, c, nb), ref, mag, nt, np.float32)


def test_count_zero_applies_beta(isa):
    c = np.full((3, 4), 2.0)
    pytpp.tpp.brgemm(3, 4, 5, beta=0.0)(np.empty(0), np.empty(0), c, 0)
    np.testing.assert_array_equal(c, 0.0)


def test_threads_give_same_result(rng):
    a = rng.standard_normal((8, 96, 80))
    b = rng.standard_normal((8, 80, 112))
    kern = pytpp.tpp.brgemm(96, 112, 80, beta=0.0)
    old = pytpp.get_num_threads()
    try:
        pytpp.set_num_threads(1)
        c1 = kern(a, b, np.empty((96, 112)), 8)
        pytpp.set_num_threads(2)
        c2 = kern(a, b, np.empty((96, 112)), 8)
    finally:
        pytpp.set_num_threads(old)
    np.testing.assert_array_equal(c1, c2)  # same blocking and summation order per element


def test_cache_returns_same_object():
    k1 = pytpp.tpp.brgemm(4, 5, 6, dtype="float32", beta=0)
    assert k1 is pytpp.tpp.brgemm(4, 5, 6, dtype=np.float32, beta=0.0)
    assert k1 is not pytpp.tpp.brgemm(4, 5, 6, dtype=np.float64, beta=0)
    with pytpp.use_isa("ref"):
        assert pytpp.tpp.brgemm(4, 5, 6, dtype="float32", beta=0).isa == "ref"


class TestBadInput:
    def test_descriptor_errors(self):
        with pytest.raises(TypeError, match="dtype"):
            pytpp.tpp.brgemm(2, 2, 2, dtype=np.int32)
        with pytest.raises(ValueError, match="m must be >= 0"):
            pytpp.tpp.brgemm(-1, 2, 2)
        with pytest.raises(TypeError, match="k must be an integer"):
            pytpp.tpp.brgemm(2, 2, 2.5)
        with pytest.raises(ValueError, match="lda=1"):
            pytpp.tpp.brgemm(2, 2, 3, lda=1)
        with pytest.raises(ValueError, match="batch"):
            pytpp.tpp.brgemm(2, 2, 2, batch="pointer")
        with pytest.raises(ValueError, match="stride_a"):
            pytpp.tpp.brgemm(2, 2, 2, batch="offset", stride_a=3)

    def test_call_errors(self):
        kern = pytpp.tpp.brgemm(4, 4, 4, beta=0.0)
        a = np.zeros((2, 4, 4)); c = np.zeros((4, 4))
        with pytest.raises(TypeError, match="a has dtype float32"):
            kern(a.astype(np.float32), a, c, 2)
        with pytest.raises(TypeError, match="numpy.ndarray"):
            kern([[1.0]], a, c, 1)
        with pytest.raises(ValueError, match="C-contiguous"):
            kern(np.zeros((2, 4, 8))[:, :, ::2], a, c, 2)
        with pytest.raises(ValueError, match="a has 32 elements"):
            kern(a, a, c, 3)
        with pytest.raises(ValueError, match="count must be >= 0"):
            kern(a, a, c, -1)
        with pytest.raises(ValueError, match="c has 15 elements"):
            kern(a, a, np.zeros(15), 1)
        ro = np.zeros((4, 4)); ro.flags.writeable = False
        with pytest.raises(ValueError, match="read-only"):
            kern(a, a, ro, 1)
        buf = np.zeros(64)
        with pytest.raises(ValueError, match="c overlaps a"):
            kern(buf, a, buf[16:32], 1)

    def test_offset_and_index_errors(self):
        kern = pytpp.tpp.brgemm(2, 2, 2, batch="offset")
        pool = np.zeros(10); c = np.zeros((2, 2))
        with pytest.raises(ValueError, match=r"a_offsets\[1\] = 7 is out of range \[0, 6\]"):
            kern(pool, pool, c, [0, 7], [0, 0])
        with pytest.raises(ValueError, match="a_offsets"):
            kern(pool, pool, c, [-1], [0])
        with pytest.raises(ValueError, match="b_offsets has 1 entries; expected 2"):
            kern(pool, pool, c, [0, 1], [0])
        with pytest.raises(TypeError, match="integers"):
            kern(pool, pool, c, [0.5], [0])
        akern = pytpp.tpp.brgemm(2, 2, 2, batch="address")
        blocks = np.zeros((3, 2, 2))
        with pytest.raises(ValueError, match=r"b_index\[0\] = 3 is out of range"):
            akern(blocks, blocks, c, [0], [3])
        with pytest.raises(ValueError, match="a_blocks has 2 arrays but b_blocks has 1"):
            akern([blocks[0], blocks[1]], [blocks[0]], c)
        with pytest.raises(ValueError, match=r"a_blocks\[0\] has 3 elements"):
            akern([np.zeros(3)], [blocks[0]], c)
