"""8-bit BRGEMM / GEMM handles: exact int32 against an int64 reference (modulo 2**32), at every
ISA level and on every 8-bit kernel this CPU runs, all batch modes, VNNI B, strided views."""
import pickle

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pytpp
from pytpp._core import _lowp as _core_lowp
from pytpp.tpp import _lowp

I8, U8 = np.int8, np.uint8
PAIRS = [(U8, I8), (I8, I8), (U8, U8), (I8, U8)]


def ints(rng, shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def ref_sum(a, b):
    """sum_i a[i] @ b[i] in int64, then wrapped to int32 as the kernels' sums wrap."""
    s = np.einsum("bik,bkj->ij", a.astype(np.int64), b.astype(np.int64))
    return s.astype(np.int32)


def kernels_for(adt, bdt):
    return _core_lowp.i8_kernels_available(np.dtype(adt) == I8, np.dtype(bdt) == I8)


@pytest.mark.parametrize("adt,bdt", PAIRS)
@pytest.mark.parametrize("m,n,k,count", [(1, 1, 1, 1), (3, 7, 17, 2), (7, 17, 63, 3),
                                         (17, 65, 5, 1), (63, 33, 129, 2), (65, 129, 300, 1),
                                         (6, 16, 4, 4), (13, 40, 7, 5)])
def test_stride_mode_exact(isa, rng, adt, bdt, m, n, k, count):
    a, b = ints(rng, (count, m, k), adt), ints(rng, (count, k, n), bdt)
    h = pytpp.tpp.brgemm(m, n, k, dtype=adt, b_dtype=bdt, beta=0.0)
    want = ref_sum(a, b)
    for kern in kernels_for(adt, bdt):
        with _lowp.using_kernel(kern):
            c = np.full((m, n), 7, np.int32)
            assert h(a, b, c, count) is c
            np.testing.assert_array_equal(c, want, err_msg=kern)


@pytest.mark.parametrize("adt,bdt,av,bv", [(U8, I8, 255, -128), (I8, I8, -128, -128),
                                           (U8, U8, 255, 255), (I8, U8, -128, 255)])
def test_extremes_and_wrapping(isa, adt, bdt, av, bv):
    # k large enough that the int32 sums wrap: results equal the int64 ones modulo 2**32
    m, n, k = 5, 19, 70001
    a = np.full((1, m, k), av, adt)
    b = np.full((1, k, n), bv, bdt)
    h = pytpp.tpp.gemm(m, n, k, dtype=adt, b_dtype=bdt, beta=0.0)
    exact = av * bv * k
    for kern in kernels_for(adt, bdt):
        with _lowp.using_kernel(kern):
            c = h(a[0], b[0], np.empty((m, n), np.int32))
            assert (c == np.int64(exact).astype(np.int32)).all(), kern
            assert ((c.astype(np.int64) - exact) % 2 ** 32 == 0).all()


@pytest.mark.parametrize("adt,bdt", PAIRS)
def test_vnni_b_equals_plain_b(isa, rng, adt, bdt):
    m, n, k, count = 9, 21, 31, 3
    a, b = ints(rng, (count, m, k), adt), ints(rng, (count, k, n), bdt)
    bv = pytpp.linalg.vnni_pack(b)
    assert bv.shape == (count, 8, n, 4)
    h = pytpp.tpp.brgemm(m, n, k, dtype=adt, b_dtype=bdt, beta=0.0, b_vnni=True)
    for kern in kernels_for(adt, bdt):
        with _lowp.using_kernel(kern):
            np.testing.assert_array_equal(h(a, bv, np.empty((m, n), np.int32), count),
                                          ref_sum(a, b))


def test_offset_and_address_modes(isa, rng):
    m, n, k = 11, 18, 27
    a, b = ints(rng, (6, m, k), U8), ints(rng, (6, k, n), I8)
    pick = [4, 0, 5, 2]
    want = ref_sum(a[pick], b[pick])
    ho = pytpp.tpp.brgemm(m, n, k, dtype=U8, b_dtype=I8, beta=0.0, batch="offset")
    c = ho(a, b, np.empty((m, n), np.int32), np.array(pick) * m * k, np.array(pick) * k * n)
    np.testing.assert_array_equal(c, want)
    ha = pytpp.tpp.brgemm(m, n, k, dtype=U8, b_dtype=I8, beta=0.0, batch="address")
    np.testing.assert_array_equal(ha([a[i] for i in pick], [b[i] for i in pick],
                                     np.empty((m, n), np.int32)), want)
    # VNNI B in offset mode: offsets count elements of the packed blocks
    bv = pytpp.linalg.vnni_pack(b)
    hv = pytpp.tpp.brgemm(m, n, k, dtype=U8, b_dtype=I8, beta=0.0, batch="offset", b_vnni=True)
    c = hv(a, bv, np.empty((m, n), np.int32), np.array(pick) * m * k,
           np.array(pick) * bv[0].size)
    np.testing.assert_array_equal(c, want)


def test_beta_one_accumulates(isa, rng):
    m, n, k = 7, 9, 13
    a, b = ints(rng, (2, m, k), I8), ints(rng, (2, k, n), I8)
    c0 = ints(rng, (m, n), np.int16).astype(np.int32)
    h = pytpp.tpp.brgemm(m, n, k, dtype=I8, beta=1.0)
    c = h(a, b, c0.copy(), 2)
    np.testing.assert_array_equal(c, c0 + ref_sum(a, b))


def test_strided_and_fortran_views(isa, rng):
    m, n, k = 13, 10, 19
    big_a = ints(rng, (3, 2 * m, 3 * k), U8)
    big_b = ints(rng, (3, k, 2 * n), I8)
    a = big_a[:, ::2, 1::3]                       # non-unit strides on both axes
    b = np.asfortranarray(big_b[:, :, ::2])       # Fortran order per block
    c_big = np.zeros((m, 2 * n), np.int32)
    c = c_big[:, ::2]                             # C with a column stride: computed, then stored
    h = pytpp.tpp.brgemm(m, n, k, dtype=U8, b_dtype=I8, beta=0.0)
    h(a, b, c, 3)
    np.testing.assert_array_equal(c, ref_sum(a, b))
    assert (c_big[:, 1::2] == 0).all()


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 40), n=st.integers(1, 70), k=st.integers(1, 90),
       count=st.integers(0, 4), pair=st.sampled_from(PAIRS), vnni=st.booleans(),
       seed=st.integers(0, 2 ** 32 - 1))
