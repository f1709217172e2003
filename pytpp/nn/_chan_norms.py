"""Channel normalisations: group_norm and batch_norm, forward and backward.

Both run on the plane and column kernels of the norm family (frame/norm_chan.c): statistics
summed in double across planes and row blocks, then the output in one fused pass. float64
computes in float64; float32, bfloat16 and float16 in float32 (lower-precision inputs through a
float32 copy), statistics in the compute dtype."""
import math
import operator
from typing import Literal, overload

import numpy as np

from pytpp import _layout, _validate
from pytpp._core import _norm
from pytpp._typing import Array, ArrayLike

__all__ = ["group_norm", "group_norm_backward", "batch_norm", "batch_norm_backward"]


def _compute_dtype(*dtypes):
    return _validate.F64 if _validate.promote(*dtypes) == _validate.F64 else _validate.F32


def _channels_operand(x, name, fn):
    arr = _validate.elementwise_operand(x, name, fn)
    if arr.ndim < 2:
        raise ValueError(f"{fn}: {name} must have at least 2 dims (N, C, ...), got shape "
                         f"{arr.shape}")
    return arr


def _per_channel(p, C, name, fn, cdt):
    if p is None:
        return None
    arr = _validate.elementwise_operand(p, name, fn)
    if arr.shape != (C,):
        raise ValueError(f"{fn}: {name} has shape {arr.shape}; expected ({C},) (one per channel)")
    return np.ascontiguousarray(arr, dtype=cdt)


def _dense(a, cdt):
    """a in C order and the compute dtype (a channels-last array by the transpose kernels)."""
    return _layout.contiguous(np.asarray(a).astype(cdt, copy=False))


def _output(out, x, cdt, fn, inputs, result):
    """(array the kernels write, out or None): out itself when it has the compute dtype, is
    C-contiguous and overlaps the inputs at most by being one of them (the kernels read each
    element before they write it), else a new array copied into out by _result."""
    if out is None:
        return np.empty(x.shape, cdt), None
    _validate.check_out(out, x.shape, result, fn)
    if (out.dtype == cdt and out.flags.c_contiguous and not any(
            a is not None and a.size and np.may_share_memory(out, a)
            and not _validate.same_view(out, a) for a in inputs)):
        return out, out
    return np.empty(x.shape, cdt), out


def _result(y, out, result):
    if out is None:
        return y.astype(result, copy=False)
    if y is not out:
        _layout.copy_into(out, y)
    return out


def _groups(num_groups, C, fn):
    try:
        g = operator.index(num_groups)
    except TypeError:
        raise TypeError(f"{fn}: num_groups must be an integer, got "
                        f"{type(num_groups).__name__}") from None
    if g < 1 or C % g:
        raise ValueError(f"{fn}: num_groups={g} must be >= 1 and divide the {C} channels")
    return g


@overload
def group_norm(x: ArrayLike, num_groups: int, weight: ArrayLike | None = ...,
               bias: ArrayLike | None = ..., eps: float = ..., *, out: Array | None = ...,
               return_stats: Literal[False] = ...) -> Array: ...
@overload
def group_norm(x: ArrayLike, num_groups: int, weight: ArrayLike | None = ...,
               bias: ArrayLike | None = ..., eps: float = ..., *, out: Array | None = ...,
               return_stats: Literal[True]) -> tuple[Array, Array, Array]: ...
