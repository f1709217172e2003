"""Fully connected layers: ``act(x @ w.T + bias) + residual`` with the bias, activation and
residual applied to each block of the product as soon as it holds its final sums (paper 000,
Algorithm 6: the epilogue runs on the block while it is in the caches), its backward, and a
weight packed once for repeated inference.

float64 computes in float64, float32 and float16 in float32; bfloat16 x and w multiply on the
bf16 kernels with float32 accumulation and epilogue, rounded once to bfloat16."""
import math

import numpy as np

from pytpp import _validate
from pytpp._core import _eltwise as _ew
from pytpp._core import _matmul as _cm
from pytpp._core import _runtime
from pytpp._typing import Array, ArrayLike
from pytpp.linalg import _operands as ops
from pytpp.linalg._packed import PackedMatrix

__all__ = ["linear", "linear_backward", "PackedLinear", "ACTIVATIONS"]

# activation name -> its element-wise op
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_tanh", "sigmoid": "sigmoid",
               "tanh": "tanh"}
_ADD = _ew.BINARY_CODES["add"]


def _activation(activation, fn):
    if activation is None:
        return None
    if activation not in ACTIVATIONS:
        raise ValueError(f"{fn}: activation={activation!r}; expected None or one of "
                         f"{sorted(ACTIVATIONS)}")
    return activation


def _dtypes(x_dt, w_dt):
    """(result dtype, compute dtype code, dtype the kernels read, C's dtype)."""
    if x_dt == _validate.BF16 and w_dt == _validate.BF16:
        return _validate.BF16, _cm.DT_BF16, _validate.BF16, _validate.F32
    res = _validate.promote(x_dt, w_dt)
    cdt = _validate.F64 if res == _validate.F64 else _validate.F32
    return res, (_cm.DT_F64 if cdt == _validate.F64 else _cm.DT_F32), cdt, cdt


def _epilogue_operands(bias, residual, n, yshape, cdt, fn):
    b = None
    if bias is not None:
        b = _validate.elementwise_operand(bias, "bias", fn)
        if b.shape != (n,):
            raise ValueError(f"{fn}: bias has shape {b.shape}; expected ({n},) (out_features)")
        b = np.ascontiguousarray(b, dtype=cdt)
    r = None
    if residual is not None:
        r = _validate.elementwise_operand(residual, "residual", fn)
        try:
            r = np.broadcast_to(r, yshape)
        except ValueError:
            raise ValueError(f"{fn}: residual of shape {r.shape} does not broadcast to the "
                             f"output shape {yshape}") from None
        r = np.ascontiguousarray(r, dtype=cdt).reshape(-1, n)
    return b, r


def _target(out, yshape, m, n, res_dt, cdt, fn, inputs):
    """(array the kernel writes, whether it is out itself)."""
    if out is None:
        return np.empty((m, n), cdt), False
    _validate.check_out(out, yshape, res_dt, fn)
    if out.dtype == cdt and out.dtype.isnative and out.flags.c_contiguous and not any(
            a is not None and a.size and np.may_share_memory(out, a) for a in inputs):
        return out.reshape(m, n), True
    return np.empty((m, n), cdt), False


def _finish(c, out, direct, yshape, res_dt):
    if out is None:
        y = c.reshape(yshape)
        if res_dt == _validate.BF16:
            res = np.empty(yshape, _validate.BF16)
            ops.store_bf16(y, res)
            return res
        return y.astype(res_dt, copy=False)
    if not direct:
        if out.dtype == _validate.BF16 and c.dtype == _validate.F32:
            ops.store_bf16(c.reshape(yshape), out)
        else:
            np.copyto(out, c.reshape(yshape), casting="unsafe")
    return out


