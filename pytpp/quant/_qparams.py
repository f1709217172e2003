"""Quantization parameters and the (de)quantize maps: numpy arithmetic, checked arguments."""
from __future__ import annotations

import numpy as np

from pytpp import _validate
from pytpp._typing import Array, ArrayLike, DTypeLike

QTYPES = (np.dtype(np.uint8), np.dtype(np.int8))
_METHODS = ("minmax", "percentile")
# the percentile method's range: outliers beyond these are clipped
PERCENTILES = (0.01, 99.99)


def qtype(dtype, fn) -> np.dtype:
    return _validate.dtype_arg(dtype, QTYPES, fn)


def _axis(axis, ndim, fn):
    if axis is None:
        return None
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{fn}: axis must be an integer or None, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"{fn}: axis {axis} is out of range for {ndim} dimensions")
    return int(axis) % ndim


def check_params(scale, zero_point, dt, shape, axis, fn):
    """scale (float64) and zero point (int64) as arrays shaped to broadcast against an array of
    `shape` (per channel along `axis`), checked: scale > 0 and finite, zero point an integer in
    `dt`'s range, per-channel lengths equal to shape[axis]."""
    ax = _axis(axis, len(shape), fn)
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
    z = z.astype(np.int64)
    if not (np.all(np.isfinite(s)) and np.all(s > 0)):
        raise ValueError(f"{fn}: scale must be positive and finite, got {scale!r}")
    info = np.iinfo(dt)
    if np.any(z < info.min) or np.any(z > info.max):
        raise ValueError(f"{fn}: zero_point must lie in [{info.min}, {info.max}] for {dt}, got "
                         f"{zero_point!r}")
    if ax is None:
        if s.ndim or z.ndim:
            raise ValueError(f"{fn}: scale and zero_point must be scalars without axis (per "
                             f"channel: give axis)")
        return s, z
    n = shape[ax]
    for name, v in (("scale", s), ("zero_point", z)):
        if v.ndim > 1 or (v.ndim == 1 and v.shape[0] != n):
            raise ValueError(f"{fn}: {name} has shape {v.shape}; expected ({n},) for axis {axis} "
                             f"of an array of shape {tuple(shape)} (or a scalar)")
    bshape = [1] * len(shape)
    bshape[ax] = n
    return np.broadcast_to(s, (n,)).reshape(bshape), np.broadcast_to(z, (n,)).reshape(bshape)


# elements per block of the (de)quantize maps: their float64 / int64 temporaries stay in L2 (the
# whole-array numpy expression made four passes over 8 bytes per element: 2048^2 float32 to
# uint8 20.5 -> 4 ms on a Zen 5 core)
_BLOCK = 1 << 15


