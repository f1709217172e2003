"""Layer and RMS normalisation, forward and backward, on the rows of the normalised dims.

Each function views x as (rows, n) with n the product of the normalised dims, runs one kernel
call (statistics and output in one read of each row from memory: norm.h) and returns arrays of
numpy's shapes. float64 computes in float64; float32, bfloat16 and float16 in float32 (their
statistics are float32); bfloat16 rows are widened and narrowed in the kernels' row buffers, so
a bfloat16 call moves bfloat16 bytes only."""
import math
import operator
from typing import Literal, Sequence, overload

import numpy as np

from pytpp import _layout, _validate
from pytpp._core import _norm
from pytpp._typing import Array, ArrayLike

Shape = int | Sequence[int]

__all__ = ["layer_norm", "layer_norm_backward", "rms_norm", "rms_norm_backward"]


def _compute_dtype(dtype):
    return _validate.F64 if dtype == _validate.F64 else _validate.F32


def _normalized_dims(x, normalized_shape, fn):
    """The normalised trailing dims of x as a tuple, checked against x's shape."""
    if isinstance(normalized_shape, (int, np.integer)):
        shape = (operator.index(normalized_shape),)
    else:
        try:
            shape = tuple(operator.index(d) for d in normalized_shape)
        except TypeError:
            raise TypeError(f"{fn}: normalized_shape must be an int or a sequence of ints, got "
                            f"{normalized_shape!r}") from None
    if not shape:
        raise ValueError(f"{fn}: normalized_shape must name at least one dimension")
    if len(shape) > x.ndim or x.shape[x.ndim - len(shape):] != shape:
        raise ValueError(f"{fn}: normalized_shape {shape} does not match the trailing dims of x "
                         f"(shape {x.shape})")
    return shape


def _param(p, shape, name, fn, cdt):
    """weight / bias: None, or an array of `shape`, as a contiguous 1-D array of dtype cdt."""
    if p is None:
        return None
    arr = _validate.elementwise_operand(p, name, fn)
    if arr.shape != shape:
        raise ValueError(f"{fn}: {name} has shape {arr.shape}; expected {shape} "
                         f"(normalized_shape)")
    return np.ascontiguousarray(arr.reshape(-1), dtype=cdt)


def _storage(dtype, cdt):
    """The dtype the kernels read and write for an array of `dtype` at compute dtype `cdt`:
    its own when it is cdt, or bfloat16 under float32 (converted row by row in the kernel's
    buffers), else cdt (converted here)."""
    dtype = np.dtype(dtype)
    return dtype if dtype == cdt or (dtype == _validate.BF16 and cdt == _validate.F32) else cdt


def _rows(a, m, n, cdt):
    """a as an (m, n) array with unit column stride in its storage dtype (a copy only when
    needed)."""
    r = np.asarray(a, dtype=_storage(a.dtype, cdt))
    if r.ndim and r.shape[-1] > 1 and r.strides[-1] != r.itemsize:
        r = _layout.contiguous(r)      # a transposed layout: the transpose kernels, not numpy
    r = r.reshape(m, n)
    if n > 1 and r.strides[1] != r.itemsize:
        r = np.ascontiguousarray(r)
    if m > 1 and r.strides[0] % r.itemsize:
        r = np.ascontiguousarray(r)
    return r


def _stats_operand(s, shape, name, fn, cdt):
    arr = _validate.elementwise_operand(s, name, fn)
    if arr.shape != shape:
        raise ValueError(f"{fn}: {name} has shape {arr.shape}; expected {shape} (x's shape "
                         f"without the normalised dims)")
    return np.ascontiguousarray(arr.reshape(-1), dtype=cdt)


def _target(out, x, m, n, cdt, fn, inputs, result):
    """The (m, n) array the kernel writes: out itself when the kernel writes its dtype, it is in
    C order and overlaps the inputs at most by being one of them (rows are read before they are
    written), else a new array (copied into out afterwards)."""
    if out is None:
        return np.empty((m, n), _storage(result, cdt))
    _validate.check_out(out, x.shape, result, fn)
    if _storage(out.dtype, cdt) == out.dtype and out.dtype.isnative and out.flags.c_contiguous:
        view = out.reshape(m, n)
        if not any(a is not None and a.size and np.may_share_memory(view, a)
                   and not _validate.same_view(view, a) for a in inputs):
            return view
    return np.empty((m, n), _storage(result, cdt))


def _finish(y, out, shape, result):
    if out is None:
        return y.reshape(shape).astype(result, copy=False)
    if not np.shares_memory(y, out):
        _layout.copy_into(out, y.reshape(shape))
    return out