def group_norm(x: ArrayLike, num_groups: int, weight: ArrayLike | None = None,
               bias: ArrayLike | None = None, eps: float = 1e-5, *, out: Array | None = None,
               return_stats: bool = False) -> Array | tuple[Array, Array, Array]:
    """Group normalisation of ``(N, C, *)`` (``torch.nn.functional.group_norm``): the channels of
    each sample in ``num_groups`` groups, each group normalised over its channels and spatial
    elements, then ``* weight[c] + bias[c]`` per channel.

    Parameters
    ----------
    x : array_like
        ``(N, C, *)``, float64, float32, bfloat16 or float16.
    num_groups : int
        Divides C.
    weight, bias : array_like, optional
        (C,); None means 1 and 0.
    eps : float, optional
    out : ndarray, optional
        x's shape, a float dtype x casts to.
    return_stats : bool, optional
        Also return ``mean`` and ``rstd``, shape (N, num_groups).

    Returns
    -------
    y : ndarray
        x's dtype (or ``out``).
    mean, rstd : ndarray
        Only with ``return_stats``.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> x = np.arange(8.0).reshape(1, 4, 2)
    >>> y, mean, rstd = pytpp.nn.group_norm(x, 2, return_stats=True)
    >>> mean
    array([[1.5, 5.5]])
    """
    fn = "pytpp.nn.group_norm"
    x = _channels_operand(x, "x", fn)
    N, C = x.shape[:2]
    G = _groups(num_groups, C, fn)
    cdt = _compute_dtype(x.dtype)
    w = _per_channel(weight, C, "weight", fn, cdt)
    b = _per_channel(bias, C, "bias", fn, cdt)
    e = _validate.real_arg(eps, "eps", fn, 0.0)
    hw = math.prod(x.shape[2:])
    xc = _dense(x, cdt)
    y, out_direct = _output(out, x, cdt, fn, [xc, w, b], x.dtype)
    mean, rstd = np.empty((N, G), cdt), np.empty((N, G), cdt)
    if N and C and hw:
        _norm.group_forward(xc, N, C, hw, G, w, b, e, y, mean, rstd)
    elif N and C:
        mean.fill(np.nan)
        rstd.fill(np.nan)
    res = _result(y, out, x.dtype)
    return (res, mean, rstd) if return_stats else res


def group_norm_backward(grad_out: ArrayLike, x: ArrayLike, num_groups: int, mean: ArrayLike,
                        rstd: ArrayLike, weight: ArrayLike | None = None, *,
                        out: Array | None = None) -> tuple[Array, Array | None, Array | None]:
    """Gradients of :func:`group_norm` from its saved statistics: ``(grad_x, grad_weight,
    grad_bias)``, the last two None when weight is None.

    Parameters
    ----------
    grad_out, x : array_like
        ``(N, C, *)``, one shape.
    num_groups : int
    mean, rstd : array_like
        (N, num_groups), as returned by ``group_norm(..., return_stats=True)``.
    weight : array_like, optional
        (C,).
    out : ndarray, optional
        For grad_x: x's shape, a float dtype the result casts to; may be grad_out or x itself.

    Returns
    -------
    grad_x : ndarray
        ``out`` when given.
    grad_weight, grad_bias : ndarray or None

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> x = np.arange(8.0).reshape(1, 4, 2)
    >>> y, mean, rstd = pytpp.nn.group_norm(x, 2, return_stats=True)
    >>> gx, gw, gb = pytpp.nn.group_norm_backward(np.ones_like(x), x, 2, mean, rstd, np.ones(4))
    >>> gb
    array([2., 2., 2., 2.])
    """
    fn = "pytpp.nn.group_norm_backward"
    x = _channels_operand(x, "x", fn)
    g = _validate.elementwise_operand(grad_out, "grad_out", fn)
    if g.shape != x.shape:
        raise ValueError(f"{fn}: grad_out has shape {g.shape}; expected x's shape {x.shape}")
    N, C = x.shape[:2]
    G = _groups(num_groups, C, fn)
    cdt = _compute_dtype(x.dtype, g.dtype)
    stats = []
    for name, s in (("mean", mean), ("rstd", rstd)):
        arr = _validate.elementwise_operand(s, name, fn)
        if arr.shape != (N, G):
            raise ValueError(f"{fn}: {name} has shape {arr.shape}; expected {(N, G)}")
        stats.append(_dense(arr, cdt))
    w = _per_channel(weight, C, "weight", fn, cdt)
    hw = math.prod(x.shape[2:])
    gc, xc = _dense(g, cdt), _dense(x, cdt)
    res_dt = _validate.promote(x.dtype, g.dtype)
    dx, _ = _output(out, x, cdt, fn, [gc, xc, w, *stats], res_dt)
    gw = np.zeros(C, cdt) if w is not None else None
    gb = np.zeros(C, cdt) if w is not None else None
    if N and C and hw:
        _norm.group_backward(gc, xc, N, C, hw, G, stats[0], stats[1], w, dx, gw, gb)
    return _result(dx, out, res_dt), gw, gb


def _is_nhwc(data_format, fn):
    if data_format not in ("NCHW", "NHWC"):
        raise ValueError(f"{fn}: data_format must be 'NCHW' or 'NHWC', got {data_format!r}")
    return data_format == "NHWC"


