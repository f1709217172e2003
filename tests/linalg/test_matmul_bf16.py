"""pytpp.matmul with bfloat16: fp32 accumulation, vdpbf16ps semantics, bit-equal emulations.

Accuracy contract (DESIGN 7): inputs are bf16 (exact in float32), products are exact in float32,
so each output is a k-term float32 sum: |C - C_exact| <= k * eps32 * (|A||B|), C_exact computed
in float64 on the bf16 inputs; tested at 2x that bound. Every kernel (native vdpbf16ps, the
AVX-512 and AVX2 emulations of paper Fig. 4, the portable reference) must give the same bits.
"""
import numpy as np
import pytest

import pytpp
from pytpp._core import _matmul as _cm
from pytpp.linalg import _operands as _ops

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
KERNELS = _cm.bf16_kernels_available()


@pytest.fixture(params=KERNELS)
def bf16_kernel(request):
    old = _ops.bf16_kernel
    _ops.bf16_kernel = _cm.BF16_KERNELS.index(request.param)
    yield request.param
    _ops.bf16_kernel = old


def rand(rng, shape):
    return rng.standard_normal(shape).astype(BF16)


def check(c, a, b):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref, mag = a64 @ b64, np.abs(a64) @ np.abs(b64)
    tol = 2.0 * max(a.shape[-1], 1) * np.finfo(np.float32).eps * mag + 1e-30
    assert np.all(np.abs(c.astype(np.float64) - ref) <= tol)


def chain_reference(a, b):
    """vdpbf16ps semantics in numpy: per output, for each k pair, acc += odd product then even
    product, each rounded to float32 (products are exact in float64, so float64 add + round is
    the fused result except for double-rounding ties, which random data does not hit)."""
    a32, b32 = a.astype(np.float32).astype(np.float64), b.astype(np.float32).astype(np.float64)
    m, k = a.shape
    acc = np.zeros((m, b.shape[1]), np.float32)
    for q in range(0, k, 2):
        if q + 1 < k:
            acc = (acc + np.outer(a32[:, q + 1], b32[q + 1])).astype(np.float32)
        acc = (acc + np.outer(a32[:, q], b32[q])).astype(np.float32)
    return acc


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (7, 17, 33), (33, 65, 7), (65, 63, 64), (13, 40, 130)])
def test_bf16_accuracy_and_chain(bf16_kernel, m, n, k, rng):
    a, b = rand(rng, (m, k)), rand(rng, (k, n))
    c = pytpp.matmul(a, b)
    assert c.dtype == np.float32
    check(c, a, b)
    np.testing.assert_array_equal(c, chain_reference(a, b))


@pytest.mark.parametrize("m,n,k", [(1, 33, 3), (17, 31, 65), (70, 50, 129), (130, 97, 300)])
def test_emulation_bit_equal_to_native(m, n, k, rng):
    """Every bf16 kernel gives the same bits, including denormals (flushed), NaN, Inf and huge
    products that overflow."""
    a, b = rand(rng, (m, k)), rand(rng, (k, n))
    au, bu = a.view(np.uint16), b.view(np.uint16)
    au.flat[::7] = rng.integers(0, 0x80, au.flat[::7].shape, dtype=np.uint16) | 0x0000  # denormals
    bu.flat[::11] = rng.integers(0, 0x80, bu.flat[::11].shape, dtype=np.uint16) | 0x8000
    au.flat[5::13] = 0x7F00 | rng.integers(0, 0x7F, au.flat[5::13].shape, dtype=np.uint16)  # ~1e38
    a[min(2, m - 1), 0] = np.nan
    b[0, min(3, n - 1)] = np.inf
    results = {}
    old = _ops.bf16_kernel
    try:
        for name in KERNELS:
            _ops.bf16_kernel = _cm.BF16_KERNELS.index(name)
            with np.errstate(all="ignore"):
                results[name] = pytpp.matmul(a, b).view(np.uint32)
    finally:
        _ops.bf16_kernel = old
    first = results[KERNELS[-1]]
    for name, r in results.items():
        nan_first, nan_r = np.isnan(first.view(np.float32)), np.isnan(r.view(np.float32))
        np.testing.assert_array_equal(nan_first, nan_r, err_msg=name)
        np.testing.assert_array_equal(r[~nan_r], first[~nan_first], err_msg=name)


