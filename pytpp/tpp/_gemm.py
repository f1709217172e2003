"""BRGEMM descriptors -> cached :class:`~pytpp._core._brgemm.BrgemmKernel` handles."""
from __future__ import annotations

import copyreg
from typing import Literal, Union, overload

import numpy as np

from pytpp import _validate
from pytpp._core import _brgemm, _runtime
from pytpp._typing import DTypeLike
from pytpp.tpp import _cache, _lowp

# dtypes that give the float handle (the others: bfloat16 and 8-bit types, a low-precision one)
_FloatDType = Union[type[np.float64], type[np.float32], np.dtype[np.float64], np.dtype[np.float32],
                    Literal["float64", "float32", "f8", "f4", "d", "f"]]
from pytpp.tpp._gemm_desc import DTYPES, gemm_desc

_MODES = {"stride": 0, "offset": 1, "address": 2}


@overload
def brgemm(m: int, n: int, k: int, dtype: _FloatDType = ..., *, lda: int | None = ..., ldb: int | None = ..., ldc: int | None = ..., trans_a: bool = ...,
           trans_b: bool = ..., alpha: float = ..., beta: float = ..., batch: str = ...,
           stride_a: int | None = ..., stride_b: int | None = ..., b_dtype: DTypeLike = ...,
           out_dtype: DTypeLike = ..., b_vnni: bool = ...,
           a_7bit: bool = ...) -> _brgemm.BrgemmKernel: ...
@overload
def brgemm(m: int, n: int, k: int, dtype: DTypeLike = ..., *, lda: int | None = ..., ldb: int | None = ..., ldc: int | None = ..., trans_a: bool = ...,
           trans_b: bool = ..., alpha: float = ..., beta: float = ..., batch: str = ...,
           stride_a: int | None = ..., stride_b: int | None = ..., b_dtype: DTypeLike = ...,
           out_dtype: DTypeLike = ..., b_vnni: bool = ...,
           a_7bit: bool = ...) -> _brgemm.BrgemmKernel | _lowp.LowpKernel: ...


def brgemm(m: int, n: int, k: int, dtype: DTypeLike = np.float64, *, lda: int | None = None,
           ldb: int | None = None, ldc: int | None = None, trans_a: bool = False,
           trans_b: bool = False, alpha: float = 1.0, beta: float = 1.0, batch: str = "stride",
           stride_a: int | None = None, stride_b: int | None = None,
           b_dtype: DTypeLike = None, out_dtype: DTypeLike = None,
           b_vnni: bool = False, a_7bit: bool = False) -> _brgemm.BrgemmKernel | _lowp.LowpKernel:
    """Dispatch a batch-reduce GEMM kernel: ``C = alpha * sum_i op(A_i) @ op(B_i) + beta * C``.

    Operands are row-major: A_i is m x k with row stride `lda` (k x m when `trans_a`), B_i is
    k x n with row stride `ldb` (n x k when `trans_b`), C is m x n with row stride `ldc`.

    Parameters
    ----------
    m, n, k : int
        Shape of the product.
    dtype : float64, float32, bfloat16, int8 or uint8
        Type of A (float64 / float32: of A, B, C and the accumulation). ``ml_dtypes.bfloat16``
        multiplies in float32 (C float32, or bfloat16 rounded to nearest even with
        ``out_dtype``); int8 / uint8 accumulate exactly in int32 (wrapping modulo 2^32 as
        numpy's int32 does: exact while ``k * max|a| * max|b| < 2**31``, k < 66576 for any
        values). Low-precision handles take ``beta`` 0 or 1 and operands with their own strides
        (the leading-dimension, transpose and alpha arguments are for float handles).
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
    b_dtype : dtype, optional
        Type of B for 8-bit handles (int8 or uint8, default `dtype`); any signedness mix of the
        operands actually passed is computed exactly.
    out_dtype : dtype, optional
        C's type: float32 (default) or bfloat16 for bf16 handles, int32 for 8-bit ones.
    b_vnni : bool
        B blocks are passed in :func:`pytpp.linalg.vnni_pack`'s layout (ceil(k/v), n, v),
        v = 2 for bfloat16 and 4 for 8-bit types: no reformatting per call. Same result.
    a_7bit : bool
        uint8 A holds values in [0, 127] only (activations quantized with a reduced range):
        with int8 B the AVX2 level may then run ``vpmaddubsw`` kernels, exact in that range
        and faster than its int16 ones (not on CPUs with AVX-VNNI, whose ``vpdpbusd`` is faster
        still on any values). Checked per call at the AVX2 level (ValueError for a larger
        value).

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
    if _lowp.is_lowp(dtype):
        _lowp.no_float_knobs(fn, lda=(lda, None), ldb=(ldb, None), ldc=(ldc, None),
                             trans_a=(bool(trans_a), False), trans_b=(bool(trans_b), False),
                             alpha=(alpha, 1.0), stride_a=(stride_a, None),
                             stride_b=(stride_b, None))
        return _lowp.handle("brgemm", m, n, k, dtype, b_dtype, out_dtype, b_vnni, beta, batch,
                            fn, brgemm, a_7bit)
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
    _lowp.float_only(fn, b_dtype, out_dtype, b_vnni, dt, a_7bit)
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
