"""2D max and average pooling with torch's semantics (floor mode; padding never wins the max;
average pooling counts the zero padding in the divisor), their backward functions, and
adaptive average pooling. The forward max and average pooling run in C (frame/pool.c: one pass
over the input, vectorised over channels in NHWC and over output columns in NCHW, threads over
output rows), and so do the backward functions (pool_rows.inc's backward: threads over NCHW
planes or NHWC channel chunks, max pooling to torch's index, found again in x or, given the
indices max_pool2d returns, scattered to them); adaptive pooling is numpy (an integral image in
float64)."""
import numpy as np

from pytpp import _layout
from pytpp._core import _conv
from pytpp._typing import Array, ArrayLike
from pytpp.nn import _conv_args as A

__all__ = [
    "adaptive_avg_pool2d",
    "avg_pool2d",
    "avg_pool2d_backward",
    "max_pool2d",
    "max_pool2d_backward",
]


def _pool_args(x, kernel_size, stride, padding, data_format, fn, name="x"):
    fmt = A.data_format(data_format, fn)
    x = A.float_operand(x, name, fn)
    if x.ndim != 4:
        raise ValueError(f"{fn}: {name} must be 4-D ({fmt}), got shape {x.shape}")
    k = A.pair(kernel_size, "kernel_size", fn, 1)
    s = k if stride is None else A.pair(stride, "stride", fn, 1)
    p = A.pair(padding, "padding", fn, 0)
    if any(2 * pi > ki for pi, ki in zip(p, k)):
        raise ValueError(f"{fn}: padding {p} must be at most half the kernel size {k}")
    xn = x if fmt == "NCHW" else x.transpose(0, 3, 1, 2)
    H, W = xn.shape[2:]
    P = A.out_size(H, (p[0], p[0]), k[0], s[0], 1, fn)
    Q = A.out_size(W, (p[1], p[1]), k[1], s[1], 1, fn)
    return fmt, x, xn, k, s, p, P, Q


_COMPUTE = (np.dtype(np.float32), np.dtype(np.float64))


def _cdt(dt):
    return np.float64 if dt == np.float64 else np.float32


def _finish(yn, fmt, dt):
    y = yn if fmt == "NCHW" else yn.transpose(0, 2, 3, 1)
    return np.ascontiguousarray(y).astype(dt, copy=False)


def _compute_view(x):
    """x in the compute dtype with a unit innermost stride and the others in whole elements
    (the forward kernels' layout), copied only when it is not."""
    if x.dtype in _COMPUTE and x.flags.c_contiguous:
        return x
    xc = x.astype(_cdt(x.dtype), copy=False)
    # the stride of an axis of length 1 is never used
    used = [st for st, n in zip(xc.strides, xc.shape) if n > 1]
    if (xc.shape[3] > 1 and xc.strides[3] != xc.itemsize) or any(st % xc.itemsize for st in used):
        xc = np.ascontiguousarray(xc)
    return xc


def _forward_c(op, fmt, x, k, s, p, P, Q):
    """max (op 0) or average (op 1) pooling in C, in x's format; the result in the compute
    dtype, C-contiguous."""
    xc = _compute_view(x)
    cdt = xc.dtype
    N, C, H, W = xc.shape if fmt == "NCHW" else (xc.shape[0], xc.shape[3]) + xc.shape[1:3]
    y = np.empty((N, C, P, Q) if fmt == "NCHW" else (N, P, Q, C), cdt)
    if y.size:
        _conv.pool2d_forward(op, xc, y, fmt == "NHWC",
                             (N, C, H, W, P, Q, k[0], k[1], s[0], s[1], p[0], p[1]))
    return y


def _backward_c(op, fmt, g, x, cdt, geom):
    """The pooling backward in C: g an NCHW view of grad_out, x in fmt (read by max only); the
    gradient in fmt and x's dtype."""
    N, C, H, W = geom[:4]
    nhwc = fmt == "NHWC"
    gc = np.ascontiguousarray(g.transpose(0, 2, 3, 1) if nhwc else g, dtype=cdt)
    xc = np.ascontiguousarray(x, dtype=cdt) if op == 0 else gc
    gx = np.empty((N, H, W, C) if nhwc else (N, C, H, W), cdt)
    if gx.size:
        _conv.pool2d_backward(op, gc, xc, gx, nhwc, geom)
    return gx.astype(x.dtype, copy=False)


