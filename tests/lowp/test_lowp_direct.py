"""The direct low-precision kernels (A rows and VNNI B read where they lie, no packing: k a whole
number of 32-bit words, B in the kernel's VNNI layout, the batch in L2) and the handles' fast
call path: the same bits as the packed path, every output written, nothing outside C touched."""
import ml_dtypes
import numpy as np
import pytest

import pytpp
from pytpp._core import _lowp as _core_lowp
from pytpp.tpp import _lowp

BF16 = ml_dtypes.bfloat16
U8, I8 = np.uint8, np.int8


def operands(rng, dt, shape):
    if dt == BF16:
        return rng.standard_normal(shape).astype(BF16)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max + 1, shape).astype(dt)


def kernels(dt):
    if dt == BF16:
        names = [k for k in _core_lowp.BF16_KERNELS[1:]
                 if k in pytpp._core._matmul.bf16_kernels_available()]
        return names + (["avx2_lanes"] if "avx2" in pytpp.available_isas() else [])
    return _core_lowp.i8_kernels_available(False, True)


def c_type(dt):
    return np.float32 if dt == BF16 else np.int32


def reference(dt, a, b, c0=None):
    """int64 sums wrapped to int32 (exact) or None for bf16 (compared between paths)."""
    if dt == BF16:
        return None
    s = np.einsum("bik,bkj->ij", a.astype(np.int64), b.astype(np.int64))
    if c0 is not None:
        s = s + c0
    return s.astype(np.int32)


def family(dt):
    return "bf16" if dt == BF16 else "i8"


def bits(c):
    return c.view(np.uint32)


def run_into_guarded(h, a, b, count, m, n, ct, start=None):
    """h into C with NaN (or a sentinel) everywhere, as a view with spare columns whose values
    must survive; returns C's copy."""
    fill = np.nan if ct == np.float32 else -7
    big = np.full((m, n + 5), fill, ct)
    c = big[:, :n]
    if start is not None:
        c[...] = start
    h(a, b, c, count)
    spare = big[:, n:]
    assert (np.isnan(spare).all() if ct == np.float32 else (spare == fill).all())
    return c.copy()


@pytest.mark.parametrize("dt", [BF16, U8], ids=["bf16", "u8s8"])
@pytest.mark.parametrize("m,n,k,count", [(1, 1, 4, 1), (7, 17, 8, 3), (13, 33, 12, 2),
                                         (17, 63, 64, 16), (33, 65, 20, 4), (64, 64, 64, 16),
                                         (65, 129, 4, 2), (12, 16, 128, 1)])
def test_direct_equals_packed(isa, rng, dt, m, n, k, count):
    bdt = BF16 if dt == BF16 else I8
    ct = c_type(dt)
    a, b = operands(rng, dt, (count, m, k)), operands(rng, bdt, (count, k, n))
    bv = pytpp.linalg.vnni_pack(b)
    plain = pytpp.tpp.brgemm(m, n, k, dtype=dt, b_dtype=bdt, beta=0.0)
    vnni = pytpp.tpp.brgemm(m, n, k, dtype=dt, b_dtype=bdt, beta=0.0, b_vnni=True)
    want = reference(dt, a, b)
    for kern in kernels(dt):
        with _lowp.using_kernel(kern, family(dt)):
            packed = run_into_guarded(plain, a, b, count, m, n, ct)
            direct = run_into_guarded(vnni, a, bv, count, m, n, ct)
        np.testing.assert_array_equal(bits(direct), bits(packed), err_msg=kern)
        if want is not None:
            np.testing.assert_array_equal(direct, want, err_msg=kern)
    # the level's own choice, through the handles' fast call
    np.testing.assert_array_equal(bits(vnni(a, bv, np.empty((m, n), ct), count)),
                                  bits(packed))


@pytest.mark.parametrize("dt", [BF16, U8], ids=["bf16", "u8s8"])
def test_direct_beta_one_and_threads(isa, rng, threads, dt):
    # enough work for a team: by columns (8 panels), then by rows (one panel)
    bdt = BF16 if dt == BF16 else I8
    ct = c_type(dt)
    for m, n in ((40, 256), (150, 16)):
        k, count = 64, 16
        a, b = operands(rng, dt, (count, m, k)), operands(rng, bdt, (count, k, n))
        c0 = (rng.standard_normal((m, n)) * 100).astype(ct)
        plain = pytpp.tpp.brgemm(m, n, k, dtype=dt, b_dtype=bdt, beta=1.0)
        vnni = pytpp.tpp.brgemm(m, n, k, dtype=dt, b_dtype=bdt, beta=1.0, b_vnni=True)
        packed = run_into_guarded(plain, a, b, count, m, n, ct, start=c0)
        direct = run_into_guarded(vnni, a, pytpp.linalg.vnni_pack(b), count, m, n, ct, start=c0)
        np.testing.assert_array_equal(bits(direct), bits(packed))
        if dt != BF16:
            np.testing.assert_array_equal(direct, reference(dt, a, b, c0.astype(np.int64)))