def test_random_shapes(m, n, k, count, pair, vnni, seed):
    rng = np.random.default_rng(seed)
    adt, bdt = pair
    a, b = ints(rng, (count, m, k), adt), ints(rng, (count, k, n), bdt)
    h = pytpp.tpp.brgemm(m, n, k, dtype=adt, b_dtype=bdt, beta=0.0, b_vnni=vnni)
    bb = pytpp.linalg.vnni_pack(b) if vnni else b
    c = h(a, bb, np.full((m, n), -1, np.int32), count)
    np.testing.assert_array_equal(c, ref_sum(a, b) if count else np.zeros((m, n), np.int32))


def test_zero_sizes(isa):
    for m, n, k in [(0, 3, 4), (3, 0, 4), (3, 4, 0)]:
        h = pytpp.tpp.gemm(m, n, k, dtype=U8, b_dtype=I8, beta=0.0)
        c = np.full((m, n), 5, np.int32)
        h(np.zeros((m, k), U8), np.zeros((k, n), I8), c)
        assert (c == 0).all()


def test_threads_give_the_same_answer(rng, threads):
    m, n, k = 150, 70, 520
    a, b = ints(rng, (2, m, k), U8), ints(rng, (2, k, n), I8)
    h = pytpp.tpp.brgemm(m, n, k, dtype=U8, b_dtype=I8, beta=0.0)
    np.testing.assert_array_equal(h(a, b, np.empty((m, n), np.int32), 2), ref_sum(a, b))


def test_handles_are_cached_and_pickle(isa):
    h = pytpp.tpp.brgemm(4, 5, 6, dtype=U8, b_dtype=I8, beta=0.0)
    assert pytpp.tpp.brgemm(4, 5, 6, dtype="uint8", b_dtype="int8", beta=0) is h
    assert pytpp.tpp.brgemm(4, 5, 6, dtype=U8, beta=0.0) is not h
    assert pickle.loads(pickle.dumps(h)) is h
    assert isinstance(h, pytpp.tpp.LowpKernel) and h.isa == isa