def max_pool2d(x: ArrayLike, kernel_size: int | tuple[int, int],
               stride: int | tuple[int, int] | None = None,
               padding: int | tuple[int, int] = 0, *, data_format: str = "NCHW",
               return_indices: bool = False) -> Array | tuple[Array, Array]:
    """2D max pooling (``torch.nn.functional.max_pool2d``, floor mode): padding is -inf, so it
    never wins the max.

    With ``return_indices=True`` it also returns, as torch does, each output's index: the flat
    position ``h * W + w`` in its (H, W) plane of the window's first maximum (NaN counts as the
    largest; of several NaNs the last), int64 in the output's layout. Pass them to
    :func:`max_pool2d_backward` (``indices=``) and the backward scatters the gradient to them
    instead of finding each window's maximum in ``x`` again.

    Parameters
    ----------
    x : array_like
        (N, C, H, W), or (N, H, W, C) with ``data_format="NHWC"``; a float dtype.
    kernel_size : int or pair
    stride : int or pair, optional
        Defaults to kernel_size.
    padding : int or pair, optional
        At most half the kernel size, as torch.
    data_format : {"NCHW", "NHWC"}
    return_indices : bool, optional
        Also return the indices of the maxima.

    Returns
    -------
    y : ndarray
        The pooled array in x's format and dtype.
    indices : ndarray of int64
        With ``return_indices``: y's shape, each output's flat index in its plane.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    >>> pytpp.nn.max_pool2d(x, 2)[0, 0]
    array([[ 5.,  7.],
           [13., 15.]], dtype=float32)
    >>> y, idx = pytpp.nn.max_pool2d(x, 2, return_indices=True)
    >>> idx[0, 0]
    array([[ 5,  7],
           [13, 15]])
    """
    fn = "pytpp.nn.max_pool2d"
    fmt, x, _, k, s, p, P, Q = _pool_args(x, kernel_size, stride, padding, data_format, fn)
    if not return_indices:
        # channels-last memory: the NHWC rows, the result in NCHW order
        xt = _layout.channels_last(x) if fmt == "NCHW" else None
        if xt is not None:
            return _layout.contiguous(_forward_c(0, "NHWC", xt, k, s, p, P, Q).astype(
                x.dtype, copy=False).transpose(0, 3, 1, 2))
        return _forward_c(0, fmt, x, k, s, p, P, Q).astype(x.dtype, copy=False)
    xc = _compute_view(x)
    N, C, H, W = xc.shape if fmt == "NCHW" else (xc.shape[0], xc.shape[3]) + xc.shape[1:3]
    shape = (N, C, P, Q) if fmt == "NCHW" else (N, P, Q, C)
    y = np.empty(shape, xc.dtype)
    idx = np.empty(shape, np.int64)
    if y.size:
        _conv.pool2d_forward(0, xc, y, fmt == "NHWC",
                             (N, C, H, W, P, Q, k[0], k[1], s[0], s[1], p[0], p[1]), idx)
    return y.astype(x.dtype, copy=False), idx


def avg_pool2d(x: ArrayLike, kernel_size: int | tuple[int, int],
               stride: int | tuple[int, int] | None = None,
               padding: int | tuple[int, int] = 0, *, data_format: str = "NCHW") -> Array:
    """2D average pooling (``torch.nn.functional.avg_pool2d`` with its defaults: floor mode, the
    zero padding counted in the divisor kernel_h * kernel_w).

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> pytpp.nn.avg_pool2d(np.ones((1, 1, 2, 2), np.float32), 2, padding=1)[0, 0]
    array([[0.25, 0.25],
           [0.25, 0.25]], dtype=float32)
    """
    fn = "pytpp.nn.avg_pool2d"
    fmt, x, _, k, s, p, P, Q = _pool_args(x, kernel_size, stride, padding, data_format, fn)
    xt = _layout.channels_last(x) if fmt == "NCHW" else None
    if xt is not None:
        return _layout.contiguous(_forward_c(1, "NHWC", xt, k, s, p, P, Q).astype(
            x.dtype, copy=False).transpose(0, 3, 1, 2))
    return _forward_c(1, fmt, x, k, s, p, P, Q).astype(x.dtype, copy=False)


def _grad_arg(grad_out, fmt, N, C, P, Q, fn):
    g = A.float_operand(grad_out, "grad_out", fn)
    want = (N, C, P, Q) if fmt == "NCHW" else (N, P, Q, C)
    if g.shape != want:
        raise ValueError(f"{fn}: grad_out must have shape {want}, got {g.shape}")
    return g if fmt == "NCHW" else g.transpose(0, 3, 1, 2)