def test_bf16_output_rounds_to_nearest_even(bf16_kernel, rng):
    a, b = rand(rng, (20, 37)), rand(rng, (37, 19))
    c32 = pytpp.matmul(a, b)
    c16 = pytpp.matmul(a, b, dtype=BF16)
    assert c16.dtype == BF16
    np.testing.assert_array_equal(c16.view(np.uint16), c32.astype(BF16).view(np.uint16))
    out = np.empty((19, 20), BF16).T  # non-contiguous bf16 out
    pytpp.matmul(a, b, out=out)
    np.testing.assert_array_equal(out.view(np.uint16), c32.astype(BF16).view(np.uint16))
    # ties and NaN in the conversion itself
    src = np.array([[1.0 + 2**-8, 1.0 + 3 * 2**-8, np.nan, -np.inf, 3.3895314e38]], np.float32)
    dst = np.empty(src.shape, BF16)
    _cm.f32_to_bf16(src, dst.view(np.uint16))
    np.testing.assert_array_equal(dst.astype(np.float32)[:, [0, 1, 3, 4]],
                                  src.astype(BF16).astype(np.float32)[:, [0, 1, 3, 4]])
    assert np.isnan(dst.astype(np.float32)[0, 2])


def test_mixed_bf16_float32(isa, rng):
    a, b = rand(rng, (9, 21)), rng.standard_normal((21, 5)).astype(np.float32)
    c = pytpp.matmul(a, b)
    assert c.dtype == np.float32
    np.testing.assert_array_equal(c, pytpp.matmul(a.astype(np.float32), b))
    assert pytpp.matmul(b.T, a.T).dtype == np.float32
    assert pytpp.matmul(a, b.astype(np.float64)).dtype == np.float64
    c64 = pytpp.matmul(a, a.T, dtype=np.float64)
    assert c64.dtype == np.float64


def test_bf16_layouts_stacks_threads(isa, threads, rng):
    a, b = rand(rng, (3, 70, 129)), rand(rng, (129, 61))
    for x, y in [(a, b), (a[:, ::-1], b[::-1]), (np.swapaxes(np.ascontiguousarray(np.swapaxes(a, 1, 2)), 1, 2),
                                                  np.asfortranarray(b))]:
        c = pytpp.matmul(x, y)
        assert c.shape == (3, 70, 61)
        check(c, x, y)
    v = rand(rng, 129)
    check(pytpp.matmul(a, v)[..., None], a, v[:, None])


@pytest.mark.parametrize("m,n,k", [(1, 1, 2), (5, 7, 9), (12, 16, 64), (17, 33, 31), (64, 32, 64)])
def test_small_products_any_layout_bit_exact(bf16_kernel, rng, m, n, k):
    """Small products (the direct kernels on stack buffers): A and B in any layout, an odd k,
    C a view with spare columns that must stay NaN, every output written."""
    a, b = rand(rng, (m, k)), rand(rng, (k, n))
    want = chain_reference(a, b)
    views = [(a, b), (np.asfortranarray(a), np.asfortranarray(b)),
             (a[::-1][::-1], b[:, ::-1][:, ::-1]),
             (np.ascontiguousarray(a[:, ::-1])[:, ::-1], np.ascontiguousarray(b.T).T)]
    for x, y in views:
        big = np.full((m, n + 3), np.nan, np.float32)
        out = big[:, :n]
        pytpp.matmul(x, y, out=out)
        np.testing.assert_array_equal(out, want)
        assert np.isnan(big[:, n:]).all()


def test_bf16_large_k_blocks(rng):
    """k beyond one kc block (odd, so the last pair is padded) keeps one chain per output."""
    a, b = rand(rng, (13, 4099)), rand(rng, (4099, 17))
    c = pytpp.matmul(a, b)
    check(c, a, b)


def test_bf16_zero_and_nan(rng):
    z = pytpp.matmul(np.ones((3, 0), BF16), np.ones((0, 2), BF16))
    np.testing.assert_array_equal(z, np.zeros((3, 2), np.float32))
    a, b = rand(rng, (5, 8)), rand(rng, (8, 4))
    a[1, 3] = np.nan
    c = pytpp.matmul(a, b)
    assert np.isnan(c[1]).all() and not np.isnan(np.delete(c, 1, 0)).any()


