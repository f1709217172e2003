"""Few rows (m = 1..4): the small-m kernels that read B as it lies (plain rows or VNNI quads),
the column split of the threads, and pre-packed B. Exact int32 against an int64 reference
(modulo 2**32) at every ISA level, on every 8-bit kernel this CPU runs, 1 and 2 threads."""
import numpy as np
import pytest

import pytpp
from pytpp._core import _lowp as _core_lowp
from pytpp.tpp import _lowp

I8, U8 = np.int8, np.uint8
PAIRS = [(U8, I8), (I8, I8), (U8, U8), (I8, U8)]
# n: one lane, a partial vector, whole vectors + a tail, past one packed B block (384 int16
# columns on AVX2); k: below a quad, odd, past one k block (256)
SHAPES = [(1, 1, 1), (1, 7, 3), (2, 17, 5), (3, 33, 63), (4, 65, 17), (1, 129, 300),
          (4, 1000, 301), (1, 3001, 400), (3, 16, 4), (2, 40, 257), (4, 70, 1030)]


def ints(rng, shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def ref(a, b):
    return (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)


def kernels_for(adt, bdt):
    return _core_lowp.i8_kernels_available(np.dtype(adt) == I8, np.dtype(bdt) == I8)


@pytest.mark.parametrize("adt,bdt", PAIRS)
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_plain_vnni_and_packed_b(isa, threads, rng, adt, bdt, m, n, k):
    a, b = ints(rng, (m, k), adt), ints(rng, (k, n), bdt)
    want = ref(a, b)
    plain = pytpp.tpp.gemm(m, n, k, dtype=adt, b_dtype=bdt, beta=0.0)
    vnni = pytpp.tpp.gemm(m, n, k, dtype=adt, b_dtype=bdt, beta=0.0, b_vnni=True)
    bv = pytpp.linalg.vnni_pack(b)
    for kern in kernels_for(adt, bdt):
        with _lowp.using_kernel(kern):
            for h, bb in ((plain, b), (vnni, bv), (plain, plain.pack(b)), (vnni, vnni.pack(bv))):
                c = np.full((m, n), 7, np.int32)
                assert h(a, bb, c) is c
                np.testing.assert_array_equal(c, want, err_msg=f"{kern} {type(bb).__name__}")


@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_seven_bit_a(isa, threads, rng, m):
    n, k = 203, 1030                # past two k blocks of the 1-byte kernels (512)
    a = rng.integers(0, 128, (m, k)).astype(U8)
    b = ints(rng, (k, n), I8)
    for vnni in (False, True):
        h = pytpp.tpp.gemm(m, n, k, dtype=U8, b_dtype=I8, beta=0.0, b_vnni=vnni, a_7bit=True)
        bb = pytpp.linalg.vnni_pack(b) if vnni else b
        np.testing.assert_array_equal(h(a, bb, np.empty((m, n), np.int32)), ref(a, b))
        np.testing.assert_array_equal(h(a, h.pack(bb), np.empty((m, n), np.int32)), ref(a, b))


def test_extremes_wrap(isa, threads):
    # 255 * -128 summed over k = 70001 wraps int32: equal modulo 2**32
    m, n, k = 3, 37, 70001
    for adt, bdt, av, bv in [(U8, I8, 255, -128), (I8, I8, -128, -128), (I8, U8, -128, 255)]:
        a, b = np.full((m, k), av, adt), np.full((k, n), bv, bdt)
        for vnni in (False, True):
            h = pytpp.tpp.gemm(m, n, k, dtype=adt, b_dtype=bdt, beta=0.0, b_vnni=vnni)
            bb = pytpp.linalg.vnni_pack(b) if vnni else b
            for kern in kernels_for(adt, bdt):
                with _lowp.using_kernel(kern):
                    c = h(a, bb, np.empty((m, n), np.int32))
                    assert (c == np.int64(av * bv * k).astype(np.int32)).all(), kern


def test_views_beta_and_batches(isa, threads, rng):
    m, n, k, count = 2, 45, 130, 3
    a = ints(rng, (count, m, k), U8)
    wide = ints(rng, (count, k, n + 9), I8)
    b = wide[:, :, 3:3 + n]                      # row stride n + 9: still read in place
    want = sum(ref(a[i], b[i]).astype(np.int64) for i in range(count)).astype(np.int32)
    h = pytpp.tpp.brgemm(m, n, k, dtype=U8, b_dtype=I8, beta=0.0)
    np.testing.assert_array_equal(h(a, b, np.empty((m, n), np.int32), count), want)
    # columns with a stride (not read in place: packed) and a Fortran-order A
    bs = ints(rng, (count, k, 2 * n), I8)[:, :, ::2]
    af = np.asfortranarray(a[0])
    g = pytpp.tpp.gemm(m, n, k, dtype=U8, b_dtype=I8, beta=0.0)
    np.testing.assert_array_equal(g(af, bs[0], np.empty((m, n), np.int32)), ref(a[0], bs[0]))
    # B rows in reverse (negative row stride): still read in place
    br = b[0][::-1]
    np.testing.assert_array_equal(g(a[0], br, np.empty((m, n), np.int32)), ref(a[0], br))
    # beta = 1 adds to C
    acc = pytpp.tpp.gemm(m, n, k, dtype=U8, b_dtype=I8, beta=1.0)
    c = ints(rng, (m, n), I8).astype(np.int32)
    np.testing.assert_array_equal(acc(a[0], b[0], c.copy()), c + ref(a[0], b[0]))
    # comp is added to every row
    comp = ints(rng, (n,), I8).astype(np.int32)
    np.testing.assert_array_equal(g(a[0], b[0], np.empty((m, n), np.int32), comp=comp),
                                  ref(a[0], b[0]) + comp)


def test_threads_agree(rng):
    m, n, k = 1, 4099, 515
    a, b = ints(rng, (m, k), U8), ints(rng, (k, n), I8)
    h = pytpp.tpp.gemm(m, n, k, dtype=U8, b_dtype=I8, beta=0.0)
    old = pytpp.get_num_threads()
    outs = []
    try:
        for t in (1, 2):
            pytpp.set_num_threads(t)
            outs.append(h(a, b, np.empty((m, n), np.int32)))
    finally:
        pytpp.set_num_threads(old)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], ref(a, b))


def test_gemv_kernels_are_in_the_kernel_map():
    # every 8-bit lane table carries its small-m kernel (one template, every level)
    from pytpp import _info
    text = _info.kernel_map()
    for isa in ("ref", "avx2", "avx2_u7", "avx_vnni", "avx512", "avx512_vnni"):
        assert f"pytpp_i8_gemv_{isa}" in text, isa
