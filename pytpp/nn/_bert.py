"""A BERT encoder layer (post-norm transformer block) from pytpp's fused pieces, and built-in
random weights to run it on."""
from __future__ import annotations

from typing import Any

import numpy as np

from pytpp import _validate
from pytpp._typing import Array, ArrayLike, DTypeLike
from pytpp.nn import _activations, _attention, _linear, _norms

__all__ = ["bert_layer", "bert_layer_weights"]

_KEYS = ("w_qkv", "b_qkv", "w_out", "b_out", "ln1_weight", "ln1_bias", "w_ff1", "b_ff1",
         "w_ff2", "b_ff2", "ln2_weight", "ln2_bias")


def bert_layer_weights(d_model: int = 768, d_ff: int = 3072, *, dtype: DTypeLike = np.float32,
                       seed: int = 0) -> dict[str, Array]:
    """Random weights of one BERT layer (BERT-base sizes by default): projections drawn from
    N(0, 0.02^2) as BERT initialises them, small random biases, layer norms at weight 1, bias 0.

    Keys (torch's layouts): ``w_qkv`` (3 d_model, d_model) and ``b_qkv`` (the packed q, k, v
    projection, ``in_proj_weight``), ``w_out``, ``b_out`` (attention output), ``ln1_weight``,
    ``ln1_bias``, ``w_ff1`` (d_ff, d_model), ``b_ff1``, ``w_ff2`` (d_model, d_ff), ``b_ff2``,
    ``ln2_weight``, ``ln2_bias``.

    Examples
    --------
    >>> import pytpp
    >>> w = pytpp.nn.bert_layer_weights(64, 256)
    >>> w["w_qkv"].shape, w["w_ff1"].shape
    ((192, 64), (256, 64))
    """
    rng = np.random.default_rng(seed)
    D, F = int(d_model), int(d_ff)
    dt = np.dtype(dtype)

    def normal(*shape, std=0.02):
        return (rng.standard_normal(shape) * std).astype(dt)

    return {"w_qkv": normal(3 * D, D), "b_qkv": normal(3 * D), "w_out": normal(D, D),
            "b_out": normal(D), "ln1_weight": np.ones(D, dt), "ln1_bias": np.zeros(D, dt),
            "w_ff1": normal(F, D), "b_ff1": normal(F), "w_ff2": normal(D, F), "b_ff2": normal(D),
            "ln2_weight": np.ones(D, dt), "ln2_bias": np.zeros(D, dt)}


def bert_layer(x: ArrayLike, weights: dict[str, Any], num_heads: int, *,
               attn_mask: ArrayLike | None = None, dropout_p: float = 0.0, seed: Any = None,
               eps: float = 1e-12) -> Array:
    """One BERT encoder layer (torch's ``nn.TransformerEncoderLayer`` with ``batch_first=True``,
    ``norm_first=False``, ``activation="gelu"``):

    ``h = layer_norm(x + dropout(attention(x) @ w_out.T + b_out))``, then
    ``y = layer_norm(h + dropout(gelu(h @ w_ff1.T + b_ff1) @ w_ff2.T + b_ff2))``.

    The q, k, v projection is one :func:`linear`; attention is the fused
    :func:`scaled_dot_product_attention` (no (L, L) matrix); the bias and the residual add are
    fused on each output block of their products (without dropout; with it, dropout comes
    between them, as in BERT's output block), the GELU on the first FFN product's blocks.

    Parameters
    ----------
    x : array_like
        (B, L, D) float32 or float64.
    weights : dict
        As :func:`bert_layer_weights` makes them.
    num_heads : int
        Divides D.
    attn_mask : array_like, optional
        As in :func:`scaled_dot_product_attention` (broadcast to (B, num_heads, L, L)).
    dropout_p : float
        Dropout of the attention probabilities (fused in the attention tiles), of the attention
        output and of the FFN output (training, as torch's layer); 0 for inference.
    seed : int, Generator or None
        The dropout stream (see :func:`dropout`).
    eps : float
        The layer norms' epsilon (BERT: 1e-12).

    Returns
    -------
    ndarray
        (B, L, D).

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> w = pytpp.nn.bert_layer_weights(64, 128)
    >>> x = np.random.default_rng(0).standard_normal((2, 7, 64)).astype(np.float32)
    >>> pytpp.nn.bert_layer(x, w, num_heads=4).shape
    (2, 7, 64)
    """
    fn = "pytpp.nn.bert_layer"
    x, (B, L, D) = _attention.sequence_and_heads(x, num_heads, fn)
    missing = [k for k in _KEYS if k not in weights]
    if missing:
        raise ValueError(f"{fn}: weights lack {missing} (see pytpp.nn.bert_layer_weights)")
    w = weights
    if w["w_qkv"].shape != (3 * D, D):
        raise ValueError(f"{fn}: w_qkv has shape {w['w_qkv'].shape}; expected {(3 * D, D)}")
    p = _validate.real_arg(dropout_p, "dropout_p", fn, lo=0.0, hi=1.0)
    rng = np.random.default_rng(seed) if p > 0 else None
    H, hd = int(num_heads), D // int(num_heads)

    qkv = _linear.linear(x, w["w_qkv"], w["b_qkv"])                         # (B, L, 3D)
    heads = qkv.reshape(B, L, 3, H, hd).transpose(2, 0, 3, 1, 4)             # (3, B, H, L, hd)
    o = _attention.scaled_dot_product_attention(heads[0], heads[1], heads[2], attn_mask,
                                                dropout_p=p, seed=rng)
    o = o.transpose(0, 2, 1, 3).reshape(B, L, D)
    if p > 0:
        a = _activations.dropout(_linear.linear(o, w["w_out"], w["b_out"]), p, seed=rng) + x
    else:
        a = _linear.linear(o, w["w_out"], w["b_out"], residual=x)
    h = _norms.layer_norm(a, (D,), w["ln1_weight"], w["ln1_bias"], eps)
    f = _linear.linear(h, w["w_ff1"], w["b_ff1"], activation="gelu")
    if p > 0:
        f2 = _activations.dropout(_linear.linear(f, w["w_ff2"], w["b_ff2"]), p, seed=rng) + h
    else:
        f2 = _linear.linear(f, w["w_ff2"], w["b_ff2"], residual=h)
    return _norms.layer_norm(f2, (D,), w["ln2_weight"], w["ln2_bias"], eps)