def test_bad_input_leaves_c_untouched(rng):
    m, n, k = 4, 5, 6
    h = pytpp.tpp.brgemm(m, n, k, dtype=U8, b_dtype=I8, beta=0.0)
    a, b = ints(rng, (2, m, k), U8), ints(rng, (2, k, n), I8)
    c = np.full((m, n), 3, np.int32)
    bad = [((a.astype(np.float32), b, c, 2), TypeError),        # float operand to an int kernel
           ((a, b.astype(np.int16), c, 2), TypeError),
           ((a, b, c.astype(np.int64), 2), TypeError),           # C must be int32
           ((a[:, :, :5], b, c, 2), ValueError),                 # k mismatch
           ((a, b, c, 3), ValueError),                           # more blocks than given
           ((a, pytpp.linalg.vnni_pack(b), c, 2), ValueError),   # VNNI B to a plain-B handle
           ((a, b, c[:, :4], 2), ValueError)]
    for args, err in bad:
        with pytest.raises(err):
            h(*args)
        assert (c == 3).all()
    hv = pytpp.tpp.brgemm(m, n, k, dtype=U8, b_dtype=I8, beta=0.0, b_vnni=True)
    with pytest.raises(ValueError, match="shape"):
        hv(a, b, c, 2)                                           # plain B to a VNNI handle
    ho = pytpp.tpp.brgemm(m, n, k, dtype=U8, b_dtype=I8, beta=0.0, batch="offset")
    with pytest.raises(ValueError, match="a_offsets"):
        ho(a, b, c, np.array([0, 2 * m * k]), np.array([0, 0]))  # block past the end
    assert (c == 3).all()
    with pytest.raises(ValueError, match="beta"):
        pytpp.tpp.brgemm(m, n, k, dtype=U8, beta=0.5)
    with pytest.raises(ValueError, match="lda"):
        pytpp.tpp.brgemm(m, n, k, dtype=U8, lda=9)
    with pytest.raises(TypeError, match="out_dtype"):
        pytpp.tpp.brgemm(m, n, k, dtype=U8, out_dtype=np.float32)
    with pytest.raises(TypeError, match="b_dtype"):
        pytpp.tpp.brgemm(m, n, k, dtype=np.float32, b_dtype=I8)
    with pytest.raises(ValueError, match="b_vnni"):
        pytpp.tpp.gemm(m, n, k, dtype=np.float32, b_vnni=True)


def test_signedness_mix_in_one_handle_is_right(rng):
    # an int8 handle given uint8 blocks computes them as uint8 (the right answer)
    h = pytpp.tpp.gemm(5, 6, 7, dtype=I8, beta=0.0)
    a, b = ints(rng, (5, 7), U8), ints(rng, (7, 6), I8)
    np.testing.assert_array_equal(h(a, b, np.empty((5, 6), np.int32)),
                                  a.astype(np.int64) @ b.astype(np.int64))


