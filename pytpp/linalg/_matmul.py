"""pytpp.matmul: np.matmul semantics on a Goto/BLIS packed GEMM, float64/float32/bfloat16; the
products it has no kernel for (integers, complex, object ...) are numpy's."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from pytpp import _validate
from pytpp._core import _matmul as _cm
from pytpp._core import _runtime
from pytpp.linalg import _lowp as _lp
from pytpp.linalg import _operands as ops
from pytpp.linalg import _smallgemm
from pytpp.linalg._operands import BFLOAT16, F32 as _F32, F64 as _F64

if TYPE_CHECKING:
    from pytpp._typing import Array, ArrayLike, DTypeLike, PackedOperand

_FN = "pytpp.matmul"

# Stacks of matrices at most this big per side go to the small-GEMM stack kernels, which beat
# the Goto batch up to here (fp64 40^3: 34 vs 22 GFLOP/s).
_SMALL_STACK_MAX = 64


def _resolve_dtypes(a, b, dtype, out):
    """(kernel dtype code, operand dtype the kernel reads, result dtype).

    bfloat16 x bfloat16 runs the bf16 kernel (float32 accumulation) unless float64 is asked for;
    anything else computes in float64 or float32 (bfloat16 and float16 widen exactly to float32)
    and the result follows numpy's promotion (float16 x float16 gives float16)."""
    dtype = ops.result_dtype_arg(dtype)
    both_bf16 = a.dtype == BFLOAT16 and b.dtype == BFLOAT16
    if both_bf16 and (dtype is None or dtype != _F64):  # (np.dtype == None is float64!)
        code, operand, default = _cm.DT_BF16, BFLOAT16, _F32
    else:
        default = _validate.promote(a.dtype, b.dtype)
        if default == BFLOAT16:
            default = _F32
        need = default if dtype is None or dtype == BFLOAT16 else _validate.promote(default, dtype)
        operand = _F64 if need == _F64 else _F32
        code = _cm.DT_F64 if operand == _F64 else _cm.DT_F32
    return code, operand, default if dtype is None else dtype


def matmul(a: ArrayLike, b: ArrayLike | PackedOperand, /, out: Array | None = None, *,
           dtype: DTypeLike = None, loops: str | None = None) -> Any:
    """Matrix product of two arrays, a drop-in for :func:`numpy.matmul`.

    A Goto/BLIS packed GEMM (five loops around the engine's micro-kernels, A and B packed into
    cache-sized panels, blocks sized from the detected caches) on the best ISA level of this CPU;
    small products skip packing and threads. Products pytpp has no kernel for are numpy's.

    Parameters
    ----------
    a, b : array_like
        Any dtype ``np.matmul`` takes. pytpp's kernels compute float64, float32,
        ``ml_dtypes.bfloat16`` and float16 (in float32) products, and integer or bool operands
        met with one of those (converted first, as numpy casts them); any strides (transposed,
        Fortran-ordered and negative-stride views are read in place, no copy). Every other
        product (integer x integer, bool, complex, longdouble, object ...) is computed by
        ``np.matmul``, with its result dtype. 1-D operands are promoted to a matrix (``a`` to a
        row, ``b`` to a column) and the added dimension is removed from the result; leading
        dimensions broadcast. ``b`` may also be a :class:`pytpp.linalg.PackedMatrix`.
    out : ndarray, optional
        Where to write the result: exactly the result's shape; its dtype can be any dtype the
        result casts to under numpy's ``same_kind`` rule. It may overlap the inputs (the product
        is then computed into a temporary first), as in numpy.
    dtype : dtype, optional
        Result dtype, as numpy's ``dtype=``. bfloat16 x bfloat16 multiplies with float32
        accumulation and returns float32 unless ``dtype=ml_dtypes.bfloat16`` (rounded to nearest
        even). Mixed bfloat16 x float32 computes in float32 (bfloat16 widens exactly).
    loops : str, optional
        A PARLOOPER loop-spec string (``pytpp.loops``; paper 001 Listing 1): the product of 2-D
        float operands runs as BRGEMMs over blocked copies of a and b, the letters ``a``, ``b``,
        ``c`` being the K, M and N block loops (e.g. ``"bcaBCb"``, ``"aBC @ schedule(dynamic,
        1)"``, ``"aB{R:2}C{C:1}"``). A malformed string raises ValueError. See docs/loops.md.

    Returns
    -------
    ndarray or scalar
        The product, shape ``broadcast(a.shape[:-2], b.shape[:-2]) + (m, n)`` minus promoted
        dimensions (a scalar for two 1-D operands). Its dtype is numpy's, except that
        bfloat16 x bfloat16 gives float32 unless `dtype` says otherwise.

    Raises
    ------
    TypeError, ValueError
        Exactly what ``np.matmul`` raises for the same call (0-d operands, mismatched core
        dimensions, leading dimensions that do not broadcast, a wrong `out` shape, a read-only
        `out`, an `out` the result does not cast to): a call pytpp's checks refuse is handed to
        numpy before any kernel runs. With a PackedMatrix, pytpp's own errors.

    Notes
    -----
    Float32 and float64 results match ``np.matmul`` to within the rounding of a k-term dot
    product (the summation order differs from OpenBLAS). NaN and Inf propagate as in numpy.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> a = np.arange(6.0).reshape(2, 3); b = np.ones((3, 2))
    >>> pytpp.matmul(a, b)
    array([[ 3.,  3.],
           [12., 12.]])
    >>> pytpp.matmul(a, np.ones(3))        # 1-D b: a matrix-vector product
    array([ 3., 12.])
    >>> pytpp.matmul(np.ones((4, 2, 3), np.float32), b.astype(np.float32)).shape
    (4, 2, 2)
    >>> pytpp.matmul(np.arange(4).reshape(2, 2), np.eye(2, dtype=np.int64))  # numpy's, exact
    array([[0, 1],
           [2, 3]])
    >>> import ml_dtypes
    >>> x = np.ones((2, 8), ml_dtypes.bfloat16)
    >>> pytpp.matmul(x, x.T)
    array([[8., 8.],
           [8., 8.]], dtype=float32)
    >>> pytpp.matmul(x, x.T, dtype=ml_dtypes.bfloat16).dtype
    dtype(bfloat16)
    """
    if loops is not None:
        from pytpp.linalg._loop_gemm import matmul_loops
        if dtype is not None:
            raise TypeError(f"{_FN}: loops= does not take dtype=")
        return matmul_loops(a, b, loops, out)
    if dtype is None and not ops.bf16_kernel:
        r = _cm.fast(a, b, out)
        if r is not None:
            return r
    if getattr(b, "_pytpp_packed", False):
        return b._rmatmul(a, out, dtype)
    if getattr(a, "_pytpp_packed", False):
        raise TypeError(f"{_FN}: a PackedMatrix can only be the right operand (b)")
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and _lp.is_int8_pair(a, b):
        r = _int8_matmul(a, b, out, dtype)
        if r is not None:
            return r
    plan = _plan(a, b, out, dtype)
    if plan is None:
        # no kernel for these dtypes, or a call pytpp's checks refuse: numpy computes it or
        # raises its own error for it (its exception type and message: a drop-in)
        return np.matmul(a, b, out=out, dtype=dtype)
    return _run(plan)