_ROW_DTYPES = (_validate.F32, _validate.F64, _validate.BF16)


def _plain_param(p, n, cdt):
    """weight / bias already as the kernel reads it (None, or a C-contiguous (n,) array of
    dtype cdt)?"""
    return p is None or (type(p) is np.ndarray and p.dtype == cdt and p.shape == (n,)
                         and p.flags.c_contiguous)


def _fast_forward(kind, x, normalized_shape, weight, bias, eps, out, stats):
    """The common call without the general checks' conversions: x a C-contiguous float32,
    float64 or bfloat16 array normalised over its last dim (an int), weight and bias plain,
    eps a float, out None or a C-contiguous array of x's dtype that is x or does not overlap
    the inputs. None when the call is anything else (the general path then decides). The
    general path's bookkeeping costs 5-7 us a call, more than the kernel on a (1, 4096) row.
    The mean is computed only when `stats` asks for it."""
    if (type(x) is not np.ndarray or x.dtype not in _ROW_DTYPES or type(normalized_shape) is not int
            or type(eps) is not float or not 0.0 <= eps < math.inf or not x.ndim
            or x.shape[-1] != normalized_shape or not x.flags.c_contiguous or not x.size):
        return None
    n = normalized_shape
    cdt = _validate.F64 if x.dtype == _validate.F64 else _validate.F32
    if not (_plain_param(weight, n, cdt) and _plain_param(bias, n, cdt)):
        return None
    if out is not None and not (
            type(out) is np.ndarray and out.dtype == x.dtype and out.shape == x.shape
            and out.flags.c_contiguous and out.flags.writeable
            and (out is x or not np.may_share_memory(out, x))
            and (weight is None or not np.may_share_memory(out, weight))
            and (bias is None or not np.may_share_memory(out, bias))):
        return None
    m = x.size // n
    rows = x if x.ndim == 2 else x.reshape(m, n)
    y = np.empty((m, n), x.dtype) if out is None else out if out.ndim == 2 else out.reshape(m, n)
    mean = np.empty(m, cdt) if stats and kind == _norm.LAYER else None
    rstd = np.empty(m, cdt)
    _norm.forward(kind, rows, weight, bias, eps, y, mean, rstd)
    if not stats:
        return (y if x.ndim == 2 else y.reshape(x.shape)) if out is None else out
    lead = x.shape[:-1]
    return (y.reshape(x.shape) if out is None else out,
            None if mean is None else mean.reshape(lead), rstd.reshape(lead))


def _forward(kind, fn, x, normalized_shape, weight, bias, eps, out):
    x = _validate.elementwise_operand(x, "x", fn)
    shape = _normalized_dims(x, normalized_shape, fn)
    cdt = _compute_dtype(x.dtype)
    w = _param(weight, shape, "weight", fn, cdt)
    b = _param(bias, shape, "bias", fn, cdt)
    e = _validate.real_arg(eps, "eps", fn, 0.0)
    lead = x.shape[:x.ndim - len(shape)]
    n = math.prod(shape)
    m = math.prod(lead)
    xr = _rows(x, m, n, cdt)
    y = _target(out, x, m, n, cdt, fn, [xr, w, b], x.dtype)
    mean = np.empty(m, cdt) if kind == _norm.LAYER else None
    rstd = np.empty(m, cdt)
    if n == 0:
        rstd.fill(np.nan)
        if mean is not None:
            mean.fill(np.nan)
    elif m:
        _norm.forward(kind, xr, w, b, e, y, mean, rstd)
    res = _finish(y, out, x.shape, x.dtype)
    return res, (None if mean is None else mean.reshape(lead)), rstd.reshape(lead)


@overload
def layer_norm(x: ArrayLike, normalized_shape: Shape, weight: ArrayLike | None = ...,
               bias: ArrayLike | None = ..., eps: float = ..., *, out: Array | None = ...,
               return_stats: Literal[False] = ...) -> Array: ...
@overload
def layer_norm(x: ArrayLike, normalized_shape: Shape, weight: ArrayLike | None = ...,
               bias: ArrayLike | None = ..., eps: float = ..., *, out: Array | None = ...,
               return_stats: Literal[True]) -> tuple[Array, Array, Array]: ...
