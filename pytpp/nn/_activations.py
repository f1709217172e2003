"""Activations, softmax and dropout on numpy arrays, run by the element-wise TPP engine.

Any shape and strides: layouts that fold into rows of unit-stride elements (C or
Fortran-ordered slices, negative outer strides, ...) run in place with one kernel call; others go
through a contiguous copy. Large arrays use ``pytpp.get_num_threads()`` threads.

dtypes follow numpy's ufuncs: float64, float32 and bfloat16 run as they are, float16 computes in
float32 and returns float16, integers and bools compute in float64. ``out=`` takes any dtype the
result casts to (same_kind), any strides and byte order, and may overlap the inputs.
"""
from __future__ import annotations

import operator
import secrets
from collections.abc import Callable
from typing import Literal, TypeVar, overload

import numpy as np

from pytpp import _layout, _validate
from pytpp._core import _eltwise as _ew
from pytpp._core import _runtime
from pytpp._typing import Approx, Array, ArrayLike, Seed
from pytpp.tpp import _eltwise as _eltwise_tpp

BF16 = _validate.BF16
FLOATS = _validate.ENGINE_FLOATS
_F64, _F32, _F16 = _validate.F64, _validate.F32, _validate.F16
_DT = {_F64: _ew.F64, _F32: _ew.F32, BF16: _ew.BF16}   # storage dtype codes

# op codes by name, from the C op lists (through the TPP layer's tables)
_U = _eltwise_tpp.MATH_CODES
_B = _eltwise_tpp.BACKWARD_CODES


def _operand(x, name, fn):
    """(array the engine reads, numpy result dtype): float16 widens to float32, integers and
    bools to float64, non-native byte order to native."""
    arr = _validate.elementwise_operand(x, name, fn)
    if arr.dtype == _F16:
        return arr.astype(_F32), _F16
    return arr, arr.dtype


def _engine(arr):
    return arr.astype(_F32) if arr.dtype == _F16 else arr


def _target(out, shape, result, fn, like=None):
    """The array the engine writes: `out` itself when it has an engine dtype in native byte
    order, else a temporary that :func:`_finish` casts into `out` (or to `result`); a new
    result takes the memory order of `like` (as numpy's ufuncs, order 'K')."""
    if out is None:
        if like is not None and like.shape == shape:
            return np.empty_like(like, dtype=_validate.engine_dtype(result))
        return np.empty(shape, _validate.engine_dtype(result))
    _validate.check_out(out, shape, result, fn)
    if out.dtype in FLOATS:
        return out
    return np.empty(shape, _validate.engine_dtype(result))


def _finish(target, out, result):
    if out is None:
        return target if target.dtype == result else target.astype(result)
    if target is not out:
        _layout.copy_into(out, target)   # same_kind was checked against the result
    return out


# the shortest rows the kernels run on strided arrays: x[:, ::2] of 2048 x 4096 float32 went
# as 4M rows of one element, 44x the time of the contiguous copy and one long row
_MIN_ROW = 16