def _bn_geometry(x, nhwc):
    """(N, C, hw) the kernels see: NCHW (N, C, prod(spatial)); NHWC (N * prod(spatial), C, 1)."""
    if nhwc:
        return math.prod(x.shape[:-1]), x.shape[-1], 1
    return x.shape[0], x.shape[1], math.prod(x.shape[2:])


def _running(a, C, name, fn, writable):
    if a is None:
        return None
    if writable and not isinstance(a, np.ndarray):
        raise TypeError(f"{fn}: {name} must be a numpy.ndarray (updated in place in training)")
    arr = _validate.asarray(a)
    if arr.dtype.kind != "f" and arr.dtype != _validate.BF16:
        raise TypeError(f"{fn}: {name} has dtype {arr.dtype}; expected a float dtype")
    if arr.shape != (C,):
        raise ValueError(f"{fn}: {name} has shape {arr.shape}; expected ({C},)")
    if writable and not arr.flags.writeable:
        raise ValueError(f"{fn}: {name} is read-only (training updates it in place)")
    return arr


@overload
def batch_norm(x: ArrayLike, running_mean: Array | None, running_var: Array | None,
               weight: ArrayLike | None = ..., bias: ArrayLike | None = ...,
               training: bool = ..., momentum: float = ..., eps: float = ..., *,
               data_format: str = ..., out: Array | None = ...,
               return_stats: Literal[False] = ...) -> Array: ...
@overload
def batch_norm(x: ArrayLike, running_mean: Array | None, running_var: Array | None,
               weight: ArrayLike | None = ..., bias: ArrayLike | None = ...,
               training: bool = ..., momentum: float = ..., eps: float = ..., *,
               data_format: str = ..., out: Array | None = ...,
               return_stats: Literal[True]) -> tuple[Array, Array, Array]: ...
def batch_norm(x: ArrayLike, running_mean: Array | None, running_var: Array | None,
               weight: ArrayLike | None = None, bias: ArrayLike | None = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5, *,
               data_format: str = "NCHW", out: Array | None = None,
               return_stats: bool = False) -> Array | tuple[Array, Array, Array]:
    """Batch normalisation (``torch.nn.functional.batch_norm``), channels on axis 1 ("NCHW") or
    last ("NHWC").

    Training normalises with the batch's mean and biased variance per channel and updates the
    running statistics in place as torch does (``running = (1 - momentum) * running + momentum *
    batch``, the variance unbiased); eval uses the running statistics and leaves them.

    Parameters
    ----------
    x : array_like
        ``(N, C, *)`` or, with ``data_format="NHWC"``, ``(N, *, C)``.
    running_mean, running_var : ndarray or None
        (C,) float arrays; required in eval, updated in training when given (nothing is written
        when the call raises).
    weight, bias : array_like, optional
        (C,).
    training : bool, optional
    momentum : float, optional
        In [0, 1].
    eps : float, optional
    data_format : {"NCHW", "NHWC"}, optional
    out : ndarray, optional
        x's shape, a float dtype x casts to.
    return_stats : bool, optional
        Also return the ``mean`` and ``rstd`` used, shape (C,).

    Returns
    -------
    y : ndarray
    mean, rstd : ndarray
        Only with ``return_stats``.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> x = np.array([[1.0, 10.0], [3.0, 30.0]])
    >>> rm, rv = np.zeros(2), np.ones(2)
    >>> pytpp.nn.batch_norm(x, rm, rv, training=True, eps=0.0)
    array([[-1., -1.],
           [ 1.,  1.]])
    >>> rm, rv
    (array([0.2, 2. ]), array([ 1.1, 20.9]))
    """
    fn = "pytpp.nn.batch_norm"
    nhwc = _is_nhwc(data_format, fn)
    x = _channels_operand(x, "x", fn)
    back = None
    xt = _layout.channels_last(x) if not nhwc and out is None else None
    if xt is not None:    # channels last in memory: as NHWC, the result in that order
        x, nhwc, back = xt, True, (lambda r: np.moveaxis(r, -1, 1))
    N, C, hw = _bn_geometry(x, nhwc)
    rm = _running(running_mean, C, "running_mean", fn, bool(training))
    rv = _running(running_var, C, "running_var", fn, bool(training))
    cdt = _compute_dtype(x.dtype)
    w = _per_channel(weight, C, "weight", fn, cdt)
    b = _per_channel(bias, C, "bias", fn, cdt)
    e = _validate.real_arg(eps, "eps", fn, 0.0)
    try:
        m = float(momentum)
    except (TypeError, ValueError):
        raise TypeError(f"{fn}: momentum must be a real number, got "
                        f"{type(momentum).__name__}") from None
    if not 0.0 <= m <= 1.0:
        raise ValueError(f"{fn}: momentum must be in [0, 1], got {momentum!r}")
    count = N * hw
    if training and count <= 1 and C:
        raise ValueError(f"{fn}: training needs more than 1 value per channel, got {count}")
    if not training and (rm is None or rv is None):
        raise ValueError(f"{fn}: eval (training=False) needs running_mean and running_var")
    xc = _dense(x, cdt)
    y, _ = _output(out, x, cdt, fn, [xc, w, b], x.dtype)
    if training:
        mean, var = np.empty(C, cdt), np.empty(C, cdt)
    else:
        mean, var = _dense(rm, cdt).copy(), _dense(rv, cdt).copy()
    rstd = np.empty(C, cdt)
    if C:
        _norm.batch_forward(nhwc, bool(training), xc, N, C, hw, w, b, e, y, mean, var, rstd)
    if training:
        unbiased = var.astype(np.float64) * (count / (count - 1))
        if rm is not None:
            rm[...] = (1 - m) * rm + m * mean.astype(np.float64)
        if rv is not None:
            rv[...] = (1 - m) * rv + m * unbiased
    res = _result(y, out, x.dtype)
    if back is not None:
        res = back(res)              # the caller's axes, over the channels-last result
    return (res, mean, rstd) if return_stats else res