@pytest.mark.parametrize("dt", [BF16, U8], ids=["bf16", "u8s8"])
def test_direct_batch_modes_and_strided_a(isa, rng, dt):
    bdt = BF16 if dt == BF16 else I8
    ct = c_type(dt)
    m, n, k = 11, 40, 16
    a, b = operands(rng, dt, (6, m, k)), operands(rng, bdt, (6, k, n))
    bv = pytpp.linalg.vnni_pack(b)
    pick = [4, 0, 5, 2]
    want = pytpp.tpp.brgemm(m, n, k, dtype=dt, b_dtype=bdt, beta=0.0)(
        np.ascontiguousarray(a[pick]), np.ascontiguousarray(b[pick]), np.empty((m, n), ct), 4)
    ho = pytpp.tpp.brgemm(m, n, k, dtype=dt, b_dtype=bdt, beta=0.0, batch="offset", b_vnni=True)
    c = ho(a, bv, np.empty((m, n), ct), np.array(pick) * m * k, np.array(pick) * bv[0].size)
    np.testing.assert_array_equal(bits(c), bits(want))
    ha = pytpp.tpp.brgemm(m, n, k, dtype=dt, b_dtype=bdt, beta=0.0, batch="address",
                          b_vnni=True)
    c = ha([a[i] for i in pick], [bv[i] for i in pick], np.empty((m, n), ct))
    np.testing.assert_array_equal(bits(c), bits(want))
    # A rows further apart than k (a column slice; the next columns hold junk that must not
    # be read: NaN for bf16)
    wide = np.full((4, m, k + 8), np.nan if dt == BF16 else 99, a.dtype)
    wide[:, :, :k] = a[pick]
    hs = pytpp.tpp.brgemm(m, n, k, dtype=dt, b_dtype=bdt, beta=0.0, b_vnni=True)
    c = hs(wide[:, :, :k], np.ascontiguousarray(bv[pick]), np.empty((m, n), ct), 4)
    np.testing.assert_array_equal(bits(c), bits(want))


@pytest.mark.parametrize("dt", [BF16, U8], ids=["bf16", "u8s8"])
def test_bf16_out_and_gemm_handles(isa, rng, dt):
    bdt = BF16 if dt == BF16 else I8
    ct = c_type(dt)
    m, n, k = 19, 37, 24
    a, b = operands(rng, dt, (m, k)), operands(rng, bdt, (k, n))
    g = pytpp.tpp.gemm(m, n, k, dtype=dt, b_dtype=bdt, beta=0.0)
    gv = pytpp.tpp.gemm(m, n, k, dtype=dt, b_dtype=bdt, beta=0.0, b_vnni=True)
    want = g(a, b, np.empty((m, n), ct))
    np.testing.assert_array_equal(bits(gv(a, pytpp.linalg.vnni_pack(b), np.empty((m, n), ct))),
                                  bits(want))
    if dt == BF16:
        gb = pytpp.tpp.gemm(m, n, k, dtype=dt, beta=0.0, out_dtype=BF16, b_vnni=True)
        c = gb(a, pytpp.linalg.vnni_pack(b), np.empty((m, n), BF16))
        np.testing.assert_array_equal(c.view(np.uint16), want.astype(BF16).view(np.uint16))


def test_fast_call_declines_what_it_cannot_take(rng):
    # each of these leaves the fast path to the handle's full checks: same answer, or the error
    m, n, k, count = 6, 20, 8, 3
    a, b = operands(rng, U8, (count, m, k)), operands(rng, I8, (count, k, n))
    bv = pytpp.linalg.vnni_pack(b)
    h = pytpp.tpp.brgemm(m, n, k, dtype=U8, b_dtype=I8, beta=0.0, b_vnni=True)
    want = reference(U8, a, b)
    ch = h.c_handle
    assert ch.fast_call(a, bv, np.empty((m, n), np.int32), count)
    assert not ch.fast_call(a, bv, np.empty((m, n), np.int32), np.int64(count))
    assert not ch.fast_call(a, bv, np.empty((n, m), np.int32).T, count)
    assert not ch.fast_call(a.astype(I8), bv, np.empty((m, n), np.int32), count)
    assert not ch.fast_call(a, bv, np.empty((m, n), np.int32), count + 1)
    assert not ch.fast_call(a, b, np.empty((m, n), np.int32), count)
    # through the handle: numpy integer count, Fortran-order C, C sharing memory with A
    np.testing.assert_array_equal(h(a, bv, np.empty((m, n), np.int32), np.int64(count)), want)
    np.testing.assert_array_equal(h(a, bv, np.asfortranarray(np.empty((m, n), np.int32)),
                                    count), want)
    buf = np.zeros(a.nbytes + m * n * 4, np.uint8)
    a_in = buf[:a.nbytes].reshape(a.shape)
    a_in[...] = a
    c_over = buf[a.nbytes - 64:a.nbytes - 64 + m * n * 4].view(np.int32).reshape(m, n)
    assert not ch.fast_call(a_in, bv, c_over, count)
    np.testing.assert_array_equal(h(a_in, bv, c_over, count), want)
    with pytest.raises(ValueError):
        h(a, bv, np.empty((m, n), np.int32), -1)
    c = np.full((m, n), 5, np.int32)
    with pytest.raises(ValueError):
        h(a, bv, c, count + 1)
    assert (c == 5).all()
    c.setflags(write=False)
    with pytest.raises(ValueError):
        h(a, bv, c, count)
