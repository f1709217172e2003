"""Operands and results of the contractions (pytpp.matmul and PackedMatrix): dtype checks, the
conversions the kernels need, offsets of broadcast stacks, writing results. Shared by
linalg._matmul and linalg._packed."""
import ml_dtypes
import numpy as np

from pytpp import _validate
from pytpp._core import _matmul as _cm

FN = "pytpp.matmul"
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
_cm.set_bf16_typenum(BFLOAT16.num)

F64, F32, F16 = np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.float16)
SUPPORTED = (F64, F32, BFLOAT16)
RESULT_TYPES = SUPPORTED + (F16,)
NAMES = "float64, float32, bfloat16 or float16"
_KERNEL_FLOATS = frozenset(RESULT_TYPES)

# The bf16 kernel products run: 0 the level's best, or an index of _core._matmul.BF16_KERNELS
# that tests set to force one.
bf16_kernel = 0

def kernel_computes(a_dtype, b_dtype, dtype):
    """True when pytpp's kernels compute np.matmul's product of these operand dtypes (and
    `dtype=` argument): every operand real floating (float64, float32, float16, bfloat16),
    integer or bool, and a result, numpy's promotion or `dtype`, that is one of the floating
    types. Integer and bool operands then convert to the compute dtype, as numpy casts them.
    Anything else (integer x integer, complex, object, longdouble ...) has no kernel."""
    if dtype is None and a_dtype in _KERNEL_FLOATS and b_dtype in _KERNEL_FLOATS:
        return True    # the common call, decided without promotion (floats promote to these)
    for d in (a_dtype, b_dtype):
        if d.kind not in "biu" and d.newbyteorder("=") not in RESULT_TYPES:
            return False
    if dtype is None:
        result = _validate.promote(a_dtype.newbyteorder("="), b_dtype.newbyteorder("="))
    else:
        try:
            result = np.dtype(dtype)
        except TypeError:
            return False
    return result in RESULT_TYPES


def as_operand(x, name, fn=FN, *, integers=False):
    """`x` as an operand array: floating (integers and bools too when `integers`), native byte
    order, at least 1-D; TypeError / ValueError naming `fn` and `name` otherwise."""
    if not (isinstance(x, np.ndarray) or hasattr(x, "__array__") or hasattr(x, "__dlpack__")
            or isinstance(x, (list, tuple, int, float))):
        raise TypeError(f"{fn}: {name} must be array_like, got {type(x).__name__}")
    if integers:
        arr = _validate.as_array(x, name, fn)
    else:
        arr = _validate.contraction_operand(x, name, fn)
    if arr.ndim == 0:
        raise ValueError(f"{fn}: {name} is a scalar (0-d); matmul needs at least 1 dimension "
                         f"(use * for scalars)")
    return arr


def result_dtype_arg(dtype, fn=FN):
    return None if dtype is None else _validate.dtype_arg(dtype, RESULT_TYPES, fn)


def offsets(x, lead):
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


def check_out(out, shape, result, fn=FN):
    _validate.check_out(out, shape, result, fn)


def result_array(out, shape, result, fn=FN):
    """(the array the result goes to, whether the caller gave it): `out` checked, or a new one."""
    if out is None:
        return np.empty(shape, result), False
    check_out(out, shape, result, fn)
    return out, True


def scalar_if_0d(out, out_given):
    """numpy returns a scalar, not a 0-d array, for vector . vector without out=."""
    return out if out_given or out.ndim else out[()]


def store_bf16(tmp, dst):
    t2 = tmp.reshape(-1, tmp.shape[-1])
    try:
        d2 = dst.reshape(t2.shape, copy=False)
    except (ValueError, TypeError):
        d2 = None
    if d2 is not None and _validate.element_strides_ok(d2):
        _cm.f32_to_bf16(t2, d2.view(np.uint16))
    else:
        dst[...] = tmp.astype(BFLOAT16)


