"""bfloat16 products with a few rows of x by the widened AVX2 table's kernels (on every level
from AVX2 up; a PackedMatrix's panels only where they are that table's): x @ w.T with w in
torch's (out_features, in_features) layout (kp->dot_bt, reading w in place in tiles of 8 rows x
8 k pairs instead of packing all of it), x @ W and x @ PackedMatrix / PackedLinear (kp->dot_bn,
16 columns of a row widened at a time), and the transposed-B packer (pack_bt) the packed path
uses past the row limit.

Contract: the same bits as every other bf16 kernel (vdpbf16ps semantics: per output, odd
product then even product of each k pair, in k order, each rounded, denormals flushed), so the
result of a row never depends on the path, the ISA level, the thread count or how many other
rows came with it. Every row count up to the path's limit (12) and past it, widths around its
blocks (8-row groups, 64-row blocks, 4 row groups of x), k around its pair tiles (8 pairs),
its 128-value chunks and odd, strided and Fortran-order operands, special values, and the fused
epilogue of linear."""
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import pytpp
from pytpp._core import _matmul as _cm
from pytpp.linalg import _operands as _ops

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
KERNELS = _cm.bf16_kernels_available()


def rand(rng, shape):
    return rng.standard_normal(shape).astype(BF16)


def bits(c):
    return np.asarray(c).view(np.uint32 if np.asarray(c).dtype == np.float32 else np.uint16)


def with_kernel(name, f):
    old = _ops.bf16_kernel
    _ops.bf16_kernel = _cm.BF16_KERNELS.index(name)
    try:
        return f()
    finally:
        _ops.bf16_kernel = old


def chain_reference(x, w):
    """vdpbf16ps semantics in numpy for x @ w.T (see test_matmul_bf16.chain_reference)."""
    a = x.astype(np.float32).astype(np.float64)
    b = w.astype(np.float32).astype(np.float64)
    acc = np.zeros((a.shape[0], b.shape[0]), np.float32)
    for q in range(0, a.shape[1], 2):
        if q + 1 < a.shape[1]:
            acc = (acc + np.outer(a[:, q + 1], b[:, q + 1])).astype(np.float32)
        acc = (acc + np.outer(a[:, q], b[:, q])).astype(np.float32)
    return acc


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 7, 8, 11, 12, 13])
def test_rows_every_kernel_same_bits(rng, m):
    """Each row count against widths around the 8-row groups and 64-row blocks, k around the
    pair tiles and chunks: the same bits on every bf16 kernel and as the numpy chain."""
    for n, k in [(1, 128), (7, 129), (64, 144), (65, 255), (130, 301)]:
        x, w = rand(rng, (m, k)), rand(rng, (n, k))
        ref = chain_reference(x, w)
        for name in KERNELS:
            got = with_kernel(name, lambda: pytpp.matmul(x, w.T))
            np.testing.assert_array_equal(bits(got), bits(ref), err_msg=f"{name} n={n} k={k}")


def test_rows_alone_equal_rows_in_a_batch(isa, threads, rng):
    """A row's result is the same whether it comes alone (products of rows) or in a batch of 40
    (packed path), at every level and thread count."""
    n, k = 203, 1001
    x, w = rand(rng, (40, k)), rand(rng, (n, k))
    batch = pytpp.matmul(x, w.T)
    for m in (1, 2, 5, 12):
        np.testing.assert_array_equal(bits(pytpp.matmul(x[:m], w.T)), bits(batch[:m]))


@pytest.mark.parametrize("order", ["strided", "fortran", "reversed"])
def test_rows_odd_layouts(rng, order):
    """x and w with padding between rows, x in Fortran order, w with negative column steps."""
    m, n, k = 5, 70, 517
    xb, wb = rand(rng, (m, k + 9)), rand(rng, (n, k + 5))
    x, w = xb[:, 3:3 + k], wb[:, 2:2 + k]
    if order == "fortran":
        x = np.asfortranarray(x)
    elif order == "reversed":
        w = wb[::-1, ::-1][:, 2:2 + k]
    ref = chain_reference(x, w)
    np.testing.assert_array_equal(bits(pytpp.matmul(x, w.T)), bits(ref))
    out = np.full((m, n + 4), np.nan, np.float32)
    res = pytpp.matmul(x, w.T, out=out[:, 1:1 + n])
    np.testing.assert_array_equal(bits(res), bits(ref))
    assert np.isnan(out[:, 0]).all() and np.isnan(out[:, 1 + n:]).all()


