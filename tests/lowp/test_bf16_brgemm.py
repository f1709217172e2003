"""bf16 BRGEMM / GEMM handles: every kernel path gives the same bits (the vdpbf16ps rule, as
pytpp.matmul's bf16 kernels), within the fp32-accumulation bound of a float64 reference."""
import ml_dtypes
import numpy as np
import pytest

import pytpp
from pytpp._core import _lowp as _core_lowp
from pytpp.tpp import _lowp

BF16 = ml_dtypes.bfloat16


def bf16(rng, shape):
    return rng.standard_normal(shape).astype(BF16)


def kernels():
    """The bf16 kernels this CPU runs: the packed-panel ones and the AVX2 lane kernels."""
    names = [k for k in _core_lowp.BF16_KERNELS[1:]
             if k in pytpp._core._matmul.bf16_kernels_available()]
    return names + (["avx2_lanes"] if "avx2" in pytpp.available_isas() else [])


@pytest.mark.parametrize("m,n,k,count", [(1, 1, 1, 1), (7, 17, 33, 3), (64, 64, 64, 4),
                                         (13, 40, 300, 2), (65, 9, 6, 1), (9, 40, 3333, 1)])
def test_paths_agree_bit_for_bit(isa, rng, m, n, k, count):
    a, b = bf16(rng, (count, m, k)), bf16(rng, (count, k, n))
    h = pytpp.tpp.brgemm(m, n, k, dtype=BF16, beta=0.0)
    results = {}
    for kern in kernels():
        with _lowp.using_kernel(kern, "bf16"):
            results[kern] = h(a, b, np.empty((m, n), np.float32), count).copy()
    first = next(iter(results.values()))
    for kern, c in results.items():
        np.testing.assert_array_equal(c.view(np.uint32), first.view(np.uint32), err_msg=kern)
    ref = np.einsum("bik,bkj->ij", a.astype(np.float64), b.astype(np.float64))
    mag = np.einsum("bik,bkj->ij", np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    # products of bf16 values are exact in fp32; each of the count*k additions rounds once
    assert (np.abs(first - ref) <= count * k * 2.0 ** -24 * mag + 1e-30).all()


@pytest.mark.parametrize("m,n,k,count", [(40, 1100, 70, 2), (150, 700, 260, 1)])
def test_strided_a_packed_once_for_many_column_blocks(isa, threads, rng, m, n, k, count):
    # A with column stride 2 is packed (no direct kernels), once per k block for all the column
    # blocks of a wide n: the same bits as the contiguous A
    a = bf16(rng, (count, m, 2 * k))[:, :, ::2]
    b = bf16(rng, (count, k, n))
    h = pytpp.tpp.brgemm(m, n, k, dtype=BF16, beta=0.0)
    for kern in kernels():
        with _lowp.using_kernel(kern, "bf16"):
            want = h(np.ascontiguousarray(a), b, np.empty((m, n), np.float32), count)
            got = h(a, b, np.empty((m, n), np.float32), count)
            np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=kern)
    ref = np.einsum("bik,bkj->ij", a.astype(np.float64), b.astype(np.float64))
    mag = np.einsum("bik,bkj->ij", np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    assert (np.abs(got - ref) <= count * k * 2.0 ** -24 * mag + 1e-30).all()


def test_one_block_equals_matmul(isa, rng):
    # one product: the same chain per output as pytpp.matmul's bf16 kernels, so the same bits
    m, n, k = 37, 29, 91
    a, b = bf16(rng, (m, k)), bf16(rng, (k, n))
    g = pytpp.tpp.gemm(m, n, k, dtype=BF16, beta=0.0)
    c = g(a, b, np.empty((m, n), np.float32))
    np.testing.assert_array_equal(c.view(np.uint32), pytpp.matmul(a, b).view(np.uint32))


def test_vnni_b_and_batch_modes(isa, rng):
    m, n, k = 9, 14, 23
    a, b = bf16(rng, (5, m, k)), bf16(rng, (5, k, n))
    want = pytpp.tpp.brgemm(m, n, k, dtype=BF16, beta=0.0)(a, b, np.empty((m, n), np.float32), 5)
    bv = pytpp.linalg.vnni_pack(b)
    assert bv.shape == (5, 12, n, 2)
    hv = pytpp.tpp.brgemm(m, n, k, dtype=BF16, beta=0.0, b_vnni=True)
    np.testing.assert_array_equal(hv(a, bv, np.empty((m, n), np.float32), 5), want)
    ho = pytpp.tpp.brgemm(m, n, k, dtype=BF16, beta=0.0, batch="offset")
    np.testing.assert_array_equal(
        ho(a, b, np.empty((m, n), np.float32), np.arange(5) * m * k, np.arange(5) * k * n), want)
    ha = pytpp.tpp.brgemm(m, n, k, dtype=BF16, beta=0.0, batch="address")
    np.testing.assert_array_equal(ha(list(a), list(b), np.empty((m, n), np.float32)), want)


def test_bf16_out_is_the_float32_result_rounded(isa, rng):
    m, n, k = 8, 19, 40
    a, b = bf16(rng, (2, m, k)), bf16(rng, (2, k, n))
    f32 = pytpp.tpp.brgemm(m, n, k, dtype=BF16, beta=0.0)(a, b, np.empty((m, n), np.float32), 2)
    hb = pytpp.tpp.brgemm(m, n, k, dtype=BF16, beta=0.0, out_dtype=BF16)
    c = hb(a, b, np.empty((m, n), BF16), 2)
    np.testing.assert_array_equal(c.view(np.uint16), f32.astype(BF16).view(np.uint16))
    # beta = 1 on a bf16 C: C widened, accumulated in fp32, rounded once
    c0 = bf16(rng, (m, n))
    h1 = pytpp.tpp.brgemm(m, n, k, dtype=BF16, beta=1.0, out_dtype=BF16)
    c1 = h1(a, b, c0.copy(), 2)
    assert np.abs(c1.astype(np.float64) - (f32 + c0.astype(np.float32))).max() <= \
        2.0 ** -8 * np.abs(f32 + c0.astype(np.float32)).max() + 1e-6


def test_bad_input(rng):
    m, n, k = 4, 5, 6
    h = pytpp.tpp.brgemm(m, n, k, dtype=BF16, beta=0.0)
    a, b = bf16(rng, (1, m, k)), bf16(rng, (1, k, n))
    c = np.full((m, n), 2.0, np.float32)
    for args, err in [((a.astype(np.float32), b, c, 1), TypeError),
                      ((a, b.astype(np.float16), c, 1), TypeError),
                      ((a, b, c.astype(np.float64), 1), TypeError),
                      ((a, pytpp.linalg.vnni_pack(b), c, 1), ValueError)]:
        with pytest.raises(err):
            h(*args)
        assert (c == 2.0).all()
    with pytest.raises(TypeError, match="b_dtype"):
        pytpp.tpp.brgemm(m, n, k, dtype=BF16, b_dtype=np.int8)


@pytest.mark.parametrize("row_elems,n", [(512, 512), (1024, 1000)])
def test_paths_agree_with_c_rows_2_or_4_kib_apart(isa, rng, row_elems, n):
    # C rows whose addresses alias in the low 12 bits (the 8-bit kernels then sum k blocks in a
    # tile): bf16's fp32 sums must keep their order, beta 1 over C's own values, several k blocks
    m, k, count = 9, 700, 2
    a, b = bf16(rng, (count, m, k)), bf16(rng, (count, k, n))
    start = rng.standard_normal((m, n)).astype(np.float32)
    h = pytpp.tpp.brgemm(m, n, k, dtype=BF16, beta=1.0)
    results = {}
    for kern in kernels():
        with _lowp.using_kernel(kern, "bf16"):
            big = np.full((m, row_elems), -5, np.float32)
            c = big[:, :n]
            c[...] = start
            h(a, b, c, count)
            assert (big[:, n:] == -5).all(), kern
            results[kern] = c.copy()
    plain = {}
    for kern in kernels():
        with _lowp.using_kernel(kern, "bf16"):
            plain[kern] = h(a, b, start.copy(), count)      # C rows of n elements
    for kern, c in results.items():
        np.testing.assert_array_equal(c.view(np.uint32), plain[kern].view(np.uint32),
                                      err_msg=kern)
        np.testing.assert_array_equal(c.view(np.uint32), results[kernels()[0]].view(np.uint32),
                                      err_msg=kern)
    ref = start + np.einsum("bik,bkj->ij", a.astype(np.float64), b.astype(np.float64))
    mag = np.abs(start) + np.einsum("bik,bkj->ij", np.abs(a.astype(np.float64)),
                                    np.abs(b.astype(np.float64)))
    assert (np.abs(results[kernels()[0]] - ref) <= (count * k + 1) * 2.0 ** -24 * mag).all()