def test_vnni_pack_matches_the_vnni_tpp(rng):
    for k, n, dt, v in [(7, 5, I8, 4), (9, 3, U8, 4), (5, 4, np.int16, 2)]:
        b = rng.integers(0, 100, (k, n)).astype(dt)
        packed = pytpp.linalg.vnni_pack(b)
        out = np.zeros_like(packed)
        pytpp.tpp.unary("vnni", k, n, dtype=dt, alpha=v)(b, out)
        np.testing.assert_array_equal(packed, out)
        assert packed.flags.c_contiguous and packed.shape == (-(-k // v), n, v)
        for p in range(k):
            np.testing.assert_array_equal(packed[p // v, :, p % v], b[p])
    with pytest.raises(TypeError):
        pytpp.linalg.vnni_pack(np.ones((4, 4), np.float32))


@pytest.mark.parametrize("m,n,k,count", [(1, 1, 1, 1), (7, 17, 63, 3), (65, 129, 300, 1),
                                         (13, 40, 7, 5)])
def test_seven_bit_kernels_exact(isa, rng, m, n, k, count):
    # A in [0, 127] x any int8 B: vpmaddubsw's int16 pair sums cannot saturate
    a = rng.integers(0, 128, (count, m, k)).astype(U8)
    a.reshape(-1)[:: 7] = 127
    b = ints(rng, (count, k, n), I8)
    b.reshape(-1)[:: 5] = -128
    want = ref_sum(a, b)
    for kern in _core_lowp.i8_kernels_available(False, True, a7=True):
        with _lowp.using_kernel(kern):
            np.testing.assert_array_equal(
                pytpp.tpp.brgemm(m, n, k, dtype=U8, b_dtype=I8, beta=0.0)(
                    a, b, np.empty((m, n), np.int32), count), want, err_msg=kern)
    h7 = pytpp.tpp.brgemm(m, n, k, dtype=U8, b_dtype=I8, beta=0.0, a_7bit=True)
    np.testing.assert_array_equal(h7(a, b, np.empty((m, n), np.int32), count), want)
    if isa == "avx2":
        a[0, 0, 0] = 128
        c = np.full((m, n), 4, np.int32)
        with pytest.raises(ValueError, match="127"):
            h7(a, b, c, count)
        assert (c == 4).all()
    with pytest.raises(ValueError, match="a_7bit"):
        pytpp.tpp.brgemm(m, n, k, dtype=I8, a_7bit=True)


@pytest.mark.parametrize("adt,bdt", [(U8, I8), (I8, I8)])
@pytest.mark.parametrize("row_elems,n", [(512, 512), (1024, 1000), (1024, 17)])
def test_aliasing_c_rows_accumulate_exactly(isa, rng, adt, bdt, row_elems, n):
    # C rows 2 or 4 KiB apart (the driver then sums each k block in a tile and adds it to C):
    # several k blocks, a batch, beta 1 on C's own values, a masked last vector, every kernel
    m, k, count = 13, 1300, 2
    a, b = ints(rng, (count, m, k), adt), ints(rng, (count, k, n), bdt)
    h = pytpp.tpp.brgemm(m, n, k, dtype=adt, b_dtype=bdt, beta=1.0)
    start = ints(rng, (m, n), np.int16).astype(np.int32)
    want = (ref_sum(a, b).astype(np.int64) + start).astype(np.int32)
    for kern in kernels_for(adt, bdt):
        with _lowp.using_kernel(kern):
            big = np.full((m, row_elems), -5, np.int32)
            c = big[:, :n]
            c[...] = start
            h(a, b, c, count)
            np.testing.assert_array_equal(c, want, err_msg=kern)
            assert (big[:, n:] == -5).all(), kern


@pytest.mark.parametrize("adt,bdt", PAIRS)
def test_k_past_several_blocks(isa, rng, adt, bdt):
    # k past three of the deepest k blocks any level plans (2048 8-bit values on a 48 KiB L1),
    # k not a multiple of 4; plain, VNNI and pre-packed B; beta 1 over C's own values
    m, n, k = 30, 100, 6150
    a, b = ints(rng, (m, k), adt), ints(rng, (k, n), bdt)
    c0 = ints(rng, (m, n), np.int32)
    with np.errstate(over="ignore"):
        want = (c0.astype(np.int64) + a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)
    plain = pytpp.tpp.gemm(m, n, k, dtype=adt, b_dtype=bdt, beta=1.0)
    vnni = pytpp.tpp.gemm(m, n, k, dtype=adt, b_dtype=bdt, beta=1.0, b_vnni=True)
    bv = pytpp.linalg.vnni_pack(b)
    for kern in kernels_for(adt, bdt):
        with _lowp.using_kernel(kern):
            for h, bb in ((plain, b), (vnni, bv), (plain, plain.pack(b))):
                c = c0.copy()
                h(a, bb, c)
                np.testing.assert_array_equal(c, want, err_msg=f"{kern} {type(bb).__name__}")


@pytest.mark.parametrize("bdt", [I8, U8])
@pytest.mark.parametrize("n,row,k", [(2048, 2048, 37), (100, 4096, 64), (33, 2048, 5),
                                     (270, 3072, 66)])
def test_b_rows_aliasing_in_l1_exact(isa, rng, bdt, n, row, k):
    # plain B rows 2 KiB apart or a multiple, and VNNI quad rows (packed a step of k at a time
    # across the panels: quads on the raw-quad kernels, pairs on the int16 ones): B a column
    # slice of a wider array, a partial last panel, k odd or not a multiple of 4
    m = 9
    a = ints(rng, (m, k), U8)
    wide = ints(rng, (k, row), bdt)
    b = wide[:, :n]
    want = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)
    g = pytpp.tpp.gemm(m, n, k, dtype=U8, b_dtype=bdt, beta=0.0)
    gv = pytpp.tpp.gemm(m, n, k, dtype=U8, b_dtype=bdt, beta=0.0, b_vnni=True)
    bv = pytpp.linalg.vnni_pack(b)
    for kern in kernels_for(U8, bdt):
        with _lowp.using_kernel(kern):
            np.testing.assert_array_equal(g(a, b, np.full((m, n), -3, np.int32)), want,
                                          err_msg=kern)
            np.testing.assert_array_equal(gv(a, bv, np.full((m, n), -3, np.int32)), want,
                                          err_msg=f"{kern} vnni")
    np.testing.assert_array_equal(pytpp.quant.matmul_int8(a, b), want)
