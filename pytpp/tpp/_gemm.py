"""BRGEMM descriptors -> cached :class:`~pytpp._core._brgemm.BrgemmKernel` handles."""
from __future__ import annotations

import copyreg

import numpy as np

from pytpp import _validate
from pytpp._core import _brgemm, _runtime
from pytpp._typing import DTypeLike
from pytpp.tpp import _cache
from pytpp.tpp._gemm_desc import DTYPES, gemm_desc

_MODES = {"stride": 0, "offset": 1, "address": 2}


def brgemm(m: int, n: int, k: int, dtype: DTypeLike = np.float64, *, lda: int | None = None,
           ldb: int | None = None, ldc: int | None = None, trans_a: bool = False,
           trans_b: bool = False, alpha: float = 1.0, beta: float = 1.0, batch: str = "stride",
           stride_a: int | None = None, stride_b: int | None = None) -> _brgemm.BrgemmKernel:
    """Dispatch a batch-reduce GEMM kernel: ``C = alpha * sum_i op(A_i) @ op(B_i) + beta * C``.

    Operands are row-major: A_i is m x k with row stride `lda` (k x m when `trans_a`), B_i is
    k x n with row stride `ldb` (n x k when `trans_b`), C is m x n with row stride `ldc`.

    Parameters
    ----------
    m, n, k : int
        Shape of the product.
    dtype : float64 or float32
        Type of A, B, C and of the accumulation.
    lda, ldb, ldc : int, optional
        Leading dimensions (row strides in elements). Default: packed rows.
    trans_a, trans_b : bool
        Read A_i (B_i) transposed.
    alpha, beta : float
        Scale of the product and of C. ``beta == 0`` never reads C.
    batch : {'stride', 'offset', 'address'}
        How the A_i, B_i are found: fixed element strides from a base, per-block element offsets,
        or a list of blocks (addresses).
    stride_a, stride_b : int, optional
        Element strides between blocks in 'stride' mode. Default: one packed block.

    Returns
    -------
    BrgemmKernel
        A cached handle: the same descriptor returns the same object.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> k = pytpp.tpp.brgemm(2, 2, 3, batch="offset", beta=0.0)
    >>> a = np.arange(12.0); b = np.ones(12); c = np.empty((2, 2))
    >>> k(a, b, c, [0, 6], [0, 6])
    array([[24., 24.],
           [42., 42.]])
    """
    fn = "pytpp.tpp.brgemm"
    if batch not in _MODES:
        raise ValueError(f"{fn}: batch must be one of {tuple(_MODES)}, got {batch!r}")
    m, n, k, dt, trans_a, trans_b, lda, ldb, ldc, alpha, beta, a_rows, b_rows = gemm_desc(
        m, n, k, dtype, trans_a, trans_b, lda, ldb, ldc, alpha, beta, fn)
    if batch == "stride":
        stride_a = a_rows * lda if stride_a is None else _validate.nonneg_int(stride_a, "stride_a", fn)
        stride_b = b_rows * ldb if stride_b is None else _validate.nonneg_int(stride_b, "stride_b", fn)
    elif stride_a is not None or stride_b is not None:
        raise ValueError(f"{fn}: stride_a/stride_b apply only to batch='stride'")
    else:
        stride_a = stride_b = 0
    isa = _runtime.get_isa()
    key = ("brgemm", m, n, k, dt.name, lda, ldb, ldc, trans_a, trans_b, alpha, beta, batch,
           stride_a, stride_b, isa)
    kern = _cache.lookup(key)
    if kern is None:
        descriptor = dict(m=m, n=n, k=k, dtype=dt.name, lda=lda, ldb=ldb, ldc=ldc,
                          trans_a=trans_a, trans_b=trans_b, alpha=alpha, beta=beta, batch=batch)
        if batch == "stride":
            descriptor.update(stride_a=stride_a, stride_b=stride_b)
        kern = _brgemm.BrgemmKernel(m, n, k, DTYPES[dt], _runtime.isa_index(isa), _MODES[batch],
                                    lda, ldb, ldc, trans_a, trans_b, alpha, beta, stride_a,
                                    stride_b, descriptor)
        kern = _cache.store(key, kern)
    return kern


def _reduce_brgemm(kern):
    return _cache.rebuild, (brgemm, (), dict(kern.descriptor))


copyreg.pickle(_brgemm.BrgemmKernel, _reduce_brgemm)
