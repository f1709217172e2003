"""Argument checks and the dtype policy shared by the numpy-level functions.

The policy (docs/api.md "dtypes, out= and aliasing"), in one place:

- Results follow numpy's promotion: ``np.result_type`` of the inputs, with bfloat16 promoting
  like float32 when it meets another type (bfloat16 x bfloat16 is each function's own choice).
- float16 inputs are computed in float32 and the result is float16, as numpy returns it.
- Integer and bool inputs: the element-wise functions (``pytpp.nn``) compute them in float64,
  as numpy's ufuncs ``np.exp``/``np.tanh`` do; the contractions (``brgemm``, ``matmul_stack``,
  ``pack``) raise TypeError, since numpy's integer matmul is exact and pytpp has no exact
  integer path yet. ``matmul`` is the exception, a drop-in for ``np.matmul``: products it has
  no kernel for are numpy's (linalg._matmul).
- Operands of non-native byte order are converted once (the result is the same as numpy's).
- ``out=`` takes any dtype the result casts to under ``same_kind`` (numpy's ufunc rule), any
  strides and byte order; an ``out`` that overlaps an input gives numpy's answer (the input is
  copied first, or the result goes through a temporary).
- Kernel handles (``pytpp.tpp``) take exactly their descriptor's dtype in native byte order and
  never copy: anything else raises.
"""
import math
import operator

import ml_dtypes
import numpy as np

F64 = np.dtype(np.float64)
F32 = np.dtype(np.float32)
F16 = np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)
FLOAT_TYPES = (F64, F32)
ENGINE_FLOATS = (F64, F32, BF16)


def native(arr):
    """`arr` in native byte order (a converted copy only when it is not)."""
    if not arr.dtype.isnative:
        return arr.astype(arr.dtype.newbyteorder("="))
    return arr


def asarray(x, dtype=None):
    """``np.asarray``, also for objects that only speak DLPack (``__dlpack__`` without
    ``__array__``): those come through ``np.from_dlpack``, zero-copy where the layout allows."""
    if not isinstance(x, np.ndarray) and hasattr(x, "__dlpack__") and not hasattr(x, "__array__"):
        x = np.from_dlpack(x)
    return np.asarray(x, dtype=dtype)


def as_array(x, name, fn):
    """`x` as an ndarray in native byte order; TypeError for what numpy cannot make numeric."""
    try:
        arr = asarray(x)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{fn}: {name} must be array_like, got {type(x).__name__} ({e})") from None
    if arr.dtype.kind not in "biuf" and arr.dtype != BF16:
        raise TypeError(f"{fn}: {name} has dtype {arr.dtype}; expected a real floating dtype "
                        f"(float64, float32, bfloat16, float16)")
    return native(arr)


def contraction_operand(x, name, fn):
    """An operand of a contraction: floating (float64, float32, bfloat16, float16), native byte
    order. Integers and bools raise TypeError (numpy's integer matmul is exact)."""
    arr = as_array(x, name, fn)
    if arr.dtype.kind in "biu":
        raise TypeError(f"{fn}: {name} has dtype {arr.dtype}; expected float64, float32, bfloat16 "
                        f"or float16 (integer products are exact in numpy and not supported here: "
                        f"cast to a float dtype)")
    return arr


def elementwise_operand(x, name, fn):
    """An operand of an element-wise function: floats as they are, integers and bools as
    float64 (numpy's ufunc rule for np.exp, np.tanh ...), native byte order."""
    arr = as_array(x, name, fn)
    if arr.dtype.kind in "biu":
        arr = arr.astype(F64)
    return arr


def promote(*dtypes):
    """numpy's result type of floating dtypes, with bfloat16 taking part as float32 (ml_dtypes
    promotes bfloat16 with float16 to float32 too). bfloat16 alone stays bfloat16."""
    dts = [np.dtype(d) for d in dtypes]
    if all(d == BF16 for d in dts):
        return BF16
    return np.result_type(*[F32 if d == BF16 else d for d in dts])


