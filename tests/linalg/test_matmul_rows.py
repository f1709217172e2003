"""matmul and linear with a few rows against a transposed weight (x @ w.T, w in torch's
(out_features, in_features) layout) or a large row-major one (x @ W): the products-of-rows paths
(gemm_dot.inc), which read w in place instead of packing it. Every row count up to the path's
limit and just past it (groups of four rows and their remainders), widths around the register
blocks (8, 4, 3 rows of w), k with a vector tail and k past one L2 chunk (partial sums
accumulated), strided rows, both dtypes, every ISA level and thread count, and the fused
epilogue of linear.

Accuracy: each output is a k-term dot product in the operand dtype (lane partials summed at the
end), within 2 k eps |x||w| of the float64 product, the bound of the other matmul tests."""
import numpy as np
import pytest

import pytpp


@pytest.fixture(params=[512 << 10, 1 << 20], ids=["l2_512k", "l2_1m"])
def l2(request):
    """Both ways the products of rows stream B, chosen by the L2 size (tuning.h
    PYTPP_MM_DOT_BIG_L2): x @ w.T prefetching w or not, x @ W in slices of 4 or 8 rows."""
    from pytpp._core import _runtime
    old = _runtime.get_cache_info()
    _runtime.set_cache_info(old["l1d"], request.param, old["l3"])
    yield request.param
    _runtime.set_cache_info(old["l1d"], old["l2"], old["l3"])