def _blocks(shape, dtype):
    """(index, scratch) pairs covering an array of `shape` in blocks of whole rows of about
    _BLOCK elements (0-d: one), each scratch of the block's shape and `dtype`."""
    if len(shape) == 0:
        yield (), np.empty((), dtype)
        return
    rows = shape[0]
    step = max(1, _BLOCK // max(1, int(np.prod(shape[1:], dtype=np.int64))))
    buf = np.empty((min(step, rows),) + tuple(shape[1:]), dtype)
    for r0 in range(0, rows, step):
        r1 = min(rows, r0 + step)
        yield slice(r0, r1), buf[:r1 - r0]


def _rows_of(p, sl):
    """A broadcasting parameter's part for the rows `sl` (all of it unless it varies along
    axis 0)."""
    return p[sl] if p.ndim and p.shape[0] > 1 else p


def quantize(x: ArrayLike, scale: ArrayLike, zero_point: ArrayLike,
             dtype: DTypeLike = np.uint8, axis: int | None = None) -> Array:
    """Affine quantization: ``clip(round_half_even(x / scale) + zero_point)`` in `dtype`.

    The zero point is added after rounding (ONNX ``QuantizeLinear``); the quotient is computed
    in float64 (a float32 `x` widens exactly), so the result is the correctly rounded one.

    Parameters
    ----------
    x : array_like of real numbers
        +-inf saturate to the type's ends; NaN raises ValueError (it has no integer image).
    scale : float or 1-D array
        Positive and finite; 1-D (length ``x.shape[axis]``) for per-channel quantization.
    zero_point : int or 1-D array
        Integers in `dtype`'s range.
    dtype : uint8 or int8
    axis : int, optional
        The channel axis of per-channel parameters (negative counts from the end).

    Returns
    -------
    ndarray of `dtype`, x's shape

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> pytpp.quant.quantize(np.array([-1.0, 0.0, 0.25, 0.75, 100.0]), 0.5, 10)
    array([  8,  10,  10,  12, 210], dtype=uint8)
    """
    fn = "pytpp.quant.quantize"
    dt = qtype(dtype, fn)
    x = _validate.asarray(x)
    if x.dtype.kind not in "iuf" or x.dtype.kind == "b":
        raise TypeError(f"{fn}: x must hold real numbers, got dtype {x.dtype}")
    s, z = check_params(scale, zero_point, dt, x.shape, axis, fn)
    info = np.iinfo(dt)
    q = np.empty(x.shape, dt)
    for sl, buf in _blocks(x.shape, np.float64):
        np.copyto(buf, x[sl], casting="unsafe")          # float64: a float32 x widens exactly
        if np.isnan(buf).any():
            raise ValueError(f"{fn}: x holds NaN, which has no quantized value")
        with np.errstate(over="ignore", invalid="ignore"):
            np.divide(buf, _rows_of(s, sl), out=buf)
            np.rint(buf, out=buf)
            np.add(buf, _rows_of(z, sl), out=buf)
            np.clip(buf, info.min, info.max, out=buf)
        np.copyto(q[sl], buf, casting="unsafe")
    return q


def dequantize(q: ArrayLike, scale: ArrayLike, zero_point: ArrayLike, axis: int | None = None,
               dtype: DTypeLike = np.float32) -> Array:
    """``(q - zero_point) * scale`` in `dtype` (float32 or float64).

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> pytpp.quant.dequantize(np.array([8, 10, 12], np.uint8), 0.5, 10)
    array([-1.,  0.,  1.], dtype=float32)
    """
    fn = "pytpp.quant.dequantize"
    q = _validate.asarray(q)
    if q.dtype not in QTYPES and q.dtype != np.int32:
        raise TypeError(f"{fn}: q has dtype {q.dtype}; expected uint8, int8 or int32")
    out_dt = _validate.dtype_arg(dtype, (np.dtype(np.float32), np.dtype(np.float64)), fn)
    rng_dt = q.dtype if q.dtype in QTYPES else np.dtype(np.int32)
    s, z = check_params(scale, zero_point, rng_dt, q.shape, axis, fn)
    y = np.empty(q.shape, out_dt)
    sd = s.astype(out_dt)
    for sl, buf in _blocks(q.shape, np.int64):
        np.copyto(buf, q[sl])
        np.subtract(buf, _rows_of(z, sl), out=buf)
        np.copyto(y[sl], buf, casting="unsafe")
        np.multiply(y[sl], _rows_of(sd, sl), out=y[sl])
    return y


def choose_qparams(x: ArrayLike, dtype: DTypeLike = np.uint8, symmetric: bool = False,
                   axis: int | None = None, method: str = "minmax"):
    """Scale and zero point that map the range of `x` onto `dtype`, the real 0 exactly.

    The range is [min(x, 0), max(x, 0)] (``method="minmax"``), or the same of the 0.01st and
    99.99th percentiles (``"percentile"``: outliers are clipped). Asymmetric: scale =
    (hi - lo) / 255 and the zero point the integer that 0 maps to. Symmetric: zero point 0 for
    int8 with scale = max|x| / 127; for uint8, zero point 128 with scale = max|x| / 127.5. An
    all-zero range gives scale 1.

    Returns
    -------
    (scale, zero_point)
        Python scalars, or with `axis` 1-D arrays (float64, int64) along that axis.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> pytpp.quant.choose_qparams(np.array([-1.0, 2.0, 4.0]), np.uint8)
    (0.0196078431372549, 51)
    """
    fn = "pytpp.quant.choose_qparams"
    dt = qtype(dtype, fn)
    if method not in _METHODS:
        raise ValueError(f"{fn}: method must be one of {_METHODS}, got {method!r}")
    x = _validate.asarray(x)
    if x.dtype.kind != "f":
        x = x.astype(np.float64)
    if x.size == 0:
        raise ValueError(f"{fn}: x is empty: no range to quantize")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{fn}: x holds NaN or inf")
    ax = _axis(axis, x.ndim, fn)
    red = None if ax is None else tuple(i for i in range(x.ndim) if i != ax)
    if method == "minmax":
        lo, hi = np.min(x, axis=red), np.max(x, axis=red)
    else:
        lo, hi = np.percentile(x, PERCENTILES, axis=red)
    lo = np.minimum(np.asarray(lo, np.float64), 0.0)
    hi = np.maximum(np.asarray(hi, np.float64), 0.0)
    info = np.iinfo(dt)
    if symmetric:
        amax = np.maximum(-lo, hi)
        scale = amax / (127.0 if dt == np.int8 else 127.5)
        zp = np.zeros_like(amax, np.int64) + (0 if dt == np.int8 else 128)
        scale = np.where(scale > 0, scale, 1.0)
    else:
        scale = (hi - lo) / 255.0
        scale = np.where(scale > 0, scale, 1.0)
        zp = np.clip(np.rint(info.min - lo / scale), info.min, info.max).astype(np.int64)
    if ax is None:
        return float(scale), int(zp)
    return scale.astype(np.float64), zp.astype(np.int64)