def linear(x: ArrayLike, w: ArrayLike, bias: ArrayLike | None = None, *,
           activation: str | None = None, residual: ArrayLike | None = None,
           out: Array | None = None) -> Array:
    """``act(x @ w.T + bias) + residual`` (``torch.nn.functional.linear`` followed by the
    activation and a residual add), fused: each block of the product gets its bias, activation
    and residual while it is in the caches.

    Parameters
    ----------
    x : array_like
        (..., in_features): float64, float32, bfloat16 or float16.
    w : array_like
        (out_features, in_features), torch's layout.
    bias : array_like, optional
        (out_features,).
    activation : {None, "relu", "gelu", "gelu_tanh", "sigmoid", "tanh"}, optional
        "gelu" is the exact erf form.
    residual : array_like, optional
        Broadcasts to the output shape; added after the activation, never modified.
    out : ndarray, optional
        (..., out_features), a float dtype the result casts to.

    Returns
    -------
    ndarray
        (..., out_features) in numpy's result dtype of x and w (bfloat16 for bfloat16 x and w).

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> x = np.array([[1.0, -2.0]])
    >>> w = np.array([[1.0, 1.0], [2.0, 0.5]])
    >>> pytpp.nn.linear(x, w, np.array([0.5, 0.0]), activation="relu", residual=10.0)
    array([[10., 11.]])
    """
    fn = "pytpp.nn.linear"
    x = _validate.contraction_operand(x, "x", fn)
    w = _validate.contraction_operand(w, "w", fn)
    if w.ndim != 2:
        raise ValueError(f"{fn}: w must be 2-D (out_features, in_features), got shape {w.shape}")
    if x.ndim < 1 or x.shape[-1] != w.shape[1]:
        raise ValueError(f"{fn}: x has {x.shape[-1] if x.ndim else 0} features (shape {x.shape}); "
                         f"w expects {w.shape[1]} (shape {w.shape})")
    act = _activation(activation, fn)
    res_dt, dt_code, kdt, cdt = _dtypes(x.dtype, w.dtype)
    n, k = w.shape
    yshape = x.shape[:-1] + (n,)
    b, r = _epilogue_operands(bias, residual, n, yshape, cdt, fn)
    m = math.prod(x.shape[:-1])
    x2 = _validate.kernel_operand(x, kdt).reshape(m, k)
    wt = _validate.kernel_operand(w, kdt).T
    c, direct = _target(out, yshape, m, n, res_dt, cdt, fn, [x2, wt, b, r])
    if m and n:
        act_code = -1 if act is None else _ew.UNARY_CODES[ACTIVATIONS[act]]
        _cm.linear(x2, wt, c, dt_code, _runtime.isa_index(_runtime.get_isa()), b, act_code,
                   _ADD, r)
    return _finish(c, out, direct, yshape, res_dt)


def linear_backward(grad_out: ArrayLike, x: ArrayLike, w: ArrayLike, *,
                    activation: str | None = None, pre_activation: ArrayLike | None = None
                    ) -> tuple[Array, Array, Array]:
    """Gradients of :func:`linear` (without residual: its gradient is ``grad_out`` itself):
    ``(grad_x, grad_w, grad_bias)``.

    With an activation, ``g = act'(pre_activation) * grad_out`` (one fused element-wise pass),
    then ``grad_x = g @ w``, ``grad_w = g^T @ x`` and ``grad_bias = g.sum(rows)``.

    Parameters
    ----------
    grad_out : array_like
        (..., out_features).
    x, w : array_like
        As passed to :func:`linear`.
    activation : str, optional
        As passed to :func:`linear`.
    pre_activation : array_like, optional
        The saved ``x @ w.T + bias`` (``linear(x, w, bias)``); required with an activation.

    Returns
    -------
    grad_x : ndarray
        x's shape.
    grad_w : ndarray
        w's shape.
    grad_bias : ndarray
        (out_features,).

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> x, w = np.array([[1.0, 2.0]]), np.array([[3.0, 4.0]])
    >>> pytpp.nn.linear_backward(np.ones((1, 1)), x, w)
    (array([[3., 4.]]), array([[1., 2.]]), array([1.]))
    """
    fn = "pytpp.nn.linear_backward"
    x = _validate.contraction_operand(x, "x", fn)
    w = _validate.contraction_operand(w, "w", fn)
    g = _validate.contraction_operand(grad_out, "grad_out", fn)
    if w.ndim != 2 or x.ndim < 1 or x.shape[-1] != w.shape[1]:
        raise ValueError(f"{fn}: x (shape {x.shape}) and w (shape {w.shape}) do not match as "
                         f"(..., in_features) and (out_features, in_features)")
    n, k = w.shape
    if g.shape != x.shape[:-1] + (n,):
        raise ValueError(f"{fn}: grad_out has shape {g.shape}; expected {x.shape[:-1] + (n,)}")
    act = _activation(activation, fn)
    if act is not None:
        if pre_activation is None:
            raise ValueError(f"{fn}: activation={act!r} needs pre_activation (the saved "
                             f"x @ w.T + bias)")
        z = _validate.elementwise_operand(pre_activation, "pre_activation", fn)
        if z.shape != g.shape:
            raise ValueError(f"{fn}: pre_activation has shape {z.shape}; expected {g.shape}")
        g = _activation_backward(act, g, z)
    m = math.prod(x.shape[:-1])
    g2 = g.reshape(m, n)
    x2 = x.reshape(m, k)
    from pytpp.linalg import matmul
    grad_x = matmul(g2, w).reshape(x.shape)
    grad_w = matmul(g2.T, x2)
    grad_bias = g2.sum(axis=0, dtype=np.float64 if g2.dtype == np.float64 else np.float32)
    return grad_x, grad_w, grad_bias


