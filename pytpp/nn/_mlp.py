"""A stack of dense layers: inference in row blocks that keep each layer's activations in cache
for the next layer, and the training forms (forward keeping what the backward needs)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pytpp import _validate
from pytpp._typing import Array, ArrayLike
from pytpp.nn import _activations, _linear

__all__ = ["mlp", "mlp_backward", "PackedMLP"]

Layer = tuple[Any, Any, Any]
# rows per block of the inference walk: one block's widest activation (fp32) 4 MiB, in L3. On
# a Zen 5 core (1 MiB L2) half-L2 blocks of 64 rows ran the 3 x 1024 MLP at 4096 rows at 182
# GFLOP/s (1 thread) and 387 (2) against 237 and 436 for blocks of 1024 rows: the products of
# short blocks lose more than L2 residence saves.
_BLOCK_BYTES = 4 << 20
# batches at least this tall walk the rows in blocks; shorter ones run layer by layer
_BLOCKED_ROWS = 4096


def _apply(z, act):
    """act(z), a new array (the activations :func:`linear` fuses)."""
    if act == "gelu_tanh":
        return _activations.gelu(z, approximate="tanh")
    return getattr(_activations, act)(z)


def _layers(x_features, layers, fn):
    """Checked (w, bias, activation) per layer; widths chain."""
    out = []
    if not isinstance(layers, Sequence) or not layers:
        raise TypeError(f"{fn}: layers must be a non-empty list of (w, bias, activation)")
    width = x_features
    for i, layer in enumerate(layers):
        if not isinstance(layer, (tuple, list)) or len(layer) != 3:
            raise TypeError(f"{fn}: layers[{i}] must be a (w, bias, activation) tuple")
        w, bias, act = layer
        w = _validate.contraction_operand(w, f"layers[{i}] w", fn)
        if w.ndim != 2 or w.shape[1] != width:
            raise ValueError(f"{fn}: layers[{i}] w has shape {w.shape}; expected "
                             f"(out_features, {width})")
        _linear._activation(act, fn)
        if bias is not None:
            bias = _validate.contraction_operand(bias, f"layers[{i}] bias", fn)
            if bias.shape != (w.shape[0],):
                raise ValueError(f"{fn}: layers[{i}] bias has shape {bias.shape}; expected "
                                 f"({w.shape[0]},)")
        out.append((w, bias, act))
        width = w.shape[0]
    return out


def mlp(x: ArrayLike, layers: Sequence[Layer], *, return_activations: bool = False
        ) -> Array | tuple[Array, list[Array]]:
    """``x`` through a stack of :func:`linear` layers, ``act_i(h @ w_i.T + b_i)``.

    Inference on tall batches (4096 rows or more) walks the rows in blocks small enough that a
    block's activations stay in the caches from one layer to the next (001 Listing 3), each
    layer's weights packed once per call; shorter batches run layer by layer (the packing would
    cost more than the cache saves). :class:`PackedMLP` packs the weights once for repeated
    inference. Bias and activation are fused on each output block. With
    ``return_activations=True`` (the training form) every layer runs on all rows and the
    pre-activations are returned for :func:`mlp_backward`.

    Parameters
    ----------
    x : array_like
        (..., in_features).
    layers : list of (w, bias, activation)
        torch's layout (out_features, in_features); bias None or (out_features,); activation None
        or a name :func:`linear` takes.
    return_activations : bool
        Also return the list of each layer's ``h @ w.T + b`` (pre-activation).

    Returns
    -------
    y : ndarray
        (..., out_features of the last layer).
    pre_activations : list of ndarray
        Only with `return_activations`.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> rng = np.random.default_rng(0)
    >>> layers = [(rng.standard_normal((16, 8)), np.zeros(16), "relu"),
    ...           (rng.standard_normal((4, 16)), None, None)]
    >>> x = rng.standard_normal((5, 8))
    >>> bool(np.allclose(pytpp.nn.mlp(x, layers), np.maximum(x @ layers[0][0].T, 0) @ layers[1][0].T))
    True
    """
    fn = "pytpp.nn.mlp"
    x = _validate.contraction_operand(x, "x", fn)
    if x.ndim < 1:
        raise ValueError(f"{fn}: x must have at least one dimension (features)")
    layers = _layers(x.shape[-1], layers, fn)
    lead = x.shape[:-1]
    h = x.reshape(-1, x.shape[-1])
    if return_activations:
        pres = []
        for w, bias, act in layers:
            z = _linear.linear(h, w, bias)
            pres.append(z.reshape(lead + z.shape[-1:]))
            h = z if act is None else _apply(z, act)
        return h.reshape(lead + h.shape[-1:]), pres
    # the blocked walk packs every weight matrix once per call: it pays for tall batches only
    # (measured: 256 x 1024 x 3 layers ran 1.3x slower blocked than layer by layer)
    if h.shape[0] < _BLOCKED_ROWS:
        for w, bias, act in layers:
            h = _linear.linear(h, w, bias, activation=act)
        return h.reshape(lead + h.shape[-1:])
    y = _walk(h, [(_linear.PackedLinear(w, bias), act) for w, bias, act in layers])
    return y.reshape(lead + y.shape[-1:])


def _walk(h, packed):
    """Rows h (m, features) through packed layers [(PackedLinear, activation)], in blocks of
    rows whose widest activation stays in cache from one layer to the next (001 Listing 3), the
    last layer writing into the result."""
    m = h.shape[0]
    block = max(16, _BLOCK_BYTES // (4 * max(pl.out_features for pl, _ in packed)))
    if m <= block:
        for pl, act in packed:
            h = pl(h, activation=act)
        return h
    last, last_act = packed[-1]
    y = np.empty((m, last.out_features), last.dtype)
    for r0 in range(0, m, block):
        hb = h[r0:r0 + block]
        for pl, act in packed[:-1]:
            hb = pl(hb, activation=act)
        last(hb, activation=last_act, out=y[r0:r0 + block])
    return y


class PackedMLP:
    """The layers of :func:`mlp` with every weight packed once (a copy, as
    :class:`PackedLinear`) for repeated inference: ``pm(x)`` equals ``mlp(x, layers)``,
    computed in the weights' dtype (x is converted to it). Each call runs the rows through the
    layers in blocks of about 4 MiB of the widest activation (layer by layer when the batch is
    one block), the weights never packed again.

    Parameters
    ----------
    layers : list of (w, bias, activation)
        As :func:`mlp` takes them.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> w1, w2 = np.eye(3, dtype=np.float32), np.ones((2, 3), np.float32)
    >>> pm = pytpp.nn.PackedMLP([(w1, np.ones(3), "relu"), (w2, None, None)])
    >>> pm(np.array([[-5.0, 0.0, 2.0]], np.float32))
    array([[4., 4.]], dtype=float32)
    """

    def __init__(self, layers: Sequence[Layer]) -> None:
        fn = "pytpp.nn.PackedMLP"
        if not isinstance(layers, Sequence) or not layers:
            raise TypeError(f"{fn}: layers must be a non-empty list of (w, bias, activation)")
        first = layers[0]
        if not isinstance(first, (tuple, list)) or len(first) != 3:
            raise TypeError(f"{fn}: layers[0] must be a (w, bias, activation) tuple")
        w0 = _validate.contraction_operand(first[0], "layers[0] w", fn)
        if w0.ndim != 2:
            raise ValueError(f"{fn}: layers[0] w must be 2-D (out_features, in_features), got "
                             f"shape {w0.shape}")
        checked = _layers(w0.shape[1], layers, fn)
        self.in_features = w0.shape[1]
        self.out_features = checked[-1][0].shape[0]
        self._packed = [(_linear.PackedLinear(w, bias), act) for w, bias, act in checked]

    def __call__(self, x: ArrayLike) -> Array:
        fn = "pytpp.nn.PackedMLP"
        x = _validate.contraction_operand(x, "x", fn)
        if x.ndim < 1 or x.shape[-1] != self.in_features:
            raise ValueError(f"{fn}: x has shape {x.shape}; expected (..., {self.in_features})")
        lead = x.shape[:-1]
        y = _walk(x.reshape(-1, self.in_features), self._packed)
        return y.reshape(lead + y.shape[-1:])


def mlp_backward(grad_out: ArrayLike, x: ArrayLike, layers: Sequence[Layer],
                 pre_activations: Sequence[ArrayLike]) -> tuple[Array, list[tuple[Array, Array]]]:
    """Gradients of :func:`mlp`: ``(grad_x, [(grad_w_i, grad_bias_i), ...])`` from the
    pre-activations its training form returned.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> rng = np.random.default_rng(0)
    >>> layers = [(rng.standard_normal((6, 3)), None, "tanh")]
    >>> x = rng.standard_normal((2, 3))
    >>> y, pre = pytpp.nn.mlp(x, layers, return_activations=True)
    >>> gx, grads = pytpp.nn.mlp_backward(np.ones_like(y), x, layers, pre)
    >>> gx.shape, grads[0][0].shape, grads[0][1].shape
    ((2, 3), (6, 3), (6,))
    """
    fn = "pytpp.nn.mlp_backward"
    x = _validate.contraction_operand(x, "x", fn)
    layers = _layers(x.shape[-1], layers, fn)
    if len(pre_activations) != len(layers):
        raise ValueError(f"{fn}: {len(pre_activations)} pre-activations for {len(layers)} layers")
    inputs = [x]
    for (w, bias, act), z in zip(layers[:-1], pre_activations[:-1]):
        z = _validate.contraction_operand(z, "pre_activations", fn)
        inputs.append(z if act is None else _apply(z, act))
    g = _validate.contraction_operand(grad_out, "grad_out", fn)
    grads = []
    for (w, bias, act), z, h in zip(reversed(layers), reversed(pre_activations), reversed(inputs)):
        g, gw, gb = _linear.linear_backward(g, h, w, activation=act, pre_activation=z)
        grads.append((gw, gb))
    return g, grads[::-1]