def batch_norm_backward(grad_out: ArrayLike, x: ArrayLike, mean: ArrayLike, rstd: ArrayLike,
                        weight: ArrayLike | None = None, *, data_format: str = "NCHW",
                        out: Array | None = None) -> tuple[Array, Array | None, Array | None]:
    """Gradients of :func:`batch_norm` in training mode from the batch statistics it returned:
    ``(grad_x, grad_weight, grad_bias)``, the last two None when weight is None.

    Parameters
    ----------
    grad_out, x : array_like
        One shape, channels as ``data_format`` says.
    mean, rstd : array_like
        (C,), from ``batch_norm(..., training=True, return_stats=True)``.
    weight : array_like, optional
        (C,).
    data_format : {"NCHW", "NHWC"}, optional
    out : ndarray, optional
        For grad_x: x's shape, a float dtype the result casts to; may be grad_out or x itself.

    Returns
    -------
    grad_x : ndarray
        ``out`` when given.
    grad_weight, grad_bias : ndarray or None

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> x = np.array([[1.0, 10.0], [3.0, 30.0]])
    >>> y, mean, rstd = pytpp.nn.batch_norm(x, None, None, training=True, return_stats=True)
    >>> gx, gw, gb = pytpp.nn.batch_norm_backward(np.ones_like(x), x, mean, rstd, np.ones(2))
    >>> gb
    array([2., 2.])
    """
    fn = "pytpp.nn.batch_norm_backward"
    nhwc = _is_nhwc(data_format, fn)
    x = _channels_operand(x, "x", fn)
    g = _validate.elementwise_operand(grad_out, "grad_out", fn)
    if g.shape != x.shape:
        raise ValueError(f"{fn}: grad_out has shape {g.shape}; expected x's shape {x.shape}")
    N, C, hw = _bn_geometry(x, nhwc)
    cdt = _compute_dtype(x.dtype, g.dtype)
    mu = _per_channel(mean, C, "mean", fn, cdt)
    r = _per_channel(rstd, C, "rstd", fn, cdt)
    w = _per_channel(weight, C, "weight", fn, cdt)
    gc, xc = _dense(g, cdt), _dense(x, cdt)
    res_dt = _validate.promote(x.dtype, g.dtype)
    dx, _ = _output(out, x, cdt, fn, [gc, xc, mu, r, w], res_dt)
    gw = np.zeros(C, cdt) if w is not None else None
    gb = np.zeros(C, cdt) if w is not None else None
    if C and N * hw:
        _norm.batch_backward(nhwc, gc, xc, N, C, hw, mu, r, w, dx, gw, gb)
    return _result(dx, out, res_dt), gw, gb