def _activation_backward(act, g, z):
    """grad_out times the activation's derivative at the pre-activation z, by pytpp.nn's
    backward functions (sigmoid and tanh take their output)."""
    from pytpp import nn
    if act == "relu":
        return nn.relu_backward(g, z)
    if act == "gelu":
        return nn.gelu_backward(g, z)
    if act == "gelu_tanh":
        return nn.gelu_backward(g, z, "tanh")
    if act == "sigmoid":
        return nn.sigmoid_backward(g, nn.sigmoid(z))
    return nn.tanh_backward(g, nn.tanh(z))


class PackedLinear:
    """A linear layer whose weight is packed once (a copy, in the blocked layout of the
    machine's GEMM kernels) for repeated inference: ``pl(x)`` equals
    ``linear(x, w, bias, activation=..., residual=...)``, computed and returned in the weight's
    dtype (x is converted to it).

    Parameters
    ----------
    w : array_like
        (out_features, in_features).
    bias : array_like, optional
        (out_features,).

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> pl = pytpp.nn.PackedLinear(np.eye(2), np.ones(2))
    >>> pl(np.array([[1.0, 2.0]]), activation="relu")
    array([[2., 3.]])
    """

    def __init__(self, w: ArrayLike, bias: ArrayLike | None = None) -> None:
        fn = "pytpp.nn.PackedLinear"
        w = _validate.contraction_operand(w, "w", fn)
        if w.ndim != 2:
            raise ValueError(f"{fn}: w must be 2-D (out_features, in_features), got shape "
                             f"{w.shape}")
        self.out_features, self.in_features = w.shape
        self._packed = PackedMatrix(w.T)
        self.dtype = self._packed.dtype
        _, _, _, cdt = _dtypes(self.dtype, self.dtype)
        self._bias = None
        if bias is not None:
            self._bias, _ = _epilogue_operands(bias, None, self.out_features, (1,), cdt, fn)

    def __call__(self, x: ArrayLike, *, activation: str | None = None,
                 residual: ArrayLike | None = None, out: Array | None = None) -> Array:
        fn = "pytpp.nn.PackedLinear"
        x = _validate.contraction_operand(x, "x", fn)
        if x.ndim < 1 or x.shape[-1] != self.in_features:
            raise ValueError(f"{fn}: x has shape {x.shape}; expected (..., {self.in_features})")
        act = _activation(activation, fn)
        res_dt, dt_code, kdt, cdt = _dtypes(self.dtype, self.dtype)   # the weight's dtype
        n = self.out_features
        yshape = x.shape[:-1] + (n,)
        _, r = _epilogue_operands(None, residual, n, yshape, cdt, fn)
        m = math.prod(x.shape[:-1])
        x2 = _validate.kernel_operand(x, kdt).reshape(m, self.in_features)
        c, direct = _target(out, yshape, m, n, res_dt, cdt, fn, [x2, r])
        if m and n:
            isa, kernel, blk, data = self._packed._current()
            act_code = -1 if act is None else _ew.UNARY_CODES[ACTIVATIONS[act]]
            _cm.linear_prepacked(np.ascontiguousarray(x2), data, n, c, blk, self._packed._code,
                                 isa, kernel, self._bias, act_code, _ADD, r)
        return _finish(c, out, direct, yshape, res_dt)