def check(c, a, b):
    """c equals a @ b within 2 k eps |a||b| per element."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    tol = 2 * a.shape[-1] * np.finfo(c.dtype).eps * (np.abs(a64) @ np.abs(b64))
    err = np.abs(c.astype(np.float64) - a64 @ b64)
    assert np.all(err <= tol + np.finfo(np.float64).tiny), f"max error {err.max()}"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 7, 8, 13, 16, 17])
def test_rows_against_transposed_weight(isa, threads, l2, rng, dtype, m):
    for n, k in [(1, 128), (7, 129), (25, 300), (50, 1000), (97, 6001)]:
        x = rng.standard_normal((m, k)).astype(dtype)
        w = rng.standard_normal((n, k)).astype(dtype)
        check(pytpp.matmul(x, w.T), x, w.T)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_strided_rows_and_out(isa, rng, dtype):
    """x and w rows with padding between them (lda, ldb > k), out= with a row stride."""
    m, n, k = 6, 40, 517
    xb = rng.standard_normal((m, k + 9)).astype(dtype)
    wb = rng.standard_normal((n, k + 5)).astype(dtype)
    x, w = xb[:, 3:3 + k], wb[:, 2:2 + k]
    out = np.full((m, n + 4), np.nan, dtype)
    res = pytpp.matmul(x, w.T, out=out[:, 1:1 + n])
    check(res, x, w.T)
    assert np.isnan(out[:, 0]).all() and np.isnan(out[:, 1 + n:]).all()


@pytest.mark.parametrize("m", [1, 3, 8])
def test_linear_epilogue_on_rows(isa, threads, rng, m):
    """bias, activation and residual after the row products, as on the packed path."""
    n, k = 75, 640
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32) / np.sqrt(k)
    b = rng.standard_normal(n).astype(np.float32)
    r = rng.standard_normal((m, n)).astype(np.float32)
    y = pytpp.nn.linear(x, w, b, activation="relu", residual=r)
    ref = np.maximum(x.astype(np.float64) @ w.T.astype(np.float64) + b, 0) + r
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=2e-5)


def test_rows_and_packed_paths_meet(isa, rng):
    """The same rows through the rows path (m = 16) and the packed path (m = 17, one row
    more): both within the bound."""
    n, k = 200, 1500
    x = rng.standard_normal((17, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    by_rows = pytpp.matmul(x[:16], w.T)
    packed = pytpp.matmul(x, w.T)[:16]
    check(by_rows, x[:16], w.T)
    check(packed, x[:16], w.T)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 32, 33])
def test_rows_against_row_major_weight(isa, threads, rng, dtype, m):
    """x @ W with W (k, n) too large for the no-packing path: slices of 8 rows of W (k % 8
    tails), column blocks with a masked last vector (odd n), x as a transposed view (any
    strides), and a W past the prefetching size (32 MiB); one group of rows up to 6, groups of
    4 and their remainder past it, the packed path past 32."""
    for n, k in [(1025, 1031), (1999, 333), (4100, 2048)]:
        if dtype == np.float64 and n == 4100:
            k = 1030                        # 33.8 MB either way
        x = rng.standard_normal((k, m)).astype(dtype).T
        w = rng.standard_normal((k, n)).astype(dtype)
        check(pytpp.matmul(x, w), x, w)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [1, 4, 7, 13, 32])
def test_row_major_weight_in_slices_of_4_and_8(isa, l2, rng, dtype, m):
    """x @ W read in slices of 4 or 8 rows of W (4 on a small L2 up to 8 rows of x): k % 4 and
    k % 8 tails, odd n, x as a transposed view, and one W past the prefetching size (32 MiB) at
    one row."""
    shapes = [(1025, 1031), (1999, 333), (37, 4102)]
    if m == 1:
        shapes.append((4100, 2048) if dtype == np.float32 else (4100, 1030))
    for n, k in shapes:
        x = rng.standard_normal((k, m)).astype(dtype).T
        w = rng.standard_normal((k, n)).astype(dtype)
        check(pytpp.matmul(x, w), x, w)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matrix_times_vector_by_rows(isa, threads, l2, rng, dtype):
    """W @ v runs as v^T W^T by rows of W (either layout of W): 1-D and (k, 1) vectors, W and
    its transpose, strided rows, and an out= column with a row stride (the packed path)."""
    for m, k in [(2, 128), (300, 1031), (2049, 600)]:
        w = rng.standard_normal((m, k + 3)).astype(dtype)[:, 2:2 + k]
        v = rng.standard_normal(k).astype(dtype)
        check(pytpp.matmul(w, v)[:, None], w, v[:, None])
        check(pytpp.matmul(w, v[:, None]), w, v[:, None])
        wt = np.ascontiguousarray(w.T).T                  # unit row stride
        check(pytpp.matmul(wt, v)[:, None], wt, v[:, None])
        out = np.full((m, 3), np.nan, dtype)
        check(pytpp.matmul(w, v[:, None], out=out[:, 1:2]), w, v[:, None])
        assert np.isnan(out[:, 0]).all() and np.isnan(out[:, 2]).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [1, 2, 3, 4, 5])
def test_rows_against_packed_matrix(isa, threads, rng, dtype, m):
    """A PackedMatrix / PackedLinear at a few rows: the products of rows over its panels
    (gemm_dot.inc dot_pk), k past one block (kc), widths that leave a partial last panel and
    fewer panels than a register block, x strided and in Fortran order; then one row past the
    path's limit (5: the packed GEMM)."""
    for n, k in [(7, 130), (37, 700), (100, 1500)]:
        xb = rng.standard_normal((m, k + 3)).astype(dtype)
        w = rng.standard_normal((n, k)).astype(dtype)
        pb = pytpp.linalg.pack(np.ascontiguousarray(w.T))
        for x in (xb[:, 2:2 + k], np.asfortranarray(xb[:, :k])):
            check(pytpp.matmul(x, pb), x, w.T)
        b = rng.standard_normal(n).astype(dtype)
        r = rng.standard_normal((m, n)).astype(dtype)
        layer = pytpp.nn.PackedLinear(w, b)
        x = xb[:, :k]
        y = layer(x, activation="relu", residual=r)
        ref = np.maximum(x.astype(np.float64) @ w.T.astype(np.float64) + b, 0) + r
        tol = 2 * k * np.finfo(dtype).eps * (np.abs(x.astype(np.float64)) @ np.abs(w.T) + abs(b))
        assert np.all(np.abs(y - ref) <= tol + 1e-300)


@pytest.mark.parametrize("offset", [0, 16, 256, 2048, 4080])
def test_rows_with_c_at_w_offset(rng, offset):
    """C whose rows start at (or near) the same offset in a 4 KiB page as W's rows: the sums go
    through a buffer half a page away; the result, the columns around C's block and an epilogue
    are unchanged by it."""
    m, n, k = 9, 1000, 700
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    big = np.full(m * (n + 40) + 4096, np.nan, np.float32)
    start = ((w.ctypes.data + offset - big.ctypes.data) % 4096) // 4
    out = big[start:start + m * (n + 40)].reshape(m, n + 40)
    res = pytpp.matmul(x, w, out=out[:, :n])
    check(res, x, w)
    assert np.isnan(out[:, n:]).all()
    b = rng.standard_normal(n).astype(np.float32)
    out[:] = np.nan
    y = pytpp.nn.linear(x, w.T, b, activation="relu", out=out[:, :n])   # B = w: x @ W by rows
    ref = np.maximum(x.astype(np.float64) @ w.astype(np.float64) + b, 0)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-3)
    assert np.isnan(out[:, n:]).all()