def test_rows_special_values(rng):
    """Denormals (flushed in and out), NaN, Inf and products that overflow: every kernel gives
    the bits of the portable one."""
    m, n, k = 3, 67, 263
    x, w = rand(rng, (m, k)), rand(rng, (n, k))
    xu, wu = x.view(np.uint16), w.view(np.uint16)
    xu.flat[::7] = rng.integers(0, 0x80, xu.flat[::7].shape, dtype=np.uint16)
    wu.flat[::11] = rng.integers(0, 0x80, wu.flat[::11].shape, dtype=np.uint16) | 0x8000
    xu.flat[5::13] = 0x7F00 | rng.integers(0, 0x7F, xu.flat[5::13].shape, dtype=np.uint16)
    x[1, 0] = np.nan
    w[3, 5] = np.inf
    with np.errstate(all="ignore"):
        results = {name: with_kernel(name, lambda: bits(pytpp.matmul(x, w.T))) for name in KERNELS}
    for name, got in results.items():
        np.testing.assert_array_equal(got, results["ref"], err_msg=name)


@pytest.mark.parametrize("m", [1, 5, 9])
@pytest.mark.parametrize("n", [57, 63, 121, 191])
def test_rows_last_block_of_57_to_63_columns(rng, m, n):
    """A row of x alone (or the last of a group of four) against a last block of 57-63 rows of
    w: the widest remainder block of the widened kernel (8 vectors, the last masked), on every
    kernel."""
    x, w = rand(rng, (m, 130)), rand(rng, (n, 130))
    ref = chain_reference(x, w)
    for name in KERNELS:
        got = np.full((m, n), np.nan, np.float32)   # every output must be written
        with_kernel(name, lambda: pytpp.matmul(x, w.T, out=got))
        np.testing.assert_array_equal(bits(got), bits(ref), err_msg=f"{name} m={m} n={n}")


@pytest.mark.parametrize("k", [129, 255, 301])
def test_rows_never_read_past_k(isa, rng, k):
    """x and w as column slices of wider arrays whose next column is NaN: the last pair of an
    odd k takes zero past k on both sides, at every level (the chain reference has no NaN)."""
    m, n = 5, 37
    xf, wf = rand(rng, (m, k + 1)), rand(rng, (n, k + 1))
    xf[:, k] = np.nan
    wf[:, k] = np.nan
    x, w = xf[:, :k], wf[:, :k]
    for name in KERNELS:
        got = with_kernel(name, lambda: pytpp.matmul(x, w.T))
        np.testing.assert_array_equal(bits(got), bits(chain_reference(x, w)), err_msg=name)


@pytest.mark.parametrize("m", [1, 3, 12])
def test_linear_bf16_rows_epilogue(isa, rng, m):
    """linear on bf16 rows: bias, gelu and residual fused after the row products; bf16 out
    rounded once, the same bits as the rows computed inside a larger batch."""
    n, k = 75, 640
    x, w = rand(rng, (16, k)), rand(rng, (n, k))
    b, r = rand(rng, (n,)), rand(rng, (16, n))
    batch = pytpp.nn.linear(x, w, b, activation="gelu", residual=r)
    assert batch.dtype == BF16
    got = pytpp.nn.linear(x[:m], w, b, activation="gelu", residual=r[:m])
    np.testing.assert_array_equal(bits(got), bits(batch[:m]))
    ref = np.asarray(chain_reference(x[:m], w), np.float64) + b.astype(np.float64)
    ref = 0.5 * ref * (1 + np.tanh(np.sqrt(2 / np.pi) * (ref + 0.044715 * ref ** 3)))
    np.testing.assert_allclose(got.astype(np.float64), ref + r[:m].astype(np.float64),
                               rtol=2e-2, atol=2e-2)


