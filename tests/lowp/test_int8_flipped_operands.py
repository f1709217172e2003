"""Every 8-bit type pair on the vpdpbusd (u8 x s8) quad kernels: an s8 A runs as A + 128 (-128 x
B's column sums join the compensation), a u8 B as B - 128 (+128 x A's row sums added to C), so
every path that takes this route is checked exactly against an int64 reference (modulo 2**32),
on every 8-bit kernel this CPU runs (the int16 ones beside them, so CPUs without VNNI test too):
plain, VNNI and pre-packed B, several k blocks, a batch folded into one block, beta 1, the
caller's comp, strided A, both thread splits, and the zero points of pytpp.quant.matmul_int8
(whose own column-sum term then adds to the flip's)."""
import itertools

import numpy as np
import pytest

import pytpp
from pytpp._core import _lowp as _core_lowp
from pytpp.tpp import _lowp

I8, U8 = np.int8, np.uint8


def ints(rng, shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def ref(a, b):
    return (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)


PAIRS = [(I8, I8), (U8, U8), (I8, U8), (U8, I8)]


def kernels(adt, bdt):
    """Every 8-bit kernel this CPU runs for these types: the flipping vpdpbusd ones where it
    has VNNI, and the int16 ones that take every type as it is (so the checks below test
    something on every CPU)."""
    return list(_core_lowp.i8_kernels_available(np.dtype(adt) == I8, np.dtype(bdt) == I8))


def test_auto_picks_the_u8_s8_kernel_for_every_pair():
    """At every level this CPU runs, every type pair takes the kernel u8 x s8 takes: vpdpbusd
    where the level has VNNI (the other pairs ran on the int16 kernels at a third of the
    speed), the int16 or portable one elsewhere."""
    S8, U8_ = _core_lowp.S8, _core_lowp.U8
    has_vnni = any("vnni" in k for k in kernels(I8, I8))
    for level in pytpp.available_isas():
        isa = pytpp._config.LEVELS.index(level)
        want = _core_lowp.kernel_name(isa, 0, U8_, S8)
        for at, bt in ((S8, S8), (U8_, U8_), (S8, U8_)):
            assert _core_lowp.kernel_name(isa, 0, at, bt) == want, level
        if level == "avx512" and has_vnni:
            assert "vnni" in want


@pytest.mark.parametrize("adt,bdt", PAIRS)
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (5, 33, 7), (37, 300, 1030), (200, 70, 64),
                                   (13, 1061, 513), (96, 64, 4100)])
def test_plain_vnni_and_prepacked_b(threads, rng, adt, bdt, m, n, k):
    a, b = ints(rng, (m, k), adt), ints(rng, (k, n), bdt)
    comp = ints(rng, (n,), np.int32)
    with np.errstate(over="ignore"):
        wants = {None: ref(a, b), "comp": ref(a, b) + comp}
    plain = pytpp.tpp.gemm(m, n, k, dtype=adt, b_dtype=bdt, beta=0.0)
    vnni = pytpp.tpp.gemm(m, n, k, dtype=adt, b_dtype=bdt, beta=0.0, b_vnni=True)
    bv = pytpp.linalg.vnni_pack(b)
    for kern in kernels(adt, bdt):
        with _lowp.using_kernel(kern):
            forms = {"plain": (plain, b), "vnni": (vnni, bv),
                     "plain packed": (plain, plain.pack(b)), "vnni packed": (vnni, vnni.pack(bv))}
            for (name, (h, bb)), (cname, want) in itertools.product(forms.items(), wants.items()):
                c = np.full((m, n), 7, np.int32)
                assert h(a, bb, c, comp=None if cname is None else comp) is c
                np.testing.assert_array_equal(c, want, err_msg=f"{kern} {name} {cname}")


