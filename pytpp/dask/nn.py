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


__all__ = list(UNARY) + list(BACKWARD) + ["softmax"]
