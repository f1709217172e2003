"""Argument checks shared by the numpy-level functions; messages name function and argument."""
import operator

import numpy as np

FLOAT_TYPES = (np.dtype(np.float64), np.dtype(np.float32))


def as_float_array(x, name, fn, supported=FLOAT_TYPES):
    """`x` as an ndarray of a supported floating dtype (no copy when it already is one)."""
    arr = np.asarray(x)
    if arr.dtype not in supported:
        names = ", ".join(str(d) for d in supported)
        raise TypeError(f"{fn}: {name} has dtype {arr.dtype}; expected {names}")
    return arr


def check_out(out, shape, dtype, fn, inputs=()):
    """`out` must be a writable ndarray of exactly `shape` and `dtype`, not sharing memory with
    any of `inputs`."""
    if not isinstance(out, np.ndarray):
        raise TypeError(f"{fn}: out must be a numpy.ndarray, got {type(out).__name__}")
    if out.shape != tuple(shape):
        raise ValueError(f"{fn}: out has shape {out.shape}; expected {tuple(shape)}")
    if out.dtype != dtype:
        raise TypeError(f"{fn}: out has dtype {out.dtype}; expected {dtype}")
    if not out.flags.writeable:
        raise ValueError(f"{fn}: out is read-only")
    for name, arr in inputs:
        if arr is not None and out.size and np.may_share_memory(out, arr):
            raise ValueError(f"{fn}: out overlaps {name}; the output must not alias an input")
    return out


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