def max_pool2d_backward(grad_out: ArrayLike, x: ArrayLike, kernel_size: int | tuple[int, int],
                        stride: int | tuple[int, int] | None = None,
                        padding: int | tuple[int, int] = 0, *,
                        data_format: str = "NCHW", indices: ArrayLike | None = None) -> Array:
    """Gradient of :func:`max_pool2d`: each output's gradient goes to the first maximum of its
    window (torch's index), summed where windows overlap.

    Without ``indices`` the maximum of each window is found again in ``x``. With the indices of
    ``max_pool2d(..., return_indices=True)`` (grad_out's shape, integers) ``x`` gives only the
    shape and dtype, and each output's gradient is added at its index in its plane, as torch's
    backward does with its saved indices (an index outside [0, H * W) raises ValueError).

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> x = np.array([[[[1, 3], [2, 0]]]], np.float32)
    >>> pytpp.nn.max_pool2d_backward(np.ones((1, 1, 1, 1), np.float32), x, 2)[0, 0]
    array([[0., 1.],
           [0., 0.]], dtype=float32)
    >>> y, idx = pytpp.nn.max_pool2d(x, 2, return_indices=True)
    >>> pytpp.nn.max_pool2d_backward(np.ones_like(y), x, 2, indices=idx)[0, 0]
    array([[0., 1.],
           [0., 0.]], dtype=float32)
    """
    fn = "pytpp.nn.max_pool2d_backward"
    fmt, x, xn, k, s, p, P, Q = _pool_args(x, kernel_size, stride, padding, data_format, fn)
    N, C, H, W = xn.shape
    g = _grad_arg(grad_out, fmt, N, C, P, Q, fn)
    cdt = _cdt(np.result_type(x.dtype, g.dtype) if g.dtype != x.dtype else x.dtype)
    geom = (N, C, H, W, P, Q, k[0], k[1], s[0], s[1], p[0], p[1])
    if indices is None:
        return _backward_c(0, fmt, g, x, cdt, geom)
    idx = np.asarray(indices)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"{fn}: indices must be integers (max_pool2d's return_indices), "
                        f"got {idx.dtype}")
    want = (N, C, P, Q) if fmt == "NCHW" else (N, P, Q, C)
    if idx.shape != want:
        raise ValueError(f"{fn}: indices must have grad_out's shape {want}, got {idx.shape}")
    nhwc = fmt == "NHWC"
    gc = np.ascontiguousarray(g.transpose(0, 2, 3, 1) if nhwc else g, dtype=cdt)
    ic = np.ascontiguousarray(idx, dtype=np.int64)    # uint64 beyond int64 turns negative
    gx = np.empty((N, H, W, C) if nhwc else (N, C, H, W), cdt)
    if gx.size:
        _conv.pool2d_backward(0, gc, gc, gx, nhwc, geom, ic)
    return gx.astype(x.dtype, copy=False)


def avg_pool2d_backward(grad_out: ArrayLike, x: ArrayLike, kernel_size: int | tuple[int, int],
                        stride: int | tuple[int, int] | None = None,
                        padding: int | tuple[int, int] = 0, *,
                        data_format: str = "NCHW") -> Array:
    """Gradient of :func:`avg_pool2d`: each output's gradient / (kernel_h * kernel_w) to every
    element of its window (padding included, then cropped).

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> pytpp.nn.avg_pool2d_backward(np.ones((1, 1, 1, 1), np.float32),
    ...                              np.zeros((1, 1, 2, 2), np.float32), 2)[0, 0]
    array([[0.25, 0.25],
           [0.25, 0.25]], dtype=float32)
    """
    fn = "pytpp.nn.avg_pool2d_backward"
    fmt, x, xn, k, s, p, P, Q = _pool_args(x, kernel_size, stride, padding, data_format, fn)
    N, C, H, W = xn.shape
    g = _grad_arg(grad_out, fmt, N, C, P, Q, fn)
    return _backward_c(1, fmt, g, x, _cdt(x.dtype),
                       (N, C, H, W, P, Q, k[0], k[1], s[0], s[1], p[0], p[1]))


def adaptive_avg_pool2d(x: ArrayLike, output_size: int | tuple[int, int], *,
                        data_format: str = "NCHW") -> Array:
    """Adaptive average pooling (``torch.nn.functional.adaptive_avg_pool2d``): output cell i
    averages input rows floor(i*H/OH) .. ceil((i+1)*H/OH) - 1 (columns alike), by sums of an
    integral image.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    >>> pytpp.nn.adaptive_avg_pool2d(x, 1)[0, 0]
    array([[4.]], dtype=float32)
    >>> pytpp.nn.adaptive_avg_pool2d(x, 2)[0, 0]
    array([[2., 3.],
           [5., 6.]], dtype=float32)
    """
    fn = "pytpp.nn.adaptive_avg_pool2d"
    fmt = A.data_format(data_format, fn)
    x = A.float_operand(x, "x", fn)
    if x.ndim != 4:
        raise ValueError(f"{fn}: x must be 4-D ({fmt}), got shape {x.shape}")
    OH, OW = A.pair(output_size, "output_size", fn, 1)
    xn = x if fmt == "NCHW" else x.transpose(0, 3, 1, 2)
    N, C, H, W = xn.shape
    if H == 0 or W == 0:
        raise ValueError(f"{fn}: x has an empty spatial size {(H, W)}")
    cdt = _cdt(x.dtype)
    # integral image in float64: the differences of large prefix sums keep float32's accuracy
    ii = np.zeros((N, C, H + 1, W + 1))
    ii[:, :, 1:, 1:] = np.cumsum(np.cumsum(xn, axis=2, dtype=np.float64), axis=3)
    h0 = np.arange(OH) * H // OH
    h1 = -((-(np.arange(OH) + 1) * H) // OH)
    w0 = np.arange(OW) * W // OW
    w1 = -((-(np.arange(OW) + 1) * W) // OW)
    tot = (ii[:, :, h1][:, :, :, w1] - ii[:, :, h0][:, :, :, w1]
           - ii[:, :, h1][:, :, :, w0] + ii[:, :, h0][:, :, :, w0])
    y = tot / ((h1 - h0)[:, None] * (w1 - w0)[None, :])
    return _finish(y.astype(cdt), fmt, x.dtype)
