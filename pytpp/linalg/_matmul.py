"""pytpp.matmul: np.matmul semantics on a Goto/BLIS packed GEMM, float64/float32/bfloat16."""
import ml_dtypes
import numpy as np

from pytpp import _validate
from pytpp._core import _matmul as _cm
from pytpp._core import _runtime
from pytpp.linalg import _smallgemm

_FN = "pytpp.matmul"

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
_cm.set_bf16_typenum(BFLOAT16.num)

_F64, _F32, _F16 = np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.float16)
SUPPORTED = (_F64, _F32, BFLOAT16)
RESULT_TYPES = SUPPORTED + (_F16,)
_NAMES = "float64, float32, bfloat16 or float16"

# Tests may force one bf16 kernel ("ref", "avx2", "avx512" emulation, "avx512_bf16" native).
_bf16_kernel = 0

# Stacks of matrices at most this big per side go to the small-GEMM stack kernels, which beat
# the Goto batch up to here (fp64 40^3: 34 vs 22 GFLOP/s).
_SMALL_STACK_MAX = 64


def _as_operand(x, name, fn=_FN):
    if not (isinstance(x, np.ndarray) or hasattr(x, "__array__")
            or isinstance(x, (list, tuple, int, float))):
        raise TypeError(f"{fn}: {name} must be array_like, got {type(x).__name__}")
    arr = _validate.contraction_operand(x, name, fn)
    if arr.ndim == 0:
        raise ValueError(f"{fn}: {name} is a scalar (0-d); matmul needs at least 1 dimension "
                         f"(use * for scalars)")
    return arr


def _result_dtype_arg(dtype):
    if dtype is None:
        return None
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{_FN}: dtype={dtype!r} is not a dtype; expected {_NAMES}") from None
    if dtype not in RESULT_TYPES:
        raise TypeError(f"{_FN}: dtype={dtype} is not supported; expected {_NAMES}")
    return dtype


def _resolve_dtypes(a, b, dtype, out):
    """(kernel dtype code, operand dtype the kernel reads, result dtype).

    bfloat16 x bfloat16 runs the bf16 kernel (float32 accumulation) unless float64 is asked for;
    anything else computes in float64 or float32 (bfloat16 and float16 widen exactly to float32)
    and the result follows numpy's promotion (float16 x float16 gives float16)."""
    dtype = _result_dtype_arg(dtype)
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


def _element_strides_ok(x):
    return all(s % x.itemsize == 0 for s in x.strides)


def _prepare(x, dt):
    """Cast to the kernel operand dtype; copy only views whose strides are not whole elements."""
    if x.dtype != dt:
        return x.astype(dt)
    if not _element_strides_ok(x):
        return np.ascontiguousarray(x)
    return x


def _offsets(x, lead):
    """Element offsets of the core matrices of x broadcast to leading shape `lead` (flattened)."""
    nlead = len(lead)
    xb = np.broadcast_to(x, lead + x.shape[-2:]) if x.shape[:-2] != lead else x
    off = np.zeros(lead, np.int64)
    for d in range(nlead):
        step = xb.strides[d] // xb.itemsize
        if step and lead[d] > 1:
            shape = [1] * nlead
            shape[d] = lead[d]
            off = off + (np.arange(lead[d], dtype=np.int64) * step).reshape(shape)
    return np.ascontiguousarray(off.reshape(-1)), xb


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
    if dtype is None and not _bf16_kernel:
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


def _check_out(out, shape, result):
    _validate.check_out(out, shape, result, _FN)


def _matmul_general(a, b, out, dtype):
    a = _as_operand(a, "a")
    b = _as_operand(b, "b")
    a2, b2, lead, m, k, n, shape = _result_shape(a, b)
    dt_code, op_dtype, result = _resolve_dtypes(a, b, dtype, out)
    out_given = out is not None
    if out_given:
        _check_out(out, shape, result)
    else:
        out = np.empty(shape, result)
    if out.size == 0:
        return out
    if k == 0:
        out[...] = 0
        return _scalar_if_0d(out, out_given)
    a2 = _prepare(a2, op_dtype)
    b2 = _prepare(b2, op_dtype)
    acc_dtype = _F32 if dt_code == _cm.DT_BF16 else op_dtype
    full = lead + (m, n)
    # Where the kernel writes: out itself when it has the accumulation dtype, unit column (or
    # row: then C^T = B^T A^T) stride and no overlap with the inputs; a temporary otherwise.
    view = out
    if a.ndim == 1:  # put back the dimensions 1-D promotion removed (always a view)
        view = np.expand_dims(view, -1 if b.ndim == 1 else -2)
    if b.ndim == 1:
        view = np.expand_dims(view, -1)
    direct = (out.dtype == acc_dtype and _element_strides_ok(view)
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
            _store_bf16(tmp, view)
        else:
            np.copyto(view, tmp, casting="same_kind")
    return _scalar_if_0d(out, out_given)


def _scalar_if_0d(out, out_given):
    """numpy returns a scalar, not a 0-d array, for vector . vector without out=."""
    return out if out_given or out.ndim else out[()]


def _store_bf16(tmp, dst):
    t2 = tmp.reshape(-1, tmp.shape[-1])
    try:
        d2 = dst.reshape(t2.shape, copy=False)
    except (ValueError, TypeError):
        d2 = None
    if d2 is not None and _element_strides_ok(d2):
        _cm.f32_to_bf16(t2, d2.view(np.uint16))
    else:
        dst[...] = tmp.astype(BFLOAT16)


def _compute(a2, b2, c, lead, dt_code, isa):
    """c[...] = a2 @ b2 with c of shape lead + (m, n), unit column stride, accumulation dtype."""
    kern = _bf16_kernel
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
    off_a, ab = _offsets(a2, lead)
    off_b, bb = _offsets(b2, lead)
    off_c, _ = _offsets(c, lead)
    _cm.gemm_batch(ab, bb, c, off_a, off_b, off_c, dt_code, isa, kern)
