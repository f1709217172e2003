"""Small-GEMM descriptors -> cached :class:`~pytpp._core._smallgemm.GemmKernel` handles."""
from __future__ import annotations

import copyreg
from typing import Literal, Union, overload

import numpy as np

from pytpp._core import _runtime, _smallgemm
from pytpp._typing import DTypeLike
from pytpp.tpp import _cache, _lowp

# dtypes that give the float handle (the others: bfloat16 and 8-bit types, a low-precision one)
_FloatDType = Union[type[np.float64], type[np.float32], np.dtype[np.float64], np.dtype[np.float32],
                    Literal["float64", "float32", "f8", "f4", "d", "f"]]
from pytpp.tpp._gemm_desc import DTYPES, gemm_desc



@overload
def gemm(m: int, n: int, k: int, dtype: _FloatDType = ..., *, trans_a: bool = ..., trans_b: bool = ..., lda: int | None = ...,
         ldb: int | None = ..., ldc: int | None = ..., alpha: float = ..., beta: float = ...,
         b_dtype: DTypeLike = ..., out_dtype: DTypeLike = ..., b_vnni: bool = ...,
           a_7bit: bool = ...) -> _smallgemm.GemmKernel: ...
@overload
def gemm(m: int, n: int, k: int, dtype: DTypeLike = ..., *, trans_a: bool = ..., trans_b: bool = ..., lda: int | None = ...,
         ldb: int | None = ..., ldc: int | None = ..., alpha: float = ..., beta: float = ...,
         b_dtype: DTypeLike = ..., out_dtype: DTypeLike = ..., b_vnni: bool = ...,
           a_7bit: bool = ...) -> _smallgemm.GemmKernel | _lowp.LowpKernel: ...


def gemm(m: int, n: int, k: int, dtype: DTypeLike = np.float64, *, trans_a: bool = False,
         trans_b: bool = False, lda: int | None = None, ldb: int | None = None,
         ldc: int | None = None, alpha: float = 1.0, beta: float = 1.0,
         b_dtype: DTypeLike = None, out_dtype: DTypeLike = None,
         b_vnni: bool = False, a_7bit: bool = False) -> _smallgemm.GemmKernel | _lowp.LowpKernel:
    """Dispatch a kernel for one small matrix product: ``C = alpha * op(A) @ op(B) + beta * C``.

    The kernel is chosen once, here, for the shape, layout and the active ISA level (a register
    blocking specialised ahead of time); calling the handle then costs a few hundred nanoseconds
    from Python and only checks types, contiguity, sizes and aliasing. Operands are row-major
    flat buffers: A is m x k with row stride `lda` (k x m when `trans_a`), B is k x n with row
    stride `ldb` (n x k when `trans_b`), C is m x n with row stride `ldc`.

    Parameters
    ----------
    m, n, k : int
        Shape of the product.
    dtype : float64, float32, bfloat16, int8 or uint8
        Type of A (float64 / float32: of A, B, C and the accumulation). bfloat16 and 8-bit
        types give the low-precision handle of :func:`pytpp.tpp.brgemm` (float32 / int32 C),
        called as ``h(a, b, c)``.
    trans_a, trans_b : bool
        Read A (B) transposed: the HPC layouts A^T B, A B^T, A^T B^T cost no copy of A, and at
        most a copy of the small B per call.
    lda, ldb, ldc : int, optional
        Leading dimensions (row strides in elements). Default: packed rows.
    alpha, beta : float
        Scale of the product and of C. ``beta == 0`` never reads C (it may hold garbage).
    b_dtype, out_dtype, b_vnni
        For bfloat16 / 8-bit handles, as in :func:`pytpp.tpp.brgemm`.

    Returns
    -------
    GemmKernel
        A cached handle: the same descriptor returns the same object. ``kern(a, b, c)`` runs one
        product on C-contiguous arrays and returns `c`; ``kern.stack(a, b, c, count)`` runs
        `count` products on consecutive blocks. Cython code can ``cimport`` the class from
        ``pytpp._core._smallgemm`` and call ``kern.run(pa, pb, pc)`` without the GIL.

    Raises
    ------
    TypeError
        For a non-integer size or an unsupported dtype.
    ValueError
        For a negative size or a leading dimension smaller than the row it strides over.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> kern = pytpp.tpp.gemm(2, 2, 2, beta=0.0)
    >>> a = np.array([[1.0, 2.0], [3.0, 4.0]]); b = np.eye(2); c = np.empty((2, 2))
    >>> kern(a, b, c)
    array([[1., 2.],
           [3., 4.]])
    >>> kt = pytpp.tpp.gemm(2, 2, 2, trans_b=True, alpha=2.0, beta=1.0)
    >>> kt(a, a, c)   # c += 2 * a @ a.T
    array([[11., 24.],
           [25., 54.]])
    """
    fn = "pytpp.tpp.gemm"
    if _lowp.is_lowp(dtype):
        _lowp.no_float_knobs(fn, lda=(lda, None), ldb=(ldb, None), ldc=(ldc, None),
                             trans_a=(bool(trans_a), False), trans_b=(bool(trans_b), False),
                             alpha=(alpha, 1.0))
        return _lowp.handle("gemm", m, n, k, dtype, b_dtype, out_dtype, b_vnni, beta, "stride",
                            fn, gemm, a_7bit)
    m, n, k, dt, trans_a, trans_b, lda, ldb, ldc, alpha, beta, _, _ = gemm_desc(
        m, n, k, dtype, trans_a, trans_b, lda, ldb, ldc, alpha, beta, fn)
    _lowp.float_only(fn, b_dtype, out_dtype, b_vnni, dt, a_7bit)
    isa = _runtime.get_isa()
    key = ("gemm", m, n, k, dt.name, lda, ldb, ldc, trans_a, trans_b, alpha, beta, isa)
    kern = _cache.lookup(key)
    if kern is None:
        descriptor = dict(m=m, n=n, k=k, dtype=dt.name, lda=lda, ldb=ldb, ldc=ldc,
                          trans_a=trans_a, trans_b=trans_b, alpha=alpha, beta=beta)
        kern = _smallgemm.GemmKernel(m, n, k, DTYPES[dt], _runtime.isa_index(isa), lda, ldb,
                                     ldc, trans_a, trans_b, alpha, beta, descriptor)
        kern = _cache.store(key, kern)
    return kern


def _reduce_gemm(kern):
    return _cache.rebuild, (gemm, (), dict(kern.descriptor))


copyreg.pickle(_smallgemm.GemmKernel, _reduce_gemm)