def _int8_matmul(a, b, out, dtype):
    """int8/uint8 x int8/uint8 on the exact int32 kernels, in numpy's result dtype (or `dtype`,
    or `out`'s), wrapping as numpy's integer arithmetic; None for what numpy must answer (a
    float result asked for, a call numpy refuses)."""
    try:
        want = (np.dtype(dtype) if dtype is not None else
                out.dtype if isinstance(out, np.ndarray) else np.result_type(a, b))
        if want.kind not in "iu":
            return None
        a2, b2, lead, m, k, n, shape = _result_shape(a, b)
        if out is not None and (not isinstance(out, np.ndarray) or out.shape != shape
                                or not out.flags.writeable
                                or not np.can_cast(want, out.dtype, "same_kind")):
            return None
    except (TypeError, ValueError):
        return None
    L = 1
    for d in lead:
        L *= d
    if lead:
        a4 = np.broadcast_to(a2, lead + (m, k)).reshape((L, 1, m, k))
        b4 = np.broadcast_to(b2, lead + (k, n)).reshape((L, 1, k, n))
    else:       # (views of one product: broadcast_to was half of a small call's time)
        a4, b4 = a2[None, None], b2[None, None]
    if out is not None and want == out.dtype == np.int32 and out.flags.c_contiguous:
        # the int32 sums are the result: written into `out` itself (the handle copies through
        # a stand-in should out share memory with a or b)
        _lp.sum_products_i32(a4, b4, L, m, n, out=out.reshape((L, m, n)))
        return out
    s32 = _lp.sum_products_i32(a4, b4, L, m, n).reshape(shape)
    res = _lp.int_result(s32, want, k, lambda: np.matmul(a.astype(np.int64), b.astype(np.int64)))
    if out is not None:
        np.copyto(out, res, casting="same_kind")
        return out
    return res[()] if res.ndim == 0 else res


def _result_shape(a, b):
    """(a as >= 2-D, b as >= 2-D, leading shape, m, k, n, result shape)."""
    a_vec, b_vec = a.ndim == 1, b.ndim == 1
    a2 = a.reshape(1, -1) if a_vec else a
    b2 = b.reshape(-1, 1) if b_vec else b
    m, k = a2.shape[-2:]
    k2, n = b2.shape[-2:]
    if k != k2:
        raise ValueError(f"{_FN}: core dimensions do not match: a has shape {a.shape} (k = {k}, "
                         f"last axis), b has shape {b.shape} (k = {k2}, "
                         f"{'only' if b_vec else 'second-to-last'} axis)")
    try:
        lead = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    except ValueError:
        raise ValueError(f"{_FN}: leading dimensions {a.shape[:-2]} and {b.shape[:-2]} do not "
                         f"broadcast") from None
    shape = lead + ((m,) if not a_vec else ()) + ((n,) if not b_vec else ())
    return a2, b2, lead, m, k, n, shape