def engine_dtype(dtype):
    """The storage dtype the C engine reads for a result/compute dtype: float16 -> float32."""
    return F32 if np.dtype(dtype) == F16 else np.dtype(dtype)


def can_write(result, dtype):
    """numpy's same_kind rule for writing a `result` into an array of `dtype`."""
    return np.can_cast(result, dtype, "same_kind")


def check_out(out, shape, result, fn, casting="same_kind"):
    """`out` must be a writable ndarray of `shape` that the `result` dtype casts to (numpy's
    same_kind rule by default). Returns `out`."""
    if not isinstance(out, np.ndarray):
        raise TypeError(f"{fn}: out must be a numpy.ndarray, got {type(out).__name__}")
    if out.shape != tuple(shape):
        raise ValueError(f"{fn}: out has shape {out.shape}; expected {tuple(shape)}")
    if not np.can_cast(result, out.dtype, casting):
        raise TypeError(f"{fn}: cannot write a {np.dtype(result)} result into out of dtype "
                        f"{out.dtype} (casting rule {casting!r})")
    if not out.flags.writeable:
        raise ValueError(f"{fn}: out is read-only")
    return out


def same_view(a, b):
    """True when a and b are the same elements in the same order (an in-place operation)."""
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
            and a.strides == b.strides and a.shape == b.shape and a.dtype == b.dtype)


def unalias(out, arrays, allow_same=True):
    """`arrays` with a private copy of each one that shares memory with `out` (except, when
    `allow_same`, an identical view: element-wise work in place is safe). numpy's semantics for
    an ``out`` that partially overlaps an input."""
    if out is None or out.size == 0:
        return list(arrays)
    res = []
    for a in arrays:
        if (a is not None and a.size and np.may_share_memory(out, a)
                and not (allow_same and same_view(out, a))):
            a = a.copy()
        res.append(a)
    return res


def dtype_arg(dtype, allowed, fn, name="dtype"):
    """A dtype argument as np.dtype, one of `allowed`; TypeError naming fn, name and the choices
    otherwise."""
    choices = ", ".join(d.name for d in allowed)
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{fn}: {name}={dtype!r} is not a dtype; expected {choices}") from None
    if dt not in allowed:
        raise TypeError(f"{fn}: {name}={dt} is not supported; expected {choices}")
    return dt


def kernel_operand(x, dtype):
    """x in the kernel's dtype; a copy only for another dtype or for views whose strides are
    not whole elements (the kernels take any element strides)."""
    if x.dtype != dtype:
        return x.astype(dtype)
    if not element_strides_ok(x):
        return np.ascontiguousarray(x)
    return x


def element_strides_ok(arr):
    """True when every stride is a whole number of elements (views of packed records may not be)."""
    return all(s % arr.itemsize == 0 for s in arr.strides)


def nonneg_int(value, name, fn):
    """`value` as a Python int >= 0; TypeError for non-integers, ValueError for negatives."""
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{fn}: {name} must be an integer, got {type(value).__name__}") from None
    if v < 0:
        raise ValueError(f"{fn}: {name} must be >= 0, got {v}")
    return v


def real_arg(value, name, fn, lo=None, hi=None, lo_open=False):
    """`value` as a finite float in [lo, hi) (or (lo, hi) with lo_open); TypeError for what is
    not a real number, ValueError naming fn, name and the range otherwise."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{fn}: {name} must be a real number, got {type(value).__name__}") from None
    bad = (not math.isfinite(v) or (lo is not None and (v <= lo if lo_open else v < lo))
           or (hi is not None and v >= hi))
    if bad:
        rng = f"{'(' if lo_open else '['}{lo}, {hi if hi is not None else 'inf'})"
        raise ValueError(f"{fn}: {name}={value!r} is outside {rng}")
    return v
