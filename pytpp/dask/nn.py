"""The element-wise ``pytpp.nn`` functions and ``softmax`` on dask arrays: one call per block.

>>> import numpy as np, dask.array as da, pytpp.dask
>>> x = da.from_array(np.array([[-1.0, 2.0], [3.0, -4.0]]), chunks=1)
>>> pytpp.dask.nn.relu(x).compute()
array([[0., 2.],
       [3., 0.]])
"""
import dask.array as da
import numpy as np

from pytpp import _validate
from pytpp.dask import _blocks

# element-wise functions of one input (block by block, any chunking)
UNARY = ("relu", "gelu", "tanh", "sigmoid", "exp")
# backward forms: (grad, forward input or output)
BACKWARD = ("relu_backward", "gelu_backward", "tanh_backward", "sigmoid_backward",
            "exp_backward")


def _result(dt):
    dt = np.dtype(dt)
    if dt.kind in "biu":
        return _validate.F64
    if dt.kind != "f" and dt != _validate.BF16:
        raise TypeError(f"dtype {dt} has no pytpp kernel; expected a real floating dtype")
    return dt


def _unary(name):
    def fn(x, **kwargs):
        x = da.asanyarray(x)
        try:
            dtype = _result(x.dtype)
        except TypeError as e:
            raise TypeError(f"pytpp.dask.nn.{name}: x: {e}") from None
        return x.map_blocks(_blocks.elementwise, op=name, dtype=dtype, **kwargs)
    fn.__name__ = name
    fn.__doc__ = (f"``pytpp.nn.{name}`` on a dask array, block by block (keyword arguments are "
                  f"passed on).")
    return fn


def _backward(name):
    def fn(grad, x, **kwargs):
        grad, x = da.asanyarray(grad), da.asanyarray(x)
        if grad.shape != x.shape:
            raise ValueError(f"pytpp.dask.nn.{name}: grad has shape {grad.shape} but the second "
                             f"input has shape {x.shape}")
        x = x.rechunk(grad.chunks)
        dtype = _validate.promote(_result(grad.dtype), _result(x.dtype))
        return da.map_blocks(_blocks.elementwise, grad, x, op=name, dtype=dtype, **kwargs)
    fn.__name__ = name
    fn.__doc__ = f"``pytpp.nn.{name}`` on dask arrays (x is rechunked like grad)."
    return fn


for _name in UNARY:
    globals()[_name] = _unary(_name)
for _name in BACKWARD:
    globals()[_name] = _backward(_name)


def softmax(x, axis=-1, *, approx=False, rechunk=True):
    """``pytpp.nn.softmax`` along `axis` of a dask array.

    The axis must lie in one chunk: it is rechunked to one (``rechunk=True``), or a ValueError
    says so (``rechunk=False``). Other axes keep their chunks.

    Examples
    --------
    >>> import numpy as np, dask.array as da, pytpp.dask
    >>> x = da.zeros((2, 4), chunks=(1, 2))
    >>> pytpp.dask.nn.softmax(x).compute()
    array([[0.25, 0.25, 0.25, 0.25],
           [0.25, 0.25, 0.25, 0.25]])
    """
    fn = "pytpp.dask.nn.softmax"
    x = da.asanyarray(x)
    if x.ndim == 0:
        raise ValueError(f"{fn}: x must have at least one dimension")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"{fn}: axis {axis} is out of bounds for an array of {x.ndim} dims")
    axis %= x.ndim
    if len(x.chunks[axis]) > 1:
        if not rechunk:
            raise ValueError(f"{fn}: axis {axis} spans {len(x.chunks[axis])} chunks; softmax "
                             f"needs it in one (pass rechunk=True, or rechunk it first)")
        x = x.rechunk({axis: -1})
    try:
        dtype = _result(x.dtype)
    except TypeError as e:
        raise TypeError(f"{fn}: x: {e}") from None
    return x.map_blocks(_blocks.elementwise, op="softmax", axis=axis, approx=approx, dtype=dtype)


def _trailing_in_one_chunk(x, k, fn, rechunk):
    """x with its last k axes in one chunk each (rechunked, or a ValueError)."""
    split = [a for a in range(x.ndim - k, x.ndim) if len(x.chunks[a]) > 1]
    if split and not rechunk:
        raise ValueError(f"{fn}: axes {split} span several chunks; the normalised axes must be in "
                         f"one (pass rechunk=True, or rechunk them first)")
    return x.rechunk({a: -1 for a in split}) if split else x