@pytest.mark.parametrize("adt,bdt", PAIRS)
@pytest.mark.parametrize("count,m,n,k", [(4, 6, 40, 16), (3, 17, 65, 300), (2, 50, 129, 1100)])
def test_batch_beta_one_and_strided_a(threads, rng, adt, bdt, count, m, n, k):
    a = ints(rng, (count, m, 2 * k), adt)[:, :, ::2]        # A with column stride 2
    b = ints(rng, (count, k, n), bdt)
    c0 = ints(rng, (m, n), np.int32)
    with np.errstate(over="ignore"):
        want = (c0.astype(np.int64) + np.einsum("bmk,bkn->mn", a.astype(np.int64),
                                                 b.astype(np.int64))).astype(np.int32)
    h = pytpp.tpp.brgemm(m, n, k, dtype=adt, b_dtype=bdt, beta=1.0)
    for kern in kernels(adt, bdt):
        with _lowp.using_kernel(kern):
            c = c0.copy()
            h(np.ascontiguousarray(a), b, c, count)
            np.testing.assert_array_equal(c, want, err_msg=f"{kern} contiguous")
            c = c0.copy()
            h(a, b, c, count)
            np.testing.assert_array_equal(c, want, err_msg=f"{kern} strided")


@pytest.mark.parametrize("adt,bdt", PAIRS)
@pytest.mark.parametrize("m,n,k", [(5, 33, 7), (70, 45, 131), (130, 300, 1030), (600, 700, 260)])
def test_column_major_and_strided_operands(threads, rng, adt, bdt, m, n, k):
    """A column-major A (packed in 64 x 64 tiles through a buffer), A with both strides past
    1 (16 x 16 tiles), a column-major B (the w of x @ w.T: each column's quads as they lie), on
    every 8-bit kernel: exact."""
    a, b = ints(rng, (m, k), adt), ints(rng, (k, n), bdt)
    want = ref(a, b)
    a_strided = np.asfortranarray(ints(rng, (2 * m, 2 * k), adt))[::2, ::2]
    a_strided[...] = a
    forms = {"F-order A": (np.asfortranarray(a), b), "F-order B": (a, np.asfortranarray(b)),
             "both F-order": (np.asfortranarray(a), np.asfortranarray(b)),
             "strided A": (a_strided, b)}
    for kern in kernels(adt, bdt):
        with _lowp.using_kernel(kern):
            for name, (x, y) in forms.items():
                np.testing.assert_array_equal(pytpp.quant.matmul_int8(x, y), want,
                                              err_msg=f"{kern} {name}")


@pytest.mark.parametrize("av,bv", [(-128, -128), (255, 255), (-128, 255), (127, 255)])
@pytest.mark.parametrize("m", [3, 30])
def test_extremes_wrap_modulo_2_32(isa, av, bv, m):
    k = 70000                      # the products' sum passes 2**31
    a = np.full((m, k), av, U8 if av > 127 else I8)
    b = np.full((k, 40), bv, U8 if bv > 127 else I8)
    got = pytpp.quant.matmul_int8(a, b)
    np.testing.assert_array_equal(got, np.full((m, 40), np.int64(av * bv * k).astype(np.int32)))


@pytest.mark.parametrize("adt,bdt", PAIRS)
@pytest.mark.parametrize("m", [1, 3, 4, 9, 130])
def test_matmul_int8_zero_points(threads, rng, adt, bdt, m):
    k, n = 777, 150
    a, b = ints(rng, (m, k), adt), ints(rng, (k, n), bdt)
    lo_a, lo_b = np.iinfo(adt).min, np.iinfo(bdt).min
    for za, zb in ((0, 0), (lo_a + 5, 0), (lo_a + 1, lo_b + 7), (0, lo_b), (lo_a, 0)):
        want = ((a.astype(np.int64) - za) @ (b.astype(np.int64) - zb)).astype(np.int32)
        for kern in kernels(adt, bdt) + [None]:
            if kern is None:
                got = pytpp.quant.matmul_int8(a, b, a_zero_point=za, b_zero_point=zb)
            else:
                with _lowp.using_kernel(kern):
                    got = pytpp.quant.matmul_int8(a, b, a_zero_point=za, b_zero_point=zb)
            np.testing.assert_array_equal(got, want, err_msg=f"{kern} za={za} zb={zb}")