def _plan2d(shape, arrays):
    """(m, n, [ld per array]) such that every array is m rows of n unit-stride elements with a
    constant row stride; None when no such split exists."""
    dims = [i for i, s in enumerate(shape) if s != 1]
    if any(a.strides[i] % a.itemsize for a in arrays for i in dims):
        return None
    for k in range(len(dims) + 1):           # dims[k:] are the row, dims[:k] fold into m
        inner, outer = dims[k:], dims[:k]
        ok = True
        lds = []
        for a in arrays:
            es = [s // a.itemsize for s in a.strides]
            expect = 1
            for i in reversed(inner):
                if es[i] != expect:
                    ok = False
                    break
                expect *= shape[i]
            if not ok:
                break
            for j in range(len(outer) - 1):
                if es[outer[j]] != es[outer[j + 1]] * shape[outer[j + 1]]:
                    ok = False
                    break
            if not ok:
                break
            lds.append(es[outer[-1]] if outer else 0)
        if ok:
            n = int(np.prod([shape[i] for i in inner], dtype=np.int64))
            m = int(np.prod([shape[i] for i in outer], dtype=np.int64))
            if m > 1 and n < _MIN_ROW:
                return None   # rows of a few elements: a contiguous copy runs faster
            if not outer:
                lds = [n] * len(arrays)
            return m, n, lds
    return None


def _cdt(*dts):
    """Compute dtype code: float64 if any storage dtype is, else float32."""
    return _ew.F64 if _F64 in dts else _ew.F32


def _fold(shape, arrays):
    """(m, [row stride per array]) when the dims of `shape` fold into one strided dimension for
    every array (size-1 dims ignored); None otherwise."""
    dims = [i for i, s in enumerate(shape) if s != 1]
    m = int(np.prod(shape, dtype=np.int64)) if shape else 1
    lds = []
    for a in arrays:
        if any(a.strides[i] % a.itemsize for i in dims):
            return None
        es = [a.strides[i] // a.itemsize for i in range(len(shape))]
        for j in range(len(dims) - 1):
            if es[dims[j]] != es[dims[j + 1]] * shape[dims[j + 1]]:
                return None
        lds.append(es[dims[-1]] if dims else 0)
    return m, lds


def _dense_strides(a):
    """a's element strides over its axes longer than 1 when it fills one block (in any axis
    order), else None."""
    if _layout.dense_order(a) is None:
        return None
    return tuple(s // a.itemsize for s, n in zip(a.strides, a.shape) if n > 1)


def _run(kind, op, fn, ins, out, bits=None, ldm=0, **kw):
    """Run one element-wise call over same-shape arrays `ins` into `out` (validated)."""
    shape = out.shape
    if out.size == 0:
        return out
    arrays = list(ins) + [out]
    if all(a.flags.c_contiguous for a in arrays):   # the common case, without the stride walk
        plan = (1, out.size, [out.size] * len(arrays))
    elif bits is None and None not in (orders := {_dense_strides(a) for a in arrays}) and len(
            orders) == 1:
        # every array one block in the same memory order (Fortran order, transposed views):
        # element i of each lies at the same offset, so the block is one long row
        plan = (1, out.size, [out.size] * len(arrays))
    else:
        plan = _plan2d(shape, arrays)
    if plan is not None and bits is not None:
        m, n, _ = plan
        if m > 1 and n % 8:
            plan = None
    if plan is None:
        # general strides: contiguous copies, then write back (straight into a C-ordered out)
        tmp_in = [_layout.contiguous(a) for a in ins]
        if out.flags.c_contiguous:
            return _run(kind, op, fn, tmp_in, out, bits=bits, ldm=ldm, **kw)
        tmp_out = np.empty(shape, out.dtype)
        _run(kind, op, fn, tmp_in, tmp_out, bits=bits, ldm=ldm, **kw)
        _layout.copy_into(out, tmp_out)
        return out
    m, n, lds = plan
    cdt = _cdt(*[a.dtype for a in arrays])
    spec = tuple((a, ld, _DT[a.dtype], 0) for a, ld in zip(ins, lds[:-1]))
    if bits is not None:
        ldm = n // 8 if m > 1 else (n + 7) // 8
    _ew.run(kind, op, m, n, spec, (out, lds[-1], _DT[out.dtype]), cdt,
            _runtime.active_isa_index(), bits, ldm, **kw)
    return out


def _plain_out(x, out):
    """`out` (or a new array) when x and out are plain C-contiguous arrays of one engine dtype
    that do not partially overlap: the common call needs no more Python than this. None
    otherwise (the general path then checks and converts)."""
    if type(x) is not np.ndarray or not x.flags.c_contiguous or not x.size:
        return None
    if out is None:
        return np.empty(x.shape, x.dtype) if x.dtype in _DT else None
    if (type(out) is np.ndarray and out.dtype == x.dtype and x.dtype in _DT
            and out.shape == x.shape and out.flags.c_contiguous and out.flags.writeable
            and (out is x or not np.may_share_memory(out, x))):
        return out
    return None


def _unary(name, code, x, out):
    y = _plain_out(x, out)
    if y is not None:
        dt = _DT[x.dtype]
        _ew.run(_ew.KIND_UNARY, code, 1, x.size, ((x, x.size, dt, 0),), (y, x.size, dt),
                _ew.F64 if dt == _ew.F64 else _ew.F32, _runtime.active_isa_index())
        return y
    fn = f"pytpp.nn.{name}"
    x, result = _operand(x, "x", fn)
    target = _target(out, x.shape, result, fn, like=x)
    (x,) = _validate.unalias(target, (x,))
    _run(_ew.KIND_UNARY, code, fn, [x], target)
    return _finish(target, out, result)


def _approx_code(name, approx, fn, depth=0):
    """The op code under approx=; `depth`: calls between the user's and this one's caller."""
    return _eltwise_tpp.resolve_unary(name, approx, fn, stacklevel=4 + depth)


_UNARY_DOC = {
    "x": """x : array_like
        Input of any shape and strides: float64, float32 or bfloat16 (float16 computes in
        float32; integers and bools in float64).""",
    "out": """out : ndarray, optional
        Where to write the result: x's shape, any dtype the result casts to (same_kind); it may
        be x itself or overlap it.""",
    "returns": """Returns
    -------
    ndarray
        The result, x's dtype (float64 for integer input), or `out`.""",
}


_F = TypeVar("_F", bound=Callable[..., Array])


def _unary_doc(f: _F) -> _F:
    """Fill the shared x / out / Returns parts of an element-wise function's docstring."""
    for key, text in _UNARY_DOC.items():
        f.__doc__ = f.__doc__.replace("{" + key + "}", text)
    return f


@_unary_doc
def relu(x: ArrayLike, *, out: Array | None = None) -> Array:
    """Rectified linear unit ``max(x, 0)``, element-wise.

    Parameters
    ----------
    {x}
    {out}

    {returns}

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> pytpp.nn.relu(np.array([-1.0, 0.5, 2.0]))
    array([0. , 0.5, 2. ])
    """
    return _unary("relu", _U["relu"], x, out)


@_unary_doc
def exp(x: ArrayLike, *, approx: Approx = False, out: Array | None = None) -> Array:
    """Exponential, element-wise.

    ``approx=True``: 2^n * 2^y with a degree-4 polynomial (float32 compute; relative error bound
    in docs/eltwise.md). ``approx=False``: within ~1 ulp.

    Parameters
    ----------
    {x}
    approx : bool or str
        False: within ~1 ulp. True (or 'approx'): 2^n * 2^y with a degree-4 polynomial
        (float32 compute; relative error bound in docs/eltwise.md).
    {out}

    {returns}

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> pytpp.nn.exp(np.array([0.0, 1.0], np.float32))
    array([1.       , 2.7182817], dtype=float32)
    """
    return _unary("exp", _approx_code("exp", approx, "pytpp.nn.exp"), x, out)


@_unary_doc
def tanh(x: ArrayLike, *, approx: Approx = False, out: Array | None = None) -> Array:
    """Hyperbolic tangent, element-wise.

    ``approx=True`` or ``'pade'``: Pade [7/8] rational function with clamped input;
    ``'minimax'``: 16-interval piecewise polynomial; ``False``: within a few ulp.

    Parameters
    ----------
    {x}
    approx : bool or str
        False: within a few ulp. True or 'pade': Pade [7/8] rational function with clamped
        input; 'minimax': piecewise minimax polynomial (float32 compute).
    {out}

    {returns}

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> pytpp.nn.tanh(np.array([0.0, 1.0]))
    array([0.        , 0.76159416])
    """
    return _unary("tanh", _approx_code("tanh", approx, "pytpp.nn.tanh"), x, out)


@_unary_doc
def sigmoid(x: ArrayLike, *, approx: Approx = False, out: Array | None = None) -> Array:
    """Logistic sigmoid ``1 / (1 + exp(-x))``, element-wise.

    ``approx=True``: from the approximate exp of ``-|x|`` (``1 / (1 + e)`` or ``e / (1 + e)``,
    relative error that of the exp); ``'pade'``: ``(tanh_pade(x/2) + 1) / 2``; ``False``: within
    a few ulp. Bounds in docs/eltwise.md.

    Parameters
    ----------
    {x}
    approx : bool or str
        False: within a few ulp. True (or 'approx'): from the approximate exp of ``-|x|``;
        'pade': (tanh_pade(x/2) + 1) / 2 (float32 compute; bounds in docs/eltwise.md).
    {out}

    {returns}

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> pytpp.nn.sigmoid(np.array([0.0]))
    array([0.5])
    """
    return _unary("sigmoid", _approx_code("sigmoid", approx, "pytpp.nn.sigmoid"), x, out)


def _gelu_name(approximate, fn):
    if approximate not in ("none", "tanh"):
        raise ValueError(f"{fn}: approximate must be 'none' or 'tanh', got {approximate!r}")
    return "gelu" if approximate == "none" else "gelu_tanh"


@_unary_doc
def gelu(x: ArrayLike, approximate: str = "none", *, approx: Approx = False,
         out: Array | None = None) -> Array:
    """Gaussian error linear unit ``x * Phi(x)`` (``approximate='none'``, erf form) or its tanh
    form ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` (``approximate='tanh'``), as in
    ``torch.nn.functional.gelu``.

    ``approx=True`` computes the erf form by a 16-interval minimax polynomial (AVX2: the exact
    formula with a shorter exp) and the tanh form through the Pade tanh (float32 compute; bounds
    in docs/eltwise.md).

    Parameters
    ----------
    {x}
    approximate : {'none', 'tanh'}
        The formula, as torch.nn.functional.gelu names it: the erf form or the tanh form.
    approx : bool or str
        How it is computed: False, within a few ulp of the chosen formula; True, the fast
        approximation of that formula ('minimax' for the erf form, 'pade' for the tanh form;
        float32 compute).
    {out}

    {returns}

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> pytpp.nn.gelu(np.array([-1.0, 0.0, 1.0])).round(6)
    array([-0.158655,  0.      ,  0.841345])
    """
    fn = "pytpp.nn.gelu"
    return _unary("gelu", _approx_code(_gelu_name(approximate, fn), approx, fn), x, out)


def _backward(name, code, grad, x, xname, out):
    y = _plain_out(grad, out)
    if (y is not None and type(x) is np.ndarray and x.dtype == grad.dtype and x.shape == grad.shape
            and x.flags.c_contiguous and (out is None or not np.may_share_memory(out, x))):
        dt = _DT[grad.dtype]
        _ew.run(_ew.KIND_BINARY, code, 1, grad.size, ((grad, grad.size, dt, 0), (x, x.size, dt, 0)),
                (y, y.size, dt), _ew.F64 if dt == _ew.F64 else _ew.F32, _runtime.active_isa_index())
        return y
    fn = f"pytpp.nn.{name}"
    g = _validate.elementwise_operand(grad, "grad", fn)
    v = _validate.elementwise_operand(x, xname, fn)
    if g.shape != v.shape:
        raise ValueError(f"{fn}: grad has shape {g.shape} but {xname} has shape {v.shape}")
    result = _validate.promote(g.dtype, v.dtype)
    target = _target(out, g.shape, result, fn, like=g)
    g, v = _validate.unalias(target, (_engine(g), _engine(v)))
    _run(_ew.KIND_BINARY, code, fn, [g, v], target)
    return _finish(target, out, result)


_BACKWARD_DOC = """Parameters
    ----------
    grad : array_like
        The incoming gradient (dtypes as x in :func:`relu`).
    {xname} : array_like
        {xdesc}, of grad's shape.{approximate}
    out : ndarray, optional
        Where to write the gradient: grad's shape, any dtype the result casts to (same_kind);
        it may overlap the inputs.

    Returns
    -------
    ndarray
        The gradient, in numpy's promotion of grad's and {xname}'s dtypes, or `out`.
"""
_BACKWARD_INPUT = {"relu": ("x", "The forward input"), "tanh": ("y", "The forward output tanh(x)"),
                   "sigmoid": ("y", "The forward output sigmoid(x)"),
                   "exp": ("y", "The forward output exp(x)"), "gelu": ("x", "The forward input")}


def _backward_doc(f: _F) -> _F:
    """Fill the shared Parameters/Returns of an activation's backward function."""
    xname, xdesc = _BACKWARD_INPUT[f.__name__[:-len("_backward")]]
    approximate = ("\n    approximate : {'none', 'tanh'}\n        The form whose exact derivative "
                   "is taken.") if f.__name__ == "gelu_backward" else ""
    f.__doc__ = f.__doc__.replace("{params}", _BACKWARD_DOC.format(
        xname=xname, xdesc=xdesc, approximate=approximate).rstrip() + "\n")
    return f


@_backward_doc
def relu_backward(grad: ArrayLike, x: ArrayLike, *, out: Array | None = None) -> Array:
    """Gradient of :func:`relu`: ``grad * (x > 0)``.

    {params}
    Examples
    --------
    >>> import numpy as np, pytpp
    >>> pytpp.nn.relu_backward(np.ones(3), np.array([-1.0, 0.0, 2.0]))
    array([0., 0., 1.])
    """
    return _backward("relu_backward", _B["relu_inv"], grad, x, "x", out)


@_backward_doc
def tanh_backward(grad: ArrayLike, y: ArrayLike, *, out: Array | None = None) -> Array:
    """Gradient of :func:`tanh` from its output ``y``: ``grad * (1 - y^2)``.

    {params}
    Examples
    --------
    >>> import numpy as np, pytpp
    >>> pytpp.nn.tanh_backward(np.ones(2), np.array([0.0, 0.5]))
    array([1.  , 0.75])
    """
    return _backward("tanh_backward", _B["tanh_inv"], grad, y, "y", out)


@_backward_doc
def sigmoid_backward(grad: ArrayLike, y: ArrayLike, *, out: Array | None = None) -> Array:
    """Gradient of :func:`sigmoid` from its output ``y``: ``grad * y * (1 - y)``.

    {params}
    Examples
    --------
    >>> import numpy as np, pytpp
    >>> pytpp.nn.sigmoid_backward(np.ones(1), np.array([0.5]))
    array([0.25])
    """
    return _backward("sigmoid_backward", _B["sigmoid_inv"], grad, y, "y", out)


@_backward_doc
def exp_backward(grad: ArrayLike, y: ArrayLike, *, out: Array | None = None) -> Array:
    """Gradient of :func:`exp` from its output ``y``: ``grad * y``.

    {params}
    Examples
    --------
    >>> import numpy as np, pytpp
    >>> pytpp.nn.exp_backward(np.full(1, 2.0), np.array([3.0]))
    array([6.])
    """
    return _backward("exp_backward", _B["exp_inv"], grad, y, "y", out)


@_backward_doc
def gelu_backward(grad: ArrayLike, x: ArrayLike, approximate: str = "none", *,
                  out: Array | None = None) -> Array:
    """Gradient of :func:`gelu` (exact derivative of the chosen form) at the input ``x``.

    {params}
    Examples
    --------
    >>> import numpy as np, pytpp
    >>> pytpp.nn.gelu_backward(np.ones(2), np.array([0.0, 1.0])).round(6)
    array([0.5     , 1.083315])
    """
    fn = "pytpp.nn.gelu_backward"
    name = _gelu_name(approximate, fn)
    return _backward("gelu_backward", _B[name + "_inv"], grad, x, "x", out)


def _axes(axis, dim, ndim, fn):
    """Normalised tuple of the axes a softmax runs over: an int, a tuple of ints, None (every
    axis, scipy's default) or torch's `dim`."""
    if dim is not None:
        if axis != -1:
            raise TypeError(f"{fn}: give axis or dim (torch's name for it), not both")
        axis = dim
    if axis is None:
        return tuple(range(ndim))
    items = axis if isinstance(axis, (tuple, list)) else (axis,)
    res = []
    for ax in items:
        try:
            ax = int(operator.index(ax))
        except TypeError:
            raise TypeError(f"{fn}: axis must be an int, a tuple of ints or None, got "
                            f"{type(ax).__name__}") from None
        if not -ndim <= ax < ndim:
            raise ValueError(f"{fn}: axis {ax} is out of bounds for an array of {ndim} dims")
        res.append(ax % ndim)
    if len(set(res)) != len(res):
        raise ValueError(f"{fn}: repeated axis in {axis!r}")
    return tuple(res)


def _softmax_approx(approx, fn):
    """1 for the approximate exp, 0 for the exact one (the approx= vocabulary of exp)."""
    return int(_approx_code("exp", approx, fn, depth=1) != _U["exp"])


def softmax(x: ArrayLike, axis: int | tuple[int, ...] | None = -1, *, approx: Approx = False,
            out: Array | None = None, dim: int | tuple[int, ...] | None = None) -> Array:
    """Softmax along `axis`: ``exp(x - max) / sum(exp(x - max))``, one fused row kernel (max,
    exp and sum, scale: paper 5.1.1) per row.

    Parameters
    ----------
    x : array_like
        float64, float32, bfloat16 (float16 computes in float32; integers in float64).
    axis : int, tuple of ints or None
        The axes normalised together (default: the last one, the fast path); None normalises
        over every element, as ``scipy.special.softmax``.
    approx : bool
        Use the approximate exp (float32 compute).
    out : ndarray, optional
        Output of x's shape, any dtype the result casts to; may be x itself or overlap it.
    dim : int, optional
        torch's name for `axis` (give one of them).

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> pytpp.nn.softmax(np.array([[0.0, 0.0], [0.0, np.log(3.0)]]))
    array([[0.5 , 0.5 ],
           [0.25, 0.75]])
    >>> pytpp.nn.softmax(np.zeros((2, 2)), axis=None)
    array([[0.25, 0.25],
           [0.25, 0.25]])
    """
    if (dim is None and getattr(x, "ndim", 0) and (axis == -1 or axis == x.ndim - 1)
            and (approx is False or approx is True)):
        y = _plain_out(x, out)
        if y is not None:
            n = x.shape[-1]
            dt = _DT[x.dtype]
            _ew.run(_ew.KIND_SOFTMAX, 0, x.size // n, n, ((x, n, dt, 0),), (y, n, dt),
                    _ew.F64 if dt == _ew.F64 else _ew.F32, _runtime.active_isa_index(),
                    approx=int(approx))
            return y
    fn = "pytpp.nn.softmax"
    x, result = _operand(x, "x", fn)
    axes = _axes(axis, dim, x.ndim, fn)
    ap = _softmax_approx(approx, fn)
    target = _target(out, x.shape, result, fn)
    (x,) = _validate.unalias(target, (x,))
    if target.size:
        if x.ndim == 0:
            target[()] = 1.0
        elif len(axes) == 1:
            _softmax_axis(x, axes[0], ap, target)
        else:
            # the normalised axes last, flattened into one row per remaining index
            last = tuple(range(x.ndim - len(axes), x.ndim))
            xv = np.moveaxis(x, axes, last)
            rows = _layout.contiguous(xv).reshape(xv.shape[:x.ndim - len(axes)] + (-1,))
            res = np.empty(rows.shape, target.dtype)
            _softmax_axis(rows, rows.ndim - 1, ap, res)
            _layout.copy_into(np.moveaxis(target, axes, last), res.reshape(xv.shape))
    return _finish(target, out, result)


def _softmax_axis(x, ax, approx, out):
    """out = softmax of x along one axis (same shapes, engine dtypes, out not overlapping x
    unless it is x)."""
    n = x.shape[ax]
    if ax == x.ndim - 1 and x.flags.c_contiguous and out.flags.c_contiguous:
        m = x.size // n     # the common case, without moveaxis and the stride walk
        _ew.run(_ew.KIND_SOFTMAX, 0, m, n, ((x, n, _DT[x.dtype], 0),), (out, n, _DT[out.dtype]),
                _cdt(x.dtype, out.dtype), _runtime.active_isa_index(), approx=approx)
        return
    xv = np.moveaxis(x, ax, -1)
    ov = np.moveaxis(out, ax, -1)
    plan = None
    if n == 1 or (xv.strides[-1] == xv.itemsize and ov.strides[-1] == ov.itemsize):
        fold = _fold(xv.shape[:-1], [xv, ov])
        if fold is not None:
            m, lds = fold
            plan = (m, n, [ld if m > 1 else n for ld in lds])
    if plan is None:
        xc = _layout.contiguous(xv)
        oc = ov if ov.flags.c_contiguous else np.empty(xc.shape, out.dtype)
        _softmax_axis(xc, xc.ndim - 1, approx, oc)
        if oc is not ov:
            _layout.copy_into(ov, oc)
        return
    m, n, lds = plan
    _ew.run(_ew.KIND_SOFTMAX, 0, m, n, ((xv, lds[0], _DT[x.dtype], 0),),
            (ov, lds[1], _DT[out.dtype]), _cdt(x.dtype, out.dtype),
            _runtime.active_isa_index(), approx=approx)


def softmax_backward(grad: ArrayLike, y: ArrayLike, axis: int | tuple[int, ...] | None = -1, *,
                     out: Array | None = None, dim: int | tuple[int, ...] | None = None
                     ) -> Array:
    """Gradient of :func:`softmax` from its output ``y``: ``y * (grad - sum(grad * y, axis))``.

    Parameters
    ----------
    grad, y : array_like
        The incoming gradient and the forward output, of one shape.
    axis : int, tuple of ints or None
        The axes the softmax normalised (as in :func:`softmax`).
    out : ndarray, optional
        Where to write the gradient (same_kind casting; may overlap the inputs).
    dim : int, optional
        torch's name for `axis`.

    Returns
    -------
    ndarray
        numpy's promotion of grad's and y's dtypes.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> pytpp.nn.softmax_backward(np.array([1.0, 0.0]), np.array([0.5, 0.5]))
    array([ 0.25, -0.25])
    """
    fn = "pytpp.nn.softmax_backward"
    g = _validate.elementwise_operand(grad, "grad", fn)
    yv = _validate.elementwise_operand(y, "y", fn)
    if g.shape != yv.shape:
        raise ValueError(f"{fn}: grad has shape {g.shape} but y has shape {yv.shape}")
    axes = _axes(axis, dim, g.ndim, fn)
    result = _validate.promote(g.dtype, yv.dtype)
    cdt = _F64 if result == _F64 else _F32
    g32, y32 = g.astype(cdt, copy=False), yv.astype(cdt, copy=False)
    res = y32 * (g32 - (g32 * y32).sum(axis=axes, keepdims=True))
    if out is None:
        return res.astype(result, copy=False)
    _validate.check_out(out, g.shape, result, fn)
    np.copyto(out, res, casting="unsafe")   # res is a new array: any overlap is harmless
    return out


def _seed_value(seed, fn):
    """A 64-bit generator key: fresh entropy for None, the int itself (modulo 2**64), or a draw
    from a numpy Generator / SeedSequence (reproducible from its state)."""
    if seed is None:
        return secrets.randbits(64)
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(0, 2 ** 64, dtype=np.uint64))
    if isinstance(seed, np.random.SeedSequence):
        return int(seed.generate_state(1, np.uint64)[0])
    if isinstance(seed, (bool, np.bool_)):
        raise TypeError(f"{fn}: seed must be None, an int, a numpy.random.Generator or a "
                        f"SeedSequence, got a bool")
    try:
        return operator.index(seed) & (2 ** 64 - 1)
    except TypeError:
        raise TypeError(f"{fn}: seed must be None, an int, a numpy.random.Generator or a "
                        f"SeedSequence, got {type(seed).__name__}") from None


def _probability(p, fn):
    try:
        p = float(p)
    except (TypeError, ValueError):
        raise TypeError(f"{fn}: p must be a real number, got {type(p).__name__}") from None
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{fn}: p must be in [0, 1), got {p}")
    return p


@overload
def dropout(x: ArrayLike, p: float = ..., training: bool = ..., *, seed: Seed = ...,
            return_mask: Literal[False] = ..., out: Array | None = ...) -> Array: ...
@overload
def dropout(x: ArrayLike, p: float = ..., training: bool = ..., *, seed: Seed = ...,
            return_mask: Literal[True], out: Array | None = ...) -> tuple[Array, Array]: ...
@overload
def dropout(x: ArrayLike, p: float = ..., training: bool = ..., *, seed: Seed = ...,
            return_mask: bool, out: Array | None = ...) -> Array | tuple[Array, Array]: ...
def dropout(x: ArrayLike, p: float = 0.5, training: bool = True, *, seed: Seed = None,
            return_mask: bool = False, out: Array | None = None) -> Array | tuple[Array, Array]:
    """Dropout: zero each element with probability `p`, scale the rest by ``1 / (1 - p)``.

    Element i (in C order) is kept when the i-th 32-bit word of a Philox4x32-10 stream keyed by
    the seed is at least ``p * 2**32``: the result depends only on (x's shape, p, seed), not on
    threads, ISA level or strides, and different seeds give independent masks.

    Parameters
    ----------
    x : array_like
    p : float
        Drop probability, 0 <= p < 1.
    training : bool
        False: dropout is the identity: a copy of x (or x copied into `out`) is returned.
    seed : None, int, numpy.random.Generator or numpy.random.SeedSequence
        None (the default) draws fresh entropy on every call; an int gives the same mask every
        time; a Generator or SeedSequence gives a reproducible key drawn from its state.
    return_mask : bool
        Also return the keep-mask: uint8 bits of the C-order elements, little-endian within a
        byte, as ``numpy.packbits(keep.ravel(), bitorder="little")``; feed it to
        :func:`dropout_backward`.
    out : ndarray, optional
        Where to write the result (x's shape, same_kind casting; may overlap x).

    Returns
    -------
    ndarray or (ndarray, ndarray)
        The result, and the keep-mask when `return_mask`.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> y, mask = pytpp.nn.dropout(np.ones(8), p=0.5, seed=1, return_mask=True)
    >>> bool(np.all((y == 0) | (y == 2.0)))
    True
    >>> np.array_equal(y != 0, np.unpackbits(mask, bitorder="little")[:8].astype(bool))
    True
    >>> np.array_equal(pytpp.nn.dropout(np.ones(8), 0.5, seed=1), y)
    True
    >>> pytpp.nn.dropout(np.ones(3), 0.5, training=False)
    array([1., 1., 1.])
    """
    fn = "pytpp.nn.dropout"
    x, result = _operand(x, "x", fn)
    p = _probability(p, fn)
    if not isinstance(training, (bool, np.bool_)):
        raise TypeError(f"{fn}: training must be a bool, got {type(training).__name__} (the seed "
                        f"is keyword-only: dropout(x, p, seed=...))")
    key = _seed_value(seed, fn)
    nbytes = (x.size + 7) // 8
    if not training or p == 0.0:
        mask = np.full(nbytes, 0xFF, np.uint8)
        if out is None:
            y = x.astype(result)     # a new array, as every pytpp.nn function returns
        else:
            _validate.check_out(out, x.shape, result, fn)
            np.copyto(out, x, casting="unsafe")
            y = out
        return (y, mask) if return_mask else y
    target = _target(out, x.shape, result, fn)
    (x,) = _validate.unalias(target, (x,))
    mask = np.zeros(nbytes, np.uint8)
    thresh = min(int(round(p * 2.0 ** 32)), 2 ** 32 - 1)
    xc = _layout.contiguous(x)         # the mask follows the C order of the elements
    oc = target if target.flags.c_contiguous else np.empty(x.shape, target.dtype)
    if x.size:
        _ew.run(_ew.KIND_DROPOUT, 0, 1, x.size, ((xc, x.size, _DT[x.dtype], 0),),
                (oc, x.size, _DT[oc.dtype]), _cdt(x.dtype, oc.dtype),
                _runtime.active_isa_index(), mask, nbytes, seed=key, thresh=thresh,
                scale=1.0 / (1.0 - p))
    if oc is not target:
        _layout.copy_into(target, oc)
    y = _finish(target, out, result)
    return (y, mask) if return_mask else y


def dropout_backward(grad: ArrayLike, mask: ArrayLike, p: float, *,
                     out: Array | None = None) -> Array:
    """Gradient of :func:`dropout`: ``grad / (1 - p)`` where the mask kept the unit, else 0.

    Parameters
    ----------
    grad : array_like
        The incoming gradient, of the forward input's shape.
    mask : ndarray of uint8
        The keep-mask ``dropout(..., return_mask=True)`` returned.
    p : float
        The drop probability of the forward call.
    out : ndarray, optional
        Where to write the gradient (same_kind casting; may overlap grad).

    Returns
    -------
    ndarray

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> y, mask = pytpp.nn.dropout(np.ones(4), 0.5, seed=3, return_mask=True)
    >>> np.array_equal(pytpp.nn.dropout_backward(np.ones(4), mask, 0.5), y)
    True
    """
    fn = "pytpp.nn.dropout_backward"
    g, result = _operand(grad, "grad", fn)
    p = _probability(p, fn)
    mask = _validate.asarray(mask)
    if mask.dtype != np.uint8 or mask.ndim != 1 or mask.size < (g.size + 7) // 8:
        raise ValueError(f"{fn}: mask must be a 1-D uint8 array of at least {(g.size + 7) // 8} "
                         f"bytes (from dropout(..., return_mask=True))")
    mask = np.ascontiguousarray(mask)
    target = _target(out, g.shape, result, fn)
    (g,) = _validate.unalias(target, (g,))
    gc = _layout.contiguous(g)
    oc = target if target.flags.c_contiguous else np.empty(g.shape, target.dtype)
    if g.size:
        _ew.run(_ew.KIND_DROPOUT_INV, 0, 1, g.size, ((gc, g.size, _DT[g.dtype], 0),),
                (oc, g.size, _DT[oc.dtype]), _cdt(g.dtype, oc.dtype),
                _runtime.active_isa_index(), mask, mask.size, scale=1.0 / (1.0 - p))
    if oc is not target:
        _layout.copy_into(target, oc)
    return _finish(target, out, result)