def test_rows_threads_and_threadpool_limits(rng):
    """Two threads split w's rows in 64-row units; the bits do not depend on it."""
    x, w = rand(rng, (2, 300)), rand(rng, (1000, 300))
    with threadpool_limits(1):
        one = pytpp.matmul(x, w.T)
    two = pytpp.matmul(x, w.T)
    np.testing.assert_array_equal(bits(one), bits(two))


def test_packed_path_past_the_rows_limit(rng):
    """Past 12 rows the packed path, its transposed B packed in register tiles: odd k, widths
    that leave partial panels, the same bits as the contiguous B."""
    for m, n, k in [(13, 37, 301), (40, 100, 129), (20, 17, 1001)]:
        x, w = rand(rng, (m, k)), rand(rng, (n, k))
        expect = pytpp.matmul(x, np.ascontiguousarray(w.T))
        np.testing.assert_array_equal(bits(pytpp.matmul(x, w.T)), bits(expect))
        np.testing.assert_array_equal(bits(expect), bits(chain_reference(x, w)))


def chain_reference_nn(x, b):
    return chain_reference(x, np.ascontiguousarray(b.T))


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 8, 12, 13])
def test_rows_against_row_major_weight(rng, m):
    """x @ W with W (k, n) as given: widths around the 16-column groups and 64-column blocks
    (the last group read through a buffer), k around the 8-row slices and odd: the same bits
    on every kernel and as the numpy chain."""
    for n, k in [(1, 128), (17, 129), (64, 136), (100, 255), (131, 301)]:
        x, b = rand(rng, (m, k)), rand(rng, (k, n))
        ref = chain_reference_nn(x, b)
        for name in KERNELS:
            got = with_kernel(name, lambda: pytpp.matmul(x, b))
            np.testing.assert_array_equal(bits(got), bits(ref), err_msg=f"{name} n={n} k={k}")


def test_rows_against_strided_row_major_weight(isa, threads, rng):
    """W with padding between its rows (and NaN in the row after its last, which an odd k must
    not read), x strided, out= with a row stride; the rows alone and inside a batch of 30
    agree."""
    m, n, k = 30, 70, 517
    xb, bb = rand(rng, (m, k + 9)), rand(rng, (k + 1, n + 6))
    bb[k] = np.nan
    x, b = xb[:, 3:3 + k], bb[:k, 1:1 + n]
    batch = pytpp.matmul(x, b)
    np.testing.assert_array_equal(bits(batch), bits(chain_reference_nn(x, b)))
    for rows in (1, 3, 12):
        out = np.full((rows, n + 4), np.nan, np.float32)
        res = pytpp.matmul(x[:rows], b, out=out[:, 1:1 + n])
        np.testing.assert_array_equal(bits(res), bits(batch[:rows]))
        assert np.isnan(out[:, 0]).all() and np.isnan(out[:, 1 + n:]).all()


@pytest.mark.parametrize("m", [1, 4, 12])
def test_rows_against_packed_weight(isa, rng, m):
    """A PackedMatrix and PackedLinear at a few rows: the products of rows run over the bf16
    panels block by block (k past one block, odd k, a partial last panel), the same bits as the
    rows inside a batch (packed GEMM) and as the unpacked product."""
    n, k = 75, 1500
    x, w = rand(rng, (20, k)), rand(rng, (n, k))
    pb = pytpp.linalg.pack(np.ascontiguousarray(w.T))
    batch = pytpp.matmul(x, pb)
    np.testing.assert_array_equal(bits(batch), bits(pytpp.matmul(x, w.T)))
    np.testing.assert_array_equal(bits(pytpp.matmul(x[:m], pb)), bits(batch[:m]))
    b = rand(rng, (n,))
    layer = pytpp.nn.PackedLinear(w, b)
    full = layer(x, activation="relu")
    np.testing.assert_array_equal(bits(layer(x[:m], activation="relu")), bits(full[:m]))
    np.testing.assert_array_equal(bits(full), bits(pytpp.nn.linear(x, w, b, activation="relu")))
    xo, wo = rand(rng, (m, 301)), rand(rng, (n, 301))
    np.testing.assert_array_equal(bits(pytpp.matmul(xo, pytpp.linalg.pack(wo.T))),
                                  bits(chain_reference(xo, wo)))