@pytest.mark.parametrize("k", [1501, 2048])
def test_bf16_packed_and_blocked_k_bit_exact(bf16_kernel, threads, k, rng):
    """k over several kc blocks (odd: padded last pair), n off the register block, stacks: the
    unpacked product, the PackedMatrix product (kept in bf16 and widened per block by the
    widening kernels) and the vdpbf16ps chain agree bit for bit."""
    a, b = rand(rng, (2, 7, k)), rand(rng, (k, 37))
    c = pytpp.matmul(a, b)
    np.testing.assert_array_equal(c[1], chain_reference(a[1], b))
    pb = pytpp.linalg.pack(b)
    np.testing.assert_array_equal(pytpp.matmul(a, pb), c)
    big = rand(rng, (300, k))   # enough rows for both threads
    np.testing.assert_array_equal(pytpp.matmul(big, pb), pytpp.matmul(big, b))


def test_bf16_all_loops_with_tiny_blocks(bf16_kernel, threads, rng):
    """Every loop of the five iterates several times with partial last blocks (k odd), for packing
    per call and for a PackedMatrix layout (kept in bf16 and widened per block where the kernels
    widen): the bits stay those of the vdpbf16ps chain."""
    kern = _cm.BF16_KERNELS.index(bf16_kernel)
    level = pytpp._config.LEVELS.index(pytpp.get_isa())
    blk = _cm.blocking(_cm.DT_BF16, level, kern)
    blk.update(kc=16, mc=3 * blk["mr"], nc=2 * blk["nr"])
    m, n, k = 5 * blk["mr"] + 3, 7 * blk["nr"] + 5, 71
    a, b = rand(rng, (m, k)), rand(rng, (k, n))
    ref = chain_reference(a, b)
    au, bu = a.view(np.uint16), b.view(np.uint16)
    for x, y in [(au, bu), (np.asfortranarray(au), bu[:, ::-1][:, ::-1])]:
        c = np.empty((m, n), np.float32)
        _cm.gemm_blocked(x, y, c, _cm.DT_BF16, level, blk, kern)
        np.testing.assert_array_equal(c, ref)
    packed = np.empty(_cm.packed_size(blk, _cm.DT_BF16, k, n), np.uint16)
    _cm.pack_b(blk, _cm.DT_BF16, bu, packed)
    c = np.empty((m, n), np.float32)
    zero = np.zeros(1, np.int64)
    _cm.gemm_prepacked(au, packed, n, c, zero, zero, blk, _cm.DT_BF16, level, kern)
    np.testing.assert_array_equal(c, ref)


@pytest.mark.parametrize("m,n,k", [(1, 37, 301), (5, 100, 64), (13, 17, 1001), (40, 290, 700)])
def test_transposed_weight_packs_bit_for_bit(bf16_kernel, rng, m, n, k):
    """x @ w.T with w (n, k) in torch's layout: the transposed B is packed by reading each row of
    w front to back (partial panels, odd k padded); the same bits as the contiguous B, on every
    bf16 kernel, and a PackedMatrix of w.T likewise."""
    x, w = rand(rng, (m, k)), rand(rng, (n, k))
    expect = pytpp.matmul(x, np.ascontiguousarray(w.T))
    got = pytpp.matmul(x, w.T)
    np.testing.assert_array_equal(np.asarray(got).view(np.uint16),
                                  np.asarray(expect).view(np.uint16))
    packed = pytpp.matmul(x, pytpp.linalg.pack(w.T))
    np.testing.assert_array_equal(np.asarray(packed).view(np.uint16),
                                  np.asarray(expect).view(np.uint16))
    check(np.asarray(got, np.float32), x, w.T)


@pytest.mark.parametrize("m,n,k,width,start", [(20, 45, 1001, 1002, 0), (16, 33, 4099, 4100, 0),
                                               (14, 70, 600, 602, 1), (33, 32, 2, 4, 0)])
def test_transposed_weight_views_pack_bit_for_bit(bf16_kernel, rng, m, n, k, width, start):
    """x @ w.T with w a view of wider rows: pairs of k read as 32-bit words and transposed
    (an odd depth's last value alone, k blocks of odd length, a last panel of fewer rows), and
    w starting off a 4-byte boundary (the value-by-value packer): the bits of a contiguous B."""
    x = rand(rng, (m, k))
    w = rand(rng, (n, width))[:, start:start + k]
    expect = pytpp.matmul(x, np.ascontiguousarray(w.T))
    got = pytpp.matmul(x, w.T)
    np.testing.assert_array_equal(np.asarray(got).view(np.uint16),
                                  np.asarray(expect).view(np.uint16))
    check(np.asarray(got, np.float32), x, w.T)