def _norm(name, x, normalized_shape, rechunk, **kwargs):
    fn = f"pytpp.dask.nn.{name}"
    x = da.asanyarray(x)
    shape = (normalized_shape,) if np.ndim(normalized_shape) == 0 else tuple(normalized_shape)
    if len(shape) > x.ndim or tuple(x.shape[x.ndim - len(shape):]) != tuple(shape):
        raise ValueError(f"{fn}: normalized_shape {shape} does not match the trailing dims of x "
                         f"(shape {x.shape})")
    try:
        dtype = _result(x.dtype)
    except TypeError as e:
        raise TypeError(f"{fn}: x: {e}") from None
    x = _trailing_in_one_chunk(x, len(shape), fn, rechunk)
    return x.map_blocks(_blocks.elementwise, op=name, normalized_shape=shape, dtype=dtype,
                        **kwargs)


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5, *, rechunk=True):
    """``pytpp.nn.layer_norm`` of a dask array: the normalised (trailing) axes in one chunk
    (rechunked, or a ValueError with ``rechunk=False``), the leading ones as they are chunked;
    weight and bias (numpy arrays of the normalised shape) travel with the tasks.

    Examples
    --------
    >>> import numpy as np, dask.array as da, pytpp.dask
    >>> x = da.from_array(np.array([[1.0, 3.0], [2.0, 6.0]]), chunks=1)
    >>> pytpp.dask.nn.layer_norm(x, 2, eps=0.0).compute()
    array([[-1.,  1.],
           [-1.,  1.]])
    """
    return _norm("layer_norm", x, normalized_shape, rechunk, weight=weight, bias=bias, eps=eps)


def rms_norm(x, normalized_shape, weight=None, eps=1e-6, *, rechunk=True):
    """``pytpp.nn.rms_norm`` of a dask array, chunked as :func:`layer_norm`."""
    return _norm("rms_norm", x, normalized_shape, rechunk, weight=weight, eps=eps)


def linear(x, w, bias=None, *, activation=None, residual=None):
    """``pytpp.nn.linear`` on a dask array x (..., in_features), chunked along its leading axes
    (the feature axis rechunked to one chunk): each block one fused GEMM + bias + activation
    (+ residual, a dask array of the output's shape). The weight and bias become one task each,
    sent to a worker once, not embedded in every block's task.

    Examples
    --------
    >>> import numpy as np, dask.array as da, pytpp.dask
    >>> x = da.ones((4, 3), chunks=(1, 3))
    >>> pytpp.dask.nn.linear(x, np.ones((2, 3)), np.array([0.0, -5.0]),
    ...                      activation="relu").compute()
    array([[3., 0.],
           [3., 0.],
           [3., 0.],
           [3., 0.]])
    """
    from dask import delayed
    fn = "pytpp.dask.nn.linear"
    x = da.asanyarray(x)
    w = np.asarray(w)
    if w.ndim != 2 or x.ndim < 1 or x.shape[-1] != w.shape[1]:
        raise ValueError(f"{fn}: x (shape {x.shape}) and w (shape {w.shape}) do not match as "
                         f"(..., in_features) and (out_features, in_features)")
    try:
        dtype = _validate.promote(_result(x.dtype), _result(w.dtype))
    except TypeError as e:
        raise TypeError(f"{fn}: {e}") from None
    x = _trailing_in_one_chunk(x, 1, fn, True)
    n = w.shape[0]
    chunks = x.chunks[:-1] + ((n,),)
    args = [x, delayed(w, pure=True), None if bias is None else delayed(np.asarray(bias), pure=True)]
    if residual is not None:
        residual = da.asanyarray(residual)
        if residual.shape != x.shape[:-1] + (n,):
            raise ValueError(f"{fn}: residual has shape {residual.shape}; expected "
                             f"{x.shape[:-1] + (n,)}")
        args.append(residual.rechunk(chunks))
    return da.map_blocks(_blocks.linear, *args, activation=activation, chunks=chunks,
                         dtype=dtype)


def conv2d(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1, *, data_format="NCHW",
           activation=None):
    """:func:`pytpp.nn.conv2d` over the batch chunks of a dask array: each chunk of N is one
    task (the other axes are gathered in one chunk), the weight packed once
    (:class:`pytpp.nn.PackedConvWeight`) and sent to the workers as one object of the graph.

    Examples
    --------
    >>> import numpy as np, dask.array as da, pytpp.dask
    >>> x = da.ones((4, 2, 5, 5), chunks=(1, 2, 5, 5), dtype=np.float32)
    >>> y = pytpp.dask.nn.conv2d(x, np.ones((3, 2, 3, 3), np.float32), padding=1)
    >>> y.shape, float(y[0, 0, 2, 2].compute())
    ((4, 3, 5, 5), 18.0)
    """
    from dask import delayed

    import pytpp.nn
    fn = "pytpp.dask.nn.conv2d"
    x = da.asanyarray(x)
    if x.ndim != 4:
        raise ValueError(f"{fn}: x must be 4-D (N, C, H, W) or (N, H, W, C), got shape {x.shape}")
    pw = w if isinstance(w, pytpp.nn.PackedConvWeight) else pytpp.nn.PackedConvWeight(w)
    kwargs = dict(stride=stride, padding=padding, dilation=dilation, groups=groups,
                  data_format=data_format, activation=activation)
    # the arguments checked and the result's shape and dtype found on an empty batch
    probe = pytpp.nn.conv2d(np.zeros((0,) + x.shape[1:], x.dtype), pw, bias, **kwargs)
    x = x.rechunk({1: -1, 2: -1, 3: -1})
    chunks = (x.chunks[0],) + tuple((d,) for d in probe.shape[1:])
    b = None if bias is None else delayed(np.asarray(bias), pure=True)
    return da.map_blocks(_blocks.conv2d, x, delayed(pw, pure=True), b, chunks=chunks,
                         dtype=probe.dtype, **kwargs)


__all__ = list(UNARY) + list(BACKWARD) + ["softmax", "layer_norm", "rms_norm", "linear",
                                          "conv2d"]
