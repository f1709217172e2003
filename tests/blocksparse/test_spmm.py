"""spmm, A @ b and x @ A against a float64 dense matmul: every block shape (1 x k, k x 1,
non-square, up to 64), N = 1 / odd / wide, empty block rows, all-empty, single block, both
containers on both sides, every ISA level, 1 and 2 threads."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sparse_helpers import BF16, DTYPES, assert_product, block_sparse, result_dtype

import pytpp
from pytpp.sparse import BCSC, BSR, spmm

BLOCKS = [(1, 1), (1, 8), (8, 1), (4, 4), (3, 5), (16, 16), (8, 32), (2, 64), (64, 64)]


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("cls", [BSR, BCSC])
@pytest.mark.parametrize("n", [1, 7, 33])
def test_sparse_dense_blocks(isa, rng, block, cls, n):
    bm, bk = block
    a = block_sparse(rng, (4 * bm, 3 * bk), block, 0.5, np.float32, empty_rows=(1,))
    b = rng.standard_normal((3 * bk, n)).astype(np.float32)
    A = cls.from_dense(a, block=block)
    assert_product(spmm(A, b), a, b, np.float32)
    assert_product(A @ b, a, b, np.float32)


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("cls", [BSR, BCSC])
@pytest.mark.parametrize("m", [1, 7, 33])
def test_dense_sparse_blocks(isa, rng, block, cls, m):
    bk, bn = block
    w = block_sparse(rng, (3 * bk, 4 * bn), block, 0.5, np.float32)
    w[:, bn:2 * bn] = 0  # an empty block column
    x = rng.standard_normal((m, 3 * bk)).astype(np.float32)
    W = cls.from_dense(w, block=block)
    assert_product(spmm(x, W), x, w, np.float32)
    assert_product(x @ W, x, w, np.float32)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("side", ["left", "right"])
def test_dtypes(isa, threads, rng, dtype, side):
    a = block_sparse(rng, (96, 64), (8, 16), 0.3, dtype)
    d = rng.standard_normal((64, 45) if side == "left" else (45, 96)).astype(dtype)
    S = BSR.from_dense(a, block=(8, 16))
    res = spmm(S, d) if side == "left" else spmm(d, S)
    assert_product(res, a, d, result_dtype(dtype)) if side == "left" else \
        assert_product(res, d, a, result_dtype(dtype))


@pytest.mark.parametrize("side", ["left", "right"])
def test_large_threads_skewed(threads, rng, side):
    """Half the blocks in 5% of the block rows: the balance by blocks must still cover every
    output element once."""
    nbr = 40
    a = block_sparse(rng, (nbr * 8, 256), (8, 8), 0.05, np.float32)
    a[:2 * 8] = rng.standard_normal((16, 256))  # 2 dense block rows of 40
    d = rng.standard_normal((256, 100) if side == "left" else (100, nbr * 8)).astype(np.float32)
    for S in (BSR.from_dense(a, block=(8, 8)), BCSC.from_dense(a, block=(8, 8))):
        if side == "left":
            assert_product(S @ d, a, d, np.float32)
        else:
            assert_product(d @ S, d, a, np.float32)


@pytest.mark.parametrize("cls", [BSR, BCSC])
def test_all_empty_and_single_block(isa, rng, cls):
    z = np.zeros((32, 48), np.float32)
    Z = cls.from_dense(z, block=(16, 16))
    assert Z.nblocks == 0
    b = rng.standard_normal((48, 5)).astype(np.float32)
    out = np.full((32, 5), np.nan, np.float32)
    assert spmm(Z, b, out=out) is out
    assert np.all(out == 0)
    assert np.all(rng.standard_normal((3, 32)).astype(np.float32) @ Z == 0)
    one = z.copy()
    one[16:, 32:] = rng.standard_normal((16, 16))
    S = cls.from_dense(one, block=(16, 16))
    assert S.nblocks == 1
    assert_product(S @ b, one, b, np.float32)


def test_zero_sizes():
    A = BSR.from_dense(np.zeros((0, 8), np.float32), block=(2, 2))
    assert spmm(A, np.ones((8, 3), np.float32)).shape == (0, 3)
    B = BSR.from_dense(np.zeros((4, 8), np.float32), block=(2, 2))
    assert spmm(B, np.ones((8, 0), np.float32)).shape == (4, 0)
    assert spmm(np.ones((0, 4), np.float32), B).shape == (0, 8)
    C = BSR.from_dense(np.zeros((4, 0), np.float32), block=(2, 2))
    r = spmm(C, np.ones((0, 3), np.float32))
    assert r.shape == (4, 3) and np.all(r == 0)


@pytest.mark.parametrize("order", ["C", "F", "strided"])
def test_views_and_out_layouts(rng, order):
    a = block_sparse(rng, (64, 48), (8, 8), 0.4, np.float64)
    A = BSR.from_dense(a, block=(8, 8))
    big = rng.standard_normal((96, 40))
    b = {"C": big[:48, :20].copy(), "F": np.asfortranarray(big[:48, :20]),
         "strided": big[::2, ::2]}[order]
    out = {"C": np.empty((64, 20)), "F": np.empty((64, 20), order="F"),
           "strided": np.empty((128, 40))[::2, ::2]}[order]
    assert spmm(A, b, out=out) is out
    assert_product(out, a, b, np.float64)
    x = b.T  # (20, 48)
    out2 = np.empty((20, 64), order="F" if order == "F" else "C")
    assert spmm(x, A.T, out=out2) is out2
    assert_product(out2, x, a.T, np.float64)


def test_out_aliases_input(rng):
    a = block_sparse(rng, (16, 16), (4, 4), 0.5, np.float32)
    A = BSR.from_dense(a, block=(4, 4))
    b = rng.standard_normal((16, 16)).astype(np.float32)
    ref = a.astype(np.float64) @ b
    spmm(A, b, out=b)  # in place: numpy's answer
    assert np.allclose(b, ref, rtol=1e-5, atol=1e-5)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 9), st.integers(1, 9), st.integers(1, 6), st.integers(1, 6),
       st.integers(1, 80), st.floats(0.0, 1.0), st.booleans(), st.booleans(),
       st.sampled_from(DTYPES), st.integers(0, 2**32 - 1))
def test_random_shapes(bm, bk, nbr, nbc, n, density, left, bcsc, dtype, seed):
    rng = np.random.default_rng(seed)
    a = block_sparse(rng, (nbr * bm, nbc * bk), (bm, bk), density, dtype)
    S = (BCSC if bcsc else BSR).from_dense(a, block=(bm, bk))
    rdt = result_dtype(dtype)
    if left:
        d = rng.standard_normal((nbc * bk, n)).astype(dtype)
        assert_product(S @ d, a, d, rdt)
    else:
        d = rng.standard_normal((n, nbr * bm)).astype(dtype)
        assert_product(d @ S, d, a, rdt)


BF16_BLOCKS = [(1, 1), (1, 8), (8, 1), (3, 5), (5, 3), (16, 16), (16, 7), (8, 32), (64, 64)]


def _bf16_products(a, block, n, levels):
    """A @ b and x @ A (both containers, every route: n and m below and above the vector
    width) at each level in `levels` -> {(side, n): [result per level and container]}."""
    rng = np.random.default_rng(7)
    res = {}
    for nn in n:
        b = rng.standard_normal((a.shape[1], nn)).astype(BF16)
        x = rng.standard_normal((nn, a.shape[0])).astype(BF16)
        for isa in levels:
            with pytpp.use_isa(isa):
                for cls in (BSR, BCSC):
                    s = cls.from_dense(a, block=block)
                    res.setdefault(("left", nn), (b, []))[1].append(s @ b)
                    res.setdefault(("right", nn), (x, []))[1].append(x @ s)
    return res


@pytest.mark.parametrize("block", BF16_BLOCKS)
def test_bf16_same_bits_every_level(rng, block):
    """bf16 x bf16 -> float32: the same bits at every ISA level (the direct bf16 kernels and the
    widened float32 ones form the same vdpbf16ps chain), within float32 summation error of the
    float64 product; odd block depths are padded inside each block."""
    bm, bk = block
    a = block_sparse(rng, (5 * bm, 4 * bk), block, 0.5, BF16, empty_rows=(2,))
    for (side, _), (d, results) in _bf16_products(a, block, (1, 7, 40, 100),
                                                  pytpp.available_isas()).items():
        for r in results[1:]:
            np.testing.assert_array_equal(r, results[0])
        if side == "left":
            assert_product(results[0], a, d, np.float32)
        else:
            assert_product(results[0], d, a, np.float32)


@pytest.mark.parametrize("block", [(8, 8), (16, 2), (4, 32)])
def test_bf16_even_depth_equals_matmul(isa, rng, block):
    """Blocks of even depth: exactly pytpp.matmul of the dense bf16 operands (the skipped blocks
    add exact zeros to the same chains)."""
    bm, bk = block
    a = block_sparse(rng, (6 * bm, 5 * bk), block, 0.4, BF16)
    b = rng.standard_normal((5 * bk, 37)).astype(BF16)
    for cls in (BSR, BCSC):
        s = cls.from_dense(a, block=block)
        np.testing.assert_array_equal(s @ b, pytpp.matmul(a, b))
    w = block_sparse(rng, (6 * bk, 5 * bm), (bk, bm), 0.4, BF16)
    for m in (3, 70):  # the column walk, and the transposed walk for tall x
        xm = rng.standard_normal((m, 6 * bk)).astype(BF16)
        for cls in (BSR, BCSC):
            W = cls.from_dense(w, block=(bk, bm))
            np.testing.assert_array_equal(xm @ W, pytpp.matmul(xm, w))


@pytest.mark.parametrize("block", [(16, 16), (8, 5)])
def test_bf16_large_packed_b(threads, rng, block):
    """A packed bf16 B of many column panels (larger than half an L2): every output written
    once, the same bits at every level and thread count, and for even depth as pytpp.matmul."""
    bm, bk = block
    a = block_sparse(rng, (12 * bm, (2048 // bk) * bk), block, 0.1, BF16)
    a[:bm] = rng.standard_normal((bm, a.shape[1]))  # one dense block row
    b = rng.standard_normal((a.shape[1], 200)).astype(BF16)
    res = {}
    for isa in pytpp.available_isas():
        with pytpp.use_isa(isa):
            res[isa] = BSR.from_dense(a, block=block) @ b
    for r in res.values():
        np.testing.assert_array_equal(r, res["ref"])
    if bk % 2 == 0:
        np.testing.assert_array_equal(res["ref"], pytpp.matmul(a, b))
    assert_product(res["ref"], a, b, np.float32)


def test_bf16_denormals_flushed(rng):
    """Products and sums in float32's denormal range are flushed to zero at every level, as
    vdpbf16ps does (a float32 FMA would keep them)."""
    a = np.zeros((16, 16), np.float32)
    a[:8, :8] = 1e-20
    b = np.full((16, 9), 1e-20, np.float32)
    b[0, 0] = 1.0
    a16, b16 = a.astype(BF16), b.astype(BF16)
    for isa in pytpp.available_isas():
        with pytpp.use_isa(isa):
            res = BSR.from_dense(a16, block=(8, 8)) @ b16
        assert res[0, 1] == 0.0  # 8 products of 1e-40: denormal, flushed
        assert res[0, 0] == np.float32(a16[0, 0])
        np.testing.assert_array_equal(res, pytpp.matmul(a16, b16))


def test_bf16_views_and_out(rng):
    """Strided and Fortran-ordered bf16 dense operands, out= of any layout: the same bits as
    C-contiguous operands."""
    a = block_sparse(rng, (48, 64), (8, 16), 0.5, BF16)
    A = BSR.from_dense(a, block=(8, 16))
    b = rng.standard_normal((64, 50)).astype(BF16)
    x = rng.standard_normal((50, 48)).astype(BF16)
    ref_l, ref_r = A @ b, x @ A
    for view in (np.asfortranarray(b), np.repeat(b, 2, axis=1)[:, ::2]):
        np.testing.assert_array_equal(A @ view, ref_l)
    for view in (np.asfortranarray(x), np.repeat(x, 3, axis=1)[:, ::3],
                 np.ascontiguousarray(np.pad(x, ((0, 0), (1, 0))))[:, 1:]):
        np.testing.assert_array_equal(view @ A, ref_r)
    out = np.zeros((50, 128), np.float32)[:, ::2]
    assert spmm(x, A, out=out) is out
    np.testing.assert_array_equal(out, ref_r)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [37, 100])
@pytest.mark.parametrize("block", [(16, 16), (3, 7), (1, 8)])
def test_wide_b_is_packed(isa, threads, rng, dtype, n, block):
    """B larger than L1 and wider than one register tile goes through the column-panel packing
    (the last panel zero-padded)."""
    bm, bk = block
    a = block_sparse(rng, (8 * bm, (448 // bk) * bk), block, 0.3, dtype)
    b = rng.standard_normal((a.shape[1], n)).astype(dtype)
    assert_product(BSR.from_dense(a, block=block) @ b, a, b, np.dtype(dtype))
    x = rng.standard_normal((n, a.shape[0])).astype(dtype)
    assert_product(x @ BCSC.from_dense(a, block=block), x, a, np.dtype(dtype))


def test_same_result_on_any_thread_count(rng):
    """Every output element is one thread's sum over the same blocks in the same order."""
    a = block_sparse(rng, (512, 256), (16, 8), 0.2, np.float32)
    a[:64] = rng.standard_normal((64, 256))  # skewed: dense leading block rows
    A = BSR.from_dense(a, block=(16, 8))
    b = rng.standard_normal((256, 77)).astype(np.float32)
    x = rng.standard_normal((50, 512)).astype(np.float32)
    old = pytpp.get_num_threads()
    try:
        res = []
        for nt in (1, 2):
            pytpp.set_num_threads(nt)
            res.append((A @ b, x @ A))
    finally:
        pytpp.set_num_threads(old)
    for r in res[1:]:
        np.testing.assert_array_equal(r[0], res[0][0])
        np.testing.assert_array_equal(r[1], res[0][1])