class _Plan(NamedTuple):
    a: np.ndarray
    b: np.ndarray
    a2: np.ndarray
    b2: np.ndarray
    lead: tuple
    m: int
    k: int
    n: int
    dt_code: int
    op_dtype: np.dtype
    out: np.ndarray
    out_given: bool


def _plan(a, b, out, dtype):
    """The call checked and its result allocated, before any kernel runs; None when pytpp has
    no kernel for the dtypes or its checks refuse the call (numpy then takes it)."""
    try:
        a = ops.as_operand(a, "a", integers=True)
        b = ops.as_operand(b, "b", integers=True)
        if not ops.kernel_computes(a.dtype, b.dtype, dtype):
            return None
        a2, b2, lead, m, k, n, shape = _result_shape(a, b)
        dt_code, op_dtype, result = _resolve_dtypes(a, b, dtype, out)
        out, out_given = ops.result_array(out, shape, result)
    except (TypeError, ValueError):
        return None
    return _Plan(a, b, a2, b2, lead, m, k, n, dt_code, op_dtype, out, out_given)


def _run(p):
    """Compute a checked call: the product into p.out (or a temporary, then copied in)."""
    out, lead, m, n = p.out, p.lead, p.m, p.n
    if out.size == 0:
        return out
    if p.k == 0:
        out[...] = 0
        return ops.scalar_if_0d(out, p.out_given)
    a2 = _validate.kernel_operand(p.a2, p.op_dtype)
    b2 = _validate.kernel_operand(p.b2, p.op_dtype)
    acc_dtype = _F32 if p.dt_code == _cm.DT_BF16 else p.op_dtype
    full = lead + (m, n)
    # Where the kernel writes: out itself when it has the accumulation dtype, unit column (or
    # row: then C^T = B^T A^T) stride and no overlap with the inputs; a temporary otherwise.
    view = out
    # put back the dimensions 1-D promotion removed (views; indexing, not np.expand_dims, which
    # cost ~5 us a call)
    if p.a.ndim == 1:
        view = view[..., None] if p.b.ndim == 1 else view[..., None, :]
    if p.b.ndim == 1:
        view = view[..., None]
    direct = (out.dtype == acc_dtype and _validate.element_strides_ok(view)
              and not np.may_share_memory(view, a2) and not np.may_share_memory(view, b2))
    isa = _runtime.isa_index(_runtime.get_isa())
    if direct and (view.strides[-1] == view.itemsize or n == 1):
        _compute(a2, b2, view, lead, p.dt_code, isa)
    elif direct and view.strides[-2] == view.itemsize:
        _compute(np.swapaxes(b2, -1, -2), np.swapaxes(a2, -1, -2), np.swapaxes(view, -1, -2),
                 lead, p.dt_code, isa)
    else:
        tmp = np.empty(full, acc_dtype)
        _compute(a2, b2, tmp, lead, p.dt_code, isa)
        if out.dtype == BFLOAT16 and tmp.dtype == _F32:
            ops.store_bf16(tmp, view)
        else:
            np.copyto(view, tmp, casting="same_kind")
    return ops.scalar_if_0d(out, p.out_given)


def _compute(a2, b2, c, lead, dt_code, isa):
    """c[...] = a2 @ b2 with c of shape lead + (m, n), unit column stride, accumulation dtype."""
    kern = ops.bf16_kernel
    if not lead:
        _cm.gemm(a2, b2, c, dt_code, isa, kern)
        return
    m, n = c.shape[-2:]
    k = a2.shape[-1]
    if dt_code != _cm.DT_BF16 and max(m, n, k) <= _SMALL_STACK_MAX:
        a3 = np.broadcast_to(a2, lead + a2.shape[-2:]).reshape((-1,) + a2.shape[-2:])
        b3 = np.broadcast_to(b2, lead + b2.shape[-2:]).reshape((-1,) + b2.shape[-2:])
        try:
            c3 = c.reshape((-1, m, n), copy=False)
        except ValueError:
            c3 = None
        if c3 is not None:
            _smallgemm._stack_matmul(a3, b3, c3)
            return
    off_a, ab = ops.offsets(a2, lead)
    off_b, bb = ops.offsets(b2, lead)
    off_c, _ = ops.offsets(c, lead)
    _cm.gemm_batch(ab, bb, c, off_a, off_b, off_c, dt_code, isa, kern)
