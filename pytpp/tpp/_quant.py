"""The (De)Quantize TPPs: affine maps between float rows and 8-bit rows (the definition of
:func:`pytpp.quant.quantize` / :func:`pytpp.quant.dequantize`), as handles made by
``pytpp.tpp.unary("quantize" / "dequantize", ...)``, and the checks and 2-D views those functions
share with the handles."""
from __future__ import annotations

import math

import numpy as np

from pytpp import _validate
from pytpp._core import _eltwise as _ew
from pytpp._core import _runtime
from pytpp._typing import Array, ArrayLike
from pytpp.tpp import _cache
from pytpp.tpp import _handles as H

QTYPES = (np.dtype(np.uint8), np.dtype(np.int8))
# storage codes of the integer side (enum pytpp_q_dtype)
Q_CODE = {np.dtype(np.uint8): _ew.Q_U8, np.dtype(np.int8): _ew.Q_S8,
          np.dtype(np.int32): _ew.Q_I32}
FLOATS = (np.dtype(np.float32), np.dtype(np.float64), H.BF16)
# how parameters vary over an m x n operand (enum pytpp_q_params)
PER_TENSOR, PER_COLUMN, PER_ROW = _ew.Q_PER_TENSOR, _ew.Q_PER_COLUMN, _ew.Q_PER_ROW


def norm_axis(axis, ndim, fn):
    """`axis` (negative allowed) as an index into ndim dimensions, or None."""
    if axis is None:
        return None
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{fn}: axis must be an integer or None, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"{fn}: axis {axis} is out of range for {ndim} dimensions")
    return int(axis) % ndim


def check_params(scale, zero_point, dt, shape, axis, fn):
    """scale (float64) and zero point (int64) as 1-D C-contiguous arrays: one entry, or
    ``shape[axis]`` for per-channel parameters. Checked: scale > 0 and finite, zero point an
    integer in `dt`'s range, per-channel lengths equal to ``shape[axis]``."""
    ax = norm_axis(axis, len(shape), fn)
    if ax is None and _plain_scalars(scale, zero_point):
        s, z = float(scale), zero_point
        if not (math.isfinite(s) and s > 0):
            raise ValueError(f"{fn}: scale must be positive and finite, got {scale!r}")
        info = np.iinfo(dt)
        if not info.min <= z <= info.max:
            raise ValueError(f"{fn}: zero_point must lie in [{info.min}, {info.max}] for {dt}, "
                             f"got {zero_point!r}")
        return np.array([s]), np.array([z], np.int64)
    s = np.asarray(scale)
    z = np.asarray(zero_point)
    if s.dtype.kind not in "iuf" or s.dtype.kind == "b":
        raise TypeError(f"{fn}: scale must be real, got dtype {s.dtype}")
    if z.dtype.kind == "f":
        if not np.all(np.isfinite(z)) or np.any(z != np.round(z)):
            raise ValueError(f"{fn}: zero_point must hold integers, got {zero_point!r}")
    elif z.dtype.kind not in "iu" or z.dtype.kind == "b":
        raise TypeError(f"{fn}: zero_point must be an integer, got dtype {z.dtype}")
    s = s.astype(np.float64)
    if not (np.all(np.isfinite(s)) and np.all(s > 0)):
        raise ValueError(f"{fn}: scale must be positive and finite, got {scale!r}")
    info = np.iinfo(dt)
    if np.any(z < info.min) or np.any(z > info.max):
        raise ValueError(f"{fn}: zero_point must lie in [{info.min}, {info.max}] for {dt}, got "
                         f"{zero_point!r}")
    z = z.astype(np.int64)
    if ax is None:
        if s.ndim or z.ndim:
            raise ValueError(f"{fn}: scale and zero_point must be scalars without axis (per "
                             f"channel: give axis)")
        return s.reshape(1), z.reshape(1)
    n = shape[ax]
    for name, v in (("scale", s), ("zero_point", z)):
        if v.ndim > 1 or (v.ndim == 1 and v.shape[0] != n):
            raise ValueError(f"{fn}: {name} has shape {v.shape}; expected ({n},) for axis {axis} "
                             f"of an array of shape {tuple(shape)} (or a scalar)")
    return (np.ascontiguousarray(np.broadcast_to(s, (n,))),
            np.ascontiguousarray(np.broadcast_to(z, (n,))))


def _plain_scalars(scale, zero_point):
    return (isinstance(scale, (float, int)) and not isinstance(scale, bool)
            and isinstance(zero_point, int) and not isinstance(zero_point, bool))


def rows_view(a, axis):
    """An array as m x n rows for the C drivers: (a2, m, n, ld, pmode, period). `a` is 2-D with
    unit column stride, or any C-contiguous array (else the caller copies it); per-channel
    parameters along `axis` become per column (the last axis) or per row with a period (an
    earlier one: rows of the axes after it)."""
    shape = a.shape
    if a.ndim == 2 and axis in (None, 0, 1) and not a.flags.c_contiguous:
        m, n = shape
        ld = a.strides[0] // a.itemsize
        pmode = {None: PER_TENSOR, 0: PER_ROW, 1: PER_COLUMN}[axis]
        return a, m, n, ld, pmode, m
    n = shape[-1] if a.ndim else 1
    if axis is None or axis == a.ndim - 1:
        m = a.size // n if n else 0
        return a, m, n, n, (PER_TENSOR if axis is None else PER_COLUMN), 1
    n = math.prod(shape[axis + 1:])
    m = math.prod(shape[:axis + 1])
    return a, m, n, n, PER_ROW, shape[axis]


