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

# The bf16 kernel products run: 0 the level's best, or an index of _core._matmul.BF16_KERNELS
# that tests set to force one.
bf16_kernel = 0

def as_operand(x, name, fn=FN):
    if not (isinstance(x, np.ndarray) or hasattr(x, "__array__")
            or isinstance(x, (list, tuple, int, float))):
        raise TypeError(f"{fn}: {name} must be array_like, got {type(x).__name__}")
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


