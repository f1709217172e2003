"""pytpp.matmul: np.matmul semantics on a Goto/BLIS packed GEMM, float64/float32/bfloat16."""
import numpy as np

from pytpp import _validate
from pytpp._core import _matmul as _cm
from pytpp._core import _runtime
from pytpp.linalg import _operands as ops
from pytpp.linalg import _smallgemm
from pytpp.linalg._operands import BFLOAT16, F32 as _F32, F64 as _F64

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


def matmul(a, b, /, out=None, *, dtype=None):
    """Matrix product of two arrays, with the semantics of :func:`numpy.matmul`.

    A Goto/BLIS packed GEMM (five loops around the engine's micro-kernels, A and B packed into
    cache-sized panels, blocks sized from the detected caches) on the best ISA level of this CPU;
    small products skip packing and threads.

    Parameters
    ----------
    a, b : array_like
        float64, float32 or ``ml_dtypes.bfloat16``, any strides (transposed, Fortran-ordered and
        negative-stride views are read in place, no copy). 1-D operands are promoted to a matrix
        (``a`` to a row, ``b`` to a column) and the added dimension is removed from the result;
        leading dimensions broadcast. ``b`` may also be a :class:`pytpp.linalg.PackedMatrix`.
    out : ndarray, optional
        Where to write the result: exactly the result's shape; its dtype is used as the result
        dtype when `dtype` is not given (same-kind casting from the computed type). It may overlap
        the inputs (the product is then computed into a temporary first), as in numpy.
    dtype : dtype, optional
        Result dtype: float64, float32 or bfloat16. bfloat16 x bfloat16 multiplies with float32
        accumulation and returns float32 unless ``dtype=ml_dtypes.bfloat16`` (rounded to nearest
        even). Mixed bfloat16 x float32 computes in float32 (bfloat16 widens exactly).

    Returns
    -------
    ndarray
        The product, shape ``broadcast(a.shape[:-2], b.shape[:-2]) + (m, n)`` minus promoted
        dimensions. float64 if an input is float64, else float32 (bfloat16 when asked).

    Raises
    ------
    TypeError
        For an unsupported dtype (int, complex, ...) of `a`, `b`, `out` or `dtype`.
    ValueError
        For 0-d operands, mismatched core dimensions, leading dimensions that do not broadcast,
        a wrong `out` shape or a read-only `out`.

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
    >>> import ml_dtypes
    >>> x = np.ones((2, 8), ml_dtypes.bfloat16)
    >>> pytpp.matmul(x, x.T)
    array([[8., 8.],
           [8., 8.]], dtype=float32)
    >>> pytpp.matmul(x, x.T, dtype=ml_dtypes.bfloat16).dtype
    dtype(bfloat16)
    """
    if dtype is None and not ops.bf16_kernel:
        r = _cm.fast(a, b, out)
        if r is not None:
            return r
    if getattr(b, "_pytpp_packed", False):
        return b._rmatmul(a, out, dtype)
    if getattr(a, "_pytpp_packed", False):
        raise TypeError(f"{_FN}: a PackedMatrix can only be the right operand (b)")
    return _matmul_general(a, b, out, dtype)


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


def _matmul_general(a, b, out, dtype):
    a = ops.as_operand(a, "a")
    b = ops.as_operand(b, "b")
    a2, b2, lead, m, k, n, shape = _result_shape(a, b)
    dt_code, op_dtype, result = _resolve_dtypes(a, b, dtype, out)
    out, out_given = ops.result_array(out, shape, result)
    if out.size == 0:
        return out
    if k == 0:
        out[...] = 0
        return ops.scalar_if_0d(out, out_given)
    a2 = _validate.kernel_operand(a2, op_dtype)
    b2 = _validate.kernel_operand(b2, op_dtype)
    acc_dtype = _F32 if dt_code == _cm.DT_BF16 else op_dtype
    full = lead + (m, n)
    # Where the kernel writes: out itself when it has the accumulation dtype, unit column (or
    # row: then C^T = B^T A^T) stride and no overlap with the inputs; a temporary otherwise.
    view = out
    if a.ndim == 1:  # put back the dimensions 1-D promotion removed (always a view)
        view = np.expand_dims(view, -1 if b.ndim == 1 else -2)
    if b.ndim == 1:
        view = np.expand_dims(view, -1)
    direct = (out.dtype == acc_dtype and _validate.element_strides_ok(view)
              and not np.may_share_memory(view, a2) and not np.may_share_memory(view, b2))
    isa = _runtime.isa_index(_runtime.get_isa())
    if direct and (view.strides[-1] == view.itemsize or n == 1):
        _compute(a2, b2, view, lead, dt_code, isa)
    elif direct and view.strides[-2] == view.itemsize:
        _compute(np.swapaxes(b2, -1, -2), np.swapaxes(a2, -1, -2), np.swapaxes(view, -1, -2),
                 lead, dt_code, isa)
    else:
        tmp = np.empty(full, acc_dtype)
        _compute(a2, b2, tmp, lead, dt_code, isa)
        if out.dtype == BFLOAT16 and tmp.dtype == _F32:
            ops.store_bf16(tmp, view)
        else:
            np.copyto(view, tmp, casting="same_kind")
    return ops.scalar_if_0d(out, out_given)


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
