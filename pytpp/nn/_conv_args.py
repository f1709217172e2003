"""Argument checks and geometry of the convolutions and poolings (torch's semantics): every
error is raised here, before any C runs."""
import numbers

import numpy as np

from pytpp import _validate

ACTIVATIONS = {None: 0, "relu": 1, "gelu": 2}
FORMATS = ("NCHW", "NHWC")


def int_arg(v, name, fn, lo):
    if type(v) is int and v >= lo:      # the common case, before the slower ABC check
        return v
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{fn}: {name} must be an int or a pair of ints, got {v!r}")
    if int(v) < lo:
        raise ValueError(f"{fn}: {name} must be >= {lo}, got {int(v)}")
    return int(v)


def pair(v, name, fn, lo, n=2):
    """An int or an n-tuple of ints >= lo, as an n-tuple."""
    if isinstance(v, (tuple, list)):
        if len(v) != n:
            raise ValueError(f"{fn}: {name} must have {n} entries, got {len(v)}")
        return tuple(int_arg(e, name, fn, lo) for e in v)
    return (int_arg(v, name, fn, lo),) * n


def data_format(fmt, fn):
    if fmt not in FORMATS:
        raise ValueError(f"{fn}: data_format must be 'NCHW' or 'NHWC', got {fmt!r}")
    return fmt


def activation(act, fn):
    if act not in ACTIVATIONS:
        raise ValueError(f"{fn}: activation must be None, 'relu' or 'gelu', got {act!r}")
    return ACTIVATIONS[act]


def padding(pad, kernel, dilation, stride, fn, n=2):
    """(before, after) per spatial dim: int, tuple, "valid" or "same" (stride 1 only; an odd total
    puts the extra one after, as torch)."""
    if isinstance(pad, str):
        if pad == "valid":
            return ((0, 0),) * n
        if pad == "same":
            if any(s != 1 for s in stride):
                raise ValueError(f"{fn}: padding='same' needs stride 1, got stride {stride}")
            out = []
            for k, d in zip(kernel, dilation):
                total = d * (k - 1)
                out.append((total // 2, total - total // 2))
            return tuple(out)
        raise ValueError(f"{fn}: padding must be an int, a pair, 'same' or 'valid', got {pad!r}")
    p = pair(pad, "padding", fn, 0, n)
    return tuple((e, e) for e in p)


def out_size(size, pad, kernel, stride, dilation, fn, what="input"):
    span = dilation * (kernel - 1) + 1
    if size + pad[0] + pad[1] < span:
        raise ValueError(f"{fn}: the kernel (extent {span} with dilation) is larger than the "
                         f"padded {what} ({size + pad[0] + pad[1]})")
    return (size + pad[0] + pad[1] - span) // stride + 1


def float_operand(x, name, fn):
    arr = _validate.contraction_operand(x, name, fn)
    return arr


def compute_dtype(*dts):
    """float64 when any operand is float64, else float32 (bfloat16 and float16 widen)."""
    return _validate.F64 if any(np.dtype(d) == _validate.F64 for d in dts) else _validate.F32


def result_dtype(x_dt, w_dt):
    """x's dtype, or the promotion of x and w when they differ (bf16 meets float32: float32)."""
    if x_dt == w_dt:
        return x_dt
    if _validate.BF16 in (x_dt, w_dt):
        other = w_dt if x_dt == _validate.BF16 else x_dt
        return np.result_type(other, np.float32)
    return np.result_type(x_dt, w_dt)