def rows_ready(a):
    """Whether :func:`rows_view` takes `a` as it is: C-contiguous, or 2-D with unit column stride
    and a non-negative row stride that is a whole number of elements."""
    if a.flags.c_contiguous:
        return True
    return (a.ndim == 2 and a.strides[1] == a.itemsize and a.strides[0] >= 0
            and a.strides[0] % a.itemsize == 0)


def run_quantize(x, q, s, z, axis, isa_idx):
    """q = quantize(x) over arrays of one shape (x float32/float64/bfloat16 in a layout
    :func:`rows_ready` takes, q C-contiguous uint8/int8); True when x held a NaN."""
    x2, m, n, ld, pmode, period = rows_view(x, axis)
    return _ew.quantize(x2, m, n, ld, H.DT_CODE[x.dtype], q, n, q.dtype == np.int8,
                        s.astype(np.float64), z.astype(np.float64), pmode, period, isa_idx)


def run_dequantize(q, y, s, z, axis, isa_idx):
    """y = dequantize(q) over arrays of one shape (q uint8/int8/int32 in a layout
    :func:`rows_ready` takes, y C-contiguous float32/float64/bfloat16)."""
    q2, m, n, ld, pmode, period = rows_view(q, axis)
    _ew.dequantize(q2, m, n, ld, Q_CODE[q.dtype], y, n, H.DT_CODE[y.dtype],
                   s.astype(np.float64), z.astype(np.float64), pmode, period, isa_idx)


class QuantKernel(H.Kernel):
    """A dispatched (De)Quantize TPP on m x n row-major operands; call it as
    ``k(x, scale, zero_point, out)``, it returns `out`. Per tensor (`channel_axis` None), the
    parameters are scalars; per channel, 1-D arrays of n (channel_axis 1: one per column) or m
    (channel_axis 0: one per row) entries."""

    def __init__(self, fn, op, m, n, in_dt, out_dt, ldi, ldo, channel_axis, isa, desc):
        super().__init__(desc, isa)
        self.kind_name = op
        self._fn, self._op, self._m, self._n = fn, op, m, n
        self._in_dt, self._out_dt, self._ldi, self._ldo = in_dt, out_dt, ldi, ldo
        self._axis = channel_axis
        self._in_need = H.extent(m, n, ldi, 0)
        self._out_need = H.extent(m, n, ldo, 0)
        self._range_dt = out_dt if op == "quantize" else (
            in_dt if in_dt in QTYPES else np.dtype(np.int32))
        self._pmode = {None: PER_TENSOR, 0: PER_ROW, 1: PER_COLUMN}[channel_axis]

    def __call__(self, x: Array, scale: ArrayLike, zero_point: ArrayLike, out: Array) -> Array:
        fn = self._fn
        H.check_buffer(x, "x", self._in_dt, self._in_need, fn)
        H.check_buffer(out, "out", self._out_dt, self._out_need, fn, True)
        s, z = check_params(scale, zero_point, self._range_dt, (self._m, self._n), self._axis, fn)
        if self._m == 0 or self._n == 0:
            return out
        s, z = s.astype(np.float64), z.astype(np.float64)
        if self._op == "quantize":
            _ew.quantize(x, self._m, self._n, self._ldi, H.DT_CODE[self._in_dt], out, self._ldo,
                         self._out_dt == np.int8, s, z, self._pmode, self._m, self._isa_idx)
        else:
            _ew.dequantize(x, self._m, self._n, self._ldi, Q_CODE[self._in_dt], out, self._ldo,
                           H.DT_CODE[self._out_dt], s, z, self._pmode, self._m, self._isa_idx)
        return out


def make(op, m, n, dtype, out_dtype, ldi, ldo, channel_axis, fn, recipe):
    """The handle of ``unary("quantize" / "dequantize", m, n, ...)``."""
    if op == "quantize":
        dt = _validate.dtype_arg(dtype, FLOATS, fn)
        odt = _validate.dtype_arg(np.uint8 if out_dtype is None else out_dtype, QTYPES, fn,
                                  "out_dtype")
    else:
        dt = _validate.dtype_arg(dtype, tuple(Q_CODE), fn)
        odt = _validate.dtype_arg(np.float32 if out_dtype is None else out_dtype, FLOATS, fn,
                                  "out_dtype")
    if channel_axis not in (None, 0, 1) or isinstance(channel_axis, bool):
        raise ValueError(f"{fn}: channel_axis must be None (per tensor), 0 (one scale per row) "
                         f"or 1 (one per column); got {channel_axis!r}")
    ldi, ldo = H.lds(m, n, (ldi, ldo), ("ldi", "ldo"), fn)
    isa = _runtime.get_isa()
    key = (op, m, n, dt, odt, ldi, ldo, channel_axis, isa)
    kern = _cache.lookup(key)
    if kern is not None:
        return kern
    desc = dict(op=op, m=m, n=n, dtype=dt.name, out_dtype=odt.name, ldi=ldi, ldo=ldo,
                channel_axis=channel_axis)
    kern = QuantKernel(fn, op, m, n, dt, odt, ldi, ldo, channel_axis, isa, desc)
    kern._recipe = recipe
    return _cache.store(key, kern)