def layer_norm(x: ArrayLike, normalized_shape: Shape, weight: ArrayLike | None = None,
               bias: ArrayLike | None = None, eps: float = 1e-5, *, out: Array | None = None,
               return_stats: bool = False) -> Array | tuple[Array, Array, Array]:
    """Layer normalisation over the trailing dims (``torch.nn.functional.layer_norm``).

    ``y = (x - mean) * rstd * weight + bias`` with mean and the biased variance over the
    normalised dims and ``rstd = 1 / sqrt(var + eps)``. One kernel pass per row: statistics from
    lane partials and a centred second pass over the cached row (large offsets keep their
    digits), then the output.

    Parameters
    ----------
    x : array_like
        float64, float32, bfloat16 or float16 (integers compute as float64).
    normalized_shape : int or tuple of ints
        The trailing dims of x to normalise over.
    weight, bias : array_like, optional
        Of shape ``normalized_shape``; None means 1 and 0.
    eps : float, optional
        Added to the variance; finite and >= 0.
    out : ndarray, optional
        Of x's shape, any float dtype x casts to (same_kind).
    return_stats : bool, optional
        Also return ``mean`` and ``rstd`` (for :func:`layer_norm_backward`).

    Returns
    -------
    y : ndarray
        x's dtype (or ``out``).
    mean, rstd : ndarray
        Only with ``return_stats``: shape ``x.shape[:-len(normalized_shape)]``, float64 for
        float64 x, float32 otherwise.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> y, mean, rstd = pytpp.nn.layer_norm(np.array([[1.0, 3.0]]), 2, return_stats=True)
    >>> y, mean
    (array([[-0.99999...,  0.99999...]]), array([2.]))
    """
    fast = _fast_forward(_norm.LAYER, x, normalized_shape, weight, bias, eps, out, return_stats)
    if fast is not None:
        return fast
    fn = "pytpp.nn.layer_norm"
    y, mean, rstd = _forward(_norm.LAYER, fn, x, normalized_shape, weight, bias, eps, out)
    return (y, mean, rstd) if return_stats else y


@overload
def rms_norm(x: ArrayLike, normalized_shape: Shape, weight: ArrayLike | None = ...,
             eps: float = ..., *, out: Array | None = ...,
             return_stats: Literal[False] = ...) -> Array: ...
@overload
def rms_norm(x: ArrayLike, normalized_shape: Shape, weight: ArrayLike | None = ...,
             eps: float = ..., *, out: Array | None = ...,
             return_stats: Literal[True]) -> tuple[Array, Array]: ...
def rms_norm(x: ArrayLike, normalized_shape: Shape, weight: ArrayLike | None = None,
             eps: float = 1e-6, *, out: Array | None = None,
             return_stats: bool = False) -> Array | tuple[Array, Array]:
    """RMS normalisation over the trailing dims: ``y = x * rstd * weight`` with
    ``rstd = 1 / sqrt(mean(x**2) + eps)`` (as ``torch.nn.functional.rms_norm``).

    Parameters
    ----------
    x : array_like
        float64, float32, bfloat16 or float16 (integers compute as float64).
    normalized_shape : int or tuple of ints
        The trailing dims of x to normalise over.
    weight : array_like, optional
        Of shape ``normalized_shape``; None means 1.
    eps : float, optional
        Added to the mean square; finite and >= 0.
    out : ndarray, optional
        Of x's shape, any float dtype x casts to (same_kind).
    return_stats : bool, optional
        Also return ``rstd`` (for :func:`rms_norm_backward`).

    Returns
    -------
    y : ndarray
        x's dtype (or ``out``).
    rstd : ndarray
        Only with ``return_stats``: shape ``x.shape[:-len(normalized_shape)]``.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> pytpp.nn.rms_norm(np.array([3.0, 4.0]), 2, eps=0.0)
    array([0.84852814, 1.13137085])
    """
    fast = _fast_forward(_norm.RMS, x, normalized_shape, weight, None, eps, out, return_stats)
    if fast is not None:
        return (fast[0], fast[2]) if return_stats else fast
    fn = "pytpp.nn.rms_norm"
    y, _, rstd = _forward(_norm.RMS, fn, x, normalized_shape, weight, None, eps, out)
    return (y, rstd) if return_stats else y


