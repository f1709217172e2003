"""The descriptor checks shared by the GEMM handle factories (tpp.brgemm, tpp.gemm)."""
import collections

import numpy as np

from pytpp import _validate

DTYPES = {np.dtype(np.float64): 0, np.dtype(np.float32): 1}   # enum pytpp_dtype

GemmDesc = collections.namedtuple(
    "GemmDesc", "m n k dtype trans_a trans_b lda ldb ldc alpha beta a_rows b_rows")


def gemm_desc(m, n, k, dtype, trans_a, trans_b, lda, ldb, ldc, alpha, beta, fn):
    """Checked and defaulted: sizes >= 0, float64/float32, leading dimensions covering the
    rows they stride over (packed rows by default), real alpha and beta. a_rows / b_rows are
    the stored rows of A and B (k for a transposed A, n for a transposed B)."""
    m, n, k = (_validate.nonneg_int(v, name, fn) for v, name in ((m, "m"), (n, "n"), (k, "k")))
    dt = _validate.dtype_arg(dtype, tuple(DTYPES), fn)
    trans_a, trans_b = bool(trans_a), bool(trans_b)
    a_rows, a_cols = (k, m) if trans_a else (m, k)
    b_rows, b_cols = (n, k) if trans_b else (k, n)
    lda = a_cols if lda is None else _validate.nonneg_int(lda, "lda", fn)
    ldb = b_cols if ldb is None else _validate.nonneg_int(ldb, "ldb", fn)
    ldc = n if ldc is None else _validate.nonneg_int(ldc, "ldc", fn)
    for name, ld, cols in (("lda", lda, a_cols), ("ldb", ldb, b_cols), ("ldc", ldc, n)):
        if ld < cols:
            raise ValueError(f"{fn}: {name}={ld} is smaller than the {cols} columns it strides over")
    try:
        alpha, beta = float(alpha), float(beta)
    except (TypeError, ValueError):
        raise TypeError(f"{fn}: alpha and beta must be real numbers, got {alpha!r}, {beta!r}") from None
    return GemmDesc(m, n, k, dt, trans_a, trans_b, lda, ldb, ldc, alpha, beta, a_rows, b_rows)
