"""Random block-sparse matrices and the float64 reference the sparse tests compare against."""
import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), np.dtype(np.float64), BF16]


def block_sparse(rng, shape, block, density, dtype, empty_rows=()):
    """A dense matrix whose non-zeros fill random (bm x bk) blocks; block rows in `empty_rows`
    are left empty."""
    m, k = shape
    bm, bk = block
    mask = rng.random((m // bm, k // bk)) < density
    for r in empty_rows:
        mask[r] = False
    vals = rng.standard_normal((m, k)) + 0.1  # +0.1: no accidental zero block
    a = vals * np.kron(mask, np.ones((bm, bk)))
    return a.astype(dtype)


def assert_product(res, a, b, result_dtype):
    """res == a @ b within summation error: |res - ref| <= k * eps * (|a| @ |b|) (+ a tiny
    absolute floor), with ref and the bound in float64 of the same inputs (bfloat16 inputs are
    exact in float32 and accumulate there, so they get float32's eps)."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    ref = a64 @ b64
    assert res.dtype == result_dtype
    assert res.shape == ref.shape
    k = max(a64.shape[1], 1)
    eps = np.finfo(np.float64 if result_dtype == np.float64 else np.float32).eps
    bound = k * eps * (np.abs(a64) @ np.abs(b64)) + 1e-30
    err = np.abs(res.astype(np.float64) - ref)
    assert np.all(err <= bound), f"max err {err.max()} (bound {bound[err > bound].min()})"


def result_dtype(dtype):
    return np.dtype(np.float32) if np.dtype(dtype) == BF16 else np.dtype(dtype)
