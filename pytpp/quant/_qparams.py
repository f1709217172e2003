"""Quantization parameters and the (de)quantize maps of arrays of any shape (the kernels of the
(De)Quantize TPPs, pytpp.tpp._quant)."""
from __future__ import annotations

import numpy as np

from pytpp import _layout, _validate
from pytpp._core import _runtime
from pytpp._typing import Array, ArrayLike, DTypeLike
from pytpp.tpp._quant import (FLOATS, Q_CODE, QTYPES, check_params, norm_axis, rows_ready,
                              run_dequantize, run_quantize)

_METHODS = ("minmax", "percentile")
# the percentile method's range: outliers beyond these are clipped
PERCENTILES = (0.01, 99.99)


def qtype(dtype, fn) -> np.dtype:
    return _validate.dtype_arg(dtype, QTYPES, fn)


def quantize(x: ArrayLike, scale: ArrayLike, zero_point: ArrayLike,
             dtype: DTypeLike = np.uint8, axis: int | None = None) -> Array:
    """Affine quantization: ``clip(round_half_even(x / scale) + zero_point)`` in `dtype`.

    The zero point is added after rounding (ONNX ``QuantizeLinear``); the quotient is computed
    in float64 (a float32, float16 or bfloat16 `x` widens exactly), so the result is the
    correctly rounded one. The kernels are the ``quantize`` TPP's (:func:`pytpp.tpp.unary`).

    Parameters
    ----------
    x : array_like of real numbers (float64, float32, bfloat16, float16, integers), any layout
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
    if x.dtype not in FLOATS and (x.dtype.kind not in "iuf" or x.dtype.kind == "b"):
        raise TypeError(f"{fn}: x must hold real numbers, got dtype {x.dtype}")
    s, z = check_params(scale, zero_point, dt, x.shape, axis, fn)
    ax = norm_axis(axis, x.ndim, fn)
    q = np.empty(x.shape, dt)
    if q.size == 0:
        return q
    if x.dtype not in FLOATS:
        # numpy's conversions, in x's memory order (a cast that also transposes is numpy's
        # slow loop): float16 widens exactly, integers as numpy casts them to float64
        x = x.astype(np.float32 if x.dtype == np.float16 else np.float64)
    if not rows_ready(x):
        # C-ordered in the thread's scratch, by the transpose kernels where that is a transpose
        x = _layout.dense("quant", x, x.shape, x.dtype)
    if run_quantize(x, q, s, z, ax, _runtime.active_isa_index()):
        raise ValueError(f"{fn}: x holds NaN, which has no quantized value")
    return q


def dequantize(q: ArrayLike, scale: ArrayLike, zero_point: ArrayLike, axis: int | None = None,
               dtype: DTypeLike = np.float32) -> Array:
    """``(q - zero_point) * scale`` in `dtype` (float32, float64 or bfloat16).

    ``q - zero_point`` is exact; the product is rounded once in float32 (float64 for a float64
    result), with the scale rounded to that dtype first, as numpy's ``(q - z).astype(dtype) *
    scale.astype(dtype)``; a bfloat16 result is that float32 value rounded to nearest even.
    The kernels are the ``dequantize`` TPP's (:func:`pytpp.tpp.unary`).

    Parameters
    ----------
    q : array_like of uint8, int8 or int32, any layout
    scale : float or 1-D array
        Positive and finite; 1-D (length ``q.shape[axis]``) for per-channel parameters.
    zero_point : int or 1-D array
        Integers in the range of q's dtype.
    axis : int, optional
        The channel axis of per-channel parameters (negative counts from the end).
    dtype : float32, float64 or bfloat16

    Returns
    -------
    ndarray of `dtype`, q's shape

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> pytpp.quant.dequantize(np.array([8, 10, 12], np.uint8), 0.5, 10)
    array([-1.,  0.,  1.], dtype=float32)
    """
    fn = "pytpp.quant.dequantize"
    q = _validate.asarray(q)
    if q.dtype not in Q_CODE:
        raise TypeError(f"{fn}: q has dtype {q.dtype}; expected uint8, int8 or int32")
    out_dt = _validate.dtype_arg(dtype, FLOATS, fn)
    s, z = check_params(scale, zero_point, q.dtype, q.shape, axis, fn)
    ax = norm_axis(axis, q.ndim, fn)
    y = np.empty(q.shape, out_dt)
    if y.size:
        run_dequantize(q if rows_ready(q) else _layout.dense("quant", q, q.shape, q.dtype), y,
                       s, z, ax, _runtime.active_isa_index())
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
    ax = norm_axis(axis, x.ndim, fn)
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