def _backward(kind, fn, grad_out, x, mean, rstd, weight, out):
    x = _validate.elementwise_operand(x, "x", fn)
    g = _validate.elementwise_operand(grad_out, "grad_out", fn)
    if g.shape != x.shape:
        raise ValueError(f"{fn}: grad_out has shape {g.shape}; expected x's shape {x.shape}")
    r_arr = _validate.elementwise_operand(rstd, "rstd", fn)
    k = x.ndim - r_arr.ndim
    if k < 1 or x.shape[:r_arr.ndim] != r_arr.shape:
        raise ValueError(f"{fn}: rstd has shape {r_arr.shape}; expected the leading dims of x "
                         f"(shape {x.shape}) without at least one normalised dim")
    lead, shape = x.shape[:r_arr.ndim], x.shape[r_arr.ndim:]
    cdt = _compute_dtype(_validate.promote(x.dtype, g.dtype))
    m, n = math.prod(lead), math.prod(shape)
    mu = _stats_operand(mean, lead, "mean", fn, cdt) if kind == _norm.LAYER else None
    r = _stats_operand(r_arr, lead, "rstd", fn, cdt)
    w = _param(weight, shape, "weight", fn, cdt)
    xr, gr = _rows(x, m, n, cdt), _rows(g, m, n, cdt)
    res_dt = _validate.promote(x.dtype, g.dtype)
    dx = _target(out, x, m, n, cdt, fn, [xr, gr, w, mu, r], res_dt)
    gw = np.empty(n, cdt) if w is not None else None
    gb = np.empty(n, cdt) if w is not None and kind == _norm.LAYER else None
    if m and n:
        _norm.backward(kind, gr, xr, mu, r, w, dx, gw, gb)
    else:
        for a in (gw, gb):
            if a is not None:
                a.fill(0)
    grad_x = _finish(dx, out, x.shape, res_dt)
    if w is None:
        return grad_x, None, None
    wdt = np.asarray(weight).dtype if np.asarray(weight).dtype.kind == "f" else cdt
    grad_w = gw.reshape(shape).astype(wdt, copy=False)
    grad_b = None if gb is None else gb.reshape(shape).astype(wdt, copy=False)
    return grad_x, grad_w, grad_b


def layer_norm_backward(grad_out: ArrayLike, x: ArrayLike, mean: ArrayLike, rstd: ArrayLike,
                        weight: ArrayLike | None = None, *, out: Array | None = None
                        ) -> tuple[Array, Array | None, Array | None]:
    """Gradients of :func:`layer_norm` from its saved statistics.

    With ``xhat = (x - mean) * rstd`` and ``dy = grad_out * weight``:
    ``grad_x = rstd * (dy - mean(dy) - xhat * mean(dy * xhat))`` over the normalised dims,
    ``grad_weight = sum(grad_out * xhat)`` and ``grad_bias = sum(grad_out)`` over the rows.

    Parameters
    ----------
    grad_out, x : array_like
        Of one shape; the normalised dims are those x has beyond ``mean``'s.
    mean, rstd : array_like
        As returned by ``layer_norm(..., return_stats=True)``.
    weight : array_like, optional
        The forward's weight (None: 1).
    out : ndarray, optional
        For grad_x: x's shape, any float dtype the result casts to (same_kind); may be
        grad_out itself (each row is read before it is written).

    Returns
    -------
    grad_x : ndarray
    grad_weight, grad_bias : ndarray or None
        Of the normalised shape; None when weight is None.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> x = np.array([[1.0, 3.0]])
    >>> y, mean, rstd = pytpp.nn.layer_norm(x, 2, return_stats=True)
    >>> gx, gw, gb = pytpp.nn.layer_norm_backward(np.ones_like(x), x, mean, rstd, np.ones(2))
    >>> gx, gb
    (array([[0., 0.]]), array([1., 1.]))
    """
    return _backward(_norm.LAYER, "pytpp.nn.layer_norm_backward", grad_out, x, mean, rstd,
                     weight, out)


def rms_norm_backward(grad_out: ArrayLike, x: ArrayLike, rstd: ArrayLike,
                      weight: ArrayLike | None = None, *, out: Array | None = None
                      ) -> tuple[Array, Array | None]:
    """Gradients of :func:`rms_norm` from its saved ``rstd``: with ``xhat = x * rstd`` and
    ``dy = grad_out * weight``, ``grad_x = rstd * (dy - xhat * mean(dy * xhat))`` and
    ``grad_weight = sum(grad_out * xhat)`` over the rows.

    Parameters
    ----------
    grad_out, x : array_like
        Of one shape; the normalised dims are those x has beyond ``rstd``'s.
    rstd : array_like
        As returned by ``rms_norm(..., return_stats=True)``.
    weight : array_like, optional
        The forward's weight (None: 1).
    out : ndarray, optional
        For grad_x, as in :func:`layer_norm_backward`.

    Returns
    -------
    grad_x : ndarray
    grad_weight : ndarray or None
        None when weight is None.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> x = np.array([3.0, 4.0])
    >>> y, rstd = pytpp.nn.rms_norm(x, 2, eps=0.0, return_stats=True)
    >>> gx, gw = pytpp.nn.rms_norm_backward(np.zeros(2), x, rstd)
    >>> gx, gw
    (array([0., 0.]), None)
    """
    gx, gw, _ = _backward(_norm.RMS, "pytpp.nn.rms_norm_backward", grad_out, x, None, rstd,
                          weight, out)
    return gx, gw
