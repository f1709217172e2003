"""Scaled dot-product attention with torch's semantics, forward fused in tiles (no (L, S) matrix
in memory: attention.h), and multi-head attention on top of it."""
import math
from typing import Any

import numpy as np

from pytpp import _layout, _validate
from pytpp._core import _attention
from pytpp._typing import Array, ArrayLike

__all__ = ["scaled_dot_product_attention", "scaled_dot_product_attention_backward",
           "multi_head_attention"]


def _qkv(q, k, v, fn):
    q = _validate.contraction_operand(q, "q", fn)
    k = _validate.contraction_operand(k, "k", fn)
    v = _validate.contraction_operand(v, "v", fn)
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"{fn}: q, k and v must have one dtype, got {q.dtype}, {k.dtype} and "
                        f"{v.dtype}")
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ValueError(f"{fn}: q, k, v must be (..., L, E), (..., S, E), (..., S, Ev)")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"{fn}: q has E = {q.shape[-1]} but k has {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"{fn}: k has S = {k.shape[-2]} keys but v has {v.shape[-2]}")
    try:
        lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ValueError(f"{fn}: the batch dims of q {q.shape[:-2]}, k {k.shape[:-2]} and "
                         f"v {v.shape[:-2]} do not broadcast") from None
    return q, k, v, lead


def _mask(attn_mask, lead, L, S, cdt, fn):
    """An additive mask broadcast to lead + (L, S), flattened to (batch, L, S) with its element
    strides (0 where it broadcasts): (array, strides) or (None, zeros)."""
    if attn_mask is None:
        return None, (0, 0, 0)
    m = _validate.asarray(attn_mask)
    if m.dtype == np.bool_:
        m = np.where(m, 0.0, -np.inf).astype(cdt)
    elif m.dtype.kind == "f" or m.dtype == _validate.BF16:
        m = m.astype(cdt, copy=False)
    else:
        raise TypeError(f"{fn}: attn_mask must be boolean or floating, got {m.dtype}")
    try:
        m = np.broadcast_to(m, lead + (L, S))
    except ValueError:
        raise ValueError(f"{fn}: attn_mask of shape {np.shape(attn_mask)} does not broadcast to "
                         f"{lead + (L, S)}") from None
    batch = math.prod(lead)
    # the batch dims as one: a copy only when they do not collapse to one stride
    try:
        m3 = m.reshape((batch, L, S), copy=False)
    except (ValueError, TypeError):
        m3 = np.ascontiguousarray(m).reshape(batch, L, S)
    return m3, tuple(st // m3.itemsize for st in m3.strides)


def sequence_and_heads(x, num_heads, fn):
    """x checked as a (B, L, D) batch of sequences whose width `num_heads` divides: (x, shape)."""
    x = _validate.contraction_operand(x, "x", fn)
    if x.ndim != 3:
        raise ValueError(f"{fn}: x must be (B, L, D), got shape {x.shape}")
    D = x.shape[2]
    if not isinstance(num_heads, (int, np.integer)) or num_heads < 1 or D % num_heads:
        raise ValueError(f"{fn}: num_heads={num_heads!r} must be a positive integer dividing "
                         f"D = {D}")
    return x, x.shape


def _dropout_args(dropout_p, seed, fn):
    """(seed, thresh, keep) of the fused dropout; thresh 0 for none."""
    p = _validate.real_arg(dropout_p, "dropout_p", fn, lo=0.0, hi=1.0)
    if p >= 1.0:
        raise ValueError(f"{fn}: dropout_p must be below 1, got {p}")
    if p == 0.0:
        return (0, 0, 1.0)
    from pytpp.nn._activations import _seed_value
    thresh = min(int(round(p * 2.0 ** 32)), 2 ** 32 - 1)
    return (_seed_value(seed, fn), max(thresh, 1), 1.0 / (1.0 - p))


def _keep_factors(lead_size, L, S, i0, i1, drop, cdt):
    """(batch, i1 - i0, S): the fused forward's dropout factors (0 or 1 / (1 - p)) of queries
    [i0, i1), drawn again from the same stream positions."""
    from pytpp import tpp
    seed, thresh, keep = drop
    p = thresh / 2.0 ** 32
    n = (i1 - i0) * S
    k = tpp.unary("dropout", 1, n, dtype=cdt, p=p, seed=seed)
    ones = np.ones(n, cdt)
    out = np.empty((lead_size, i1 - i0, S), cdt)
    for b in range(lead_size):
        k.call_with_mask(ones, out[b].reshape(-1), None, base=(b * L + i0) * S)
    return out


def scaled_dot_product_attention(q: ArrayLike, k: ArrayLike, v: ArrayLike,
                                 attn_mask: ArrayLike | None = None, *, is_causal: bool = False,
                                 dropout_p: float = 0.0, scale: float | None = None,
                                 seed: Any = None) -> Array:
    """``softmax(q @ k^T * scale + mask) @ v`` (``torch.nn.functional.scaled_dot_product_attention``),
    fused: per register block of queries (6 on AVX2), their scores against every key by the
    BRGEMM micro-kernel on K^T packed into panels once per head, each row's softmax numerators
    in one pass while it is in L1 (shifted by the bound ``|scale| norm(q_i) max_j norm(k_j)`` of
    the row maximum, unless a mask is given), and P @ V as one product over all keys (V packed
    alike), written once and divided by the sums; beyond S = 16384 keys, tiles of 64 queries x
    128 keys with the online softmax. Memory O(L * Ev) per call plus O(S * (E + Ev)) per thread
    (the packed K and V), never (L, S). float32 takes the exponentials from the approximate exp
    (relative error 2.6e-6), as torch's CPU flash attention takes its exp_u20.

    Parameters
    ----------
    q, k, v : array_like
        (..., L, E), (..., S, E), (..., S, Ev) of one float dtype (float64 or float32; bfloat16
        and float16 compute in float32); batch dims broadcast.
    attn_mask : array_like, optional
        Boolean (True keeps) or additive float, broadcasting to (..., L, S).
    is_causal : bool, optional
        Keep key j for query i when j <= i (top-left aligned when L != S).
    dropout_p : float, optional
        Dropout of the attention probabilities (training), inside the fused tiles: element
        (..., i, j) of the (..., L, S) probability matrix is kept, scaled by 1 / (1 - p), exactly
        where ``pytpp.nn.dropout(P, dropout_p, seed=seed)`` keeps it (the same Philox stream, the
        C order of (..., L, S)); the softmax sums are those of P before dropping, as torch's.
    scale : float, optional
        Default 1 / sqrt(E).
    seed : None, int, numpy.random.Generator or SeedSequence, optional
        The dropout stream (see :func:`dropout`). Pass the same seed to
        :func:`scaled_dot_product_attention_backward` to use the same mask.

    Returns
    -------
    ndarray
        (..., L, Ev) in q's dtype. A query whose every key is masked gives zeros (and no
        gradient), as torch's safe softmax does (torch >= 2.5).

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> q = np.array([[1.0, 0.0]]); k = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> v = np.array([[1.0], [3.0]])
    >>> pytpp.nn.scaled_dot_product_attention(q, k, v, scale=np.log(3.0))
    array([[1.5]])
    """
    fn = "pytpp.nn.scaled_dot_product_attention"
    q, k, v, lead = _qkv(q, k, v, fn)
    drop = _dropout_args(dropout_p, seed, fn)
    if attn_mask is not None and is_causal:
        raise ValueError(f"{fn}: give attn_mask or is_causal, not both (as torch)")
    L, E = q.shape[-2:]
    S, Ev = v.shape[-2:]
    s = 1.0 / math.sqrt(E) if scale is None else float(scale)
    if not math.isfinite(s):
        raise ValueError(f"{fn}: scale must be finite, got {scale!r}")
    cdt = _validate.F64 if q.dtype == _validate.F64 else _validate.F32
    mask, (msb, msl, mss) = _mask(attn_mask, lead, L, S, cdt, fn)
    batch = math.prod(lead)

    def flat(a, rows, cols, slot):   # copies (layout, dtype) in per-thread scratch buffers
        return _layout.dense(slot, a, lead + (rows, cols), cdt).reshape(batch, rows, cols)
    o = np.empty((batch, L, Ev), cdt)
    if batch and L and Ev:
        _attention.sdpa_forward(flat(q, L, E, "sdpa q"), flat(k, S, E, "sdpa k"),
                                flat(v, S, Ev, "sdpa v"), o, mask, msb, msl, mss,
                                bool(is_causal), s, *drop)
    res = o.reshape(lead + (L, Ev))
    if q.dtype == _validate.BF16:
        from pytpp.linalg import _operands as ops
        out = np.empty(res.shape, _validate.BF16)
        ops.store_bf16(res, out)
        return out
    return res.astype(q.dtype, copy=False)


def multi_head_attention(x: ArrayLike, w_qkv: ArrayLike, w_out: ArrayLike, num_heads: int, *,
                         attn_mask: ArrayLike | None = None, is_causal: bool = False) -> Array:
    """Multi-head self-attention without biases (torch's ``nn.MultiheadAttention`` with
    ``bias=False``, batch first): ``x @ w_qkv.T`` split into q, k, v and heads, the fused
    :func:`scaled_dot_product_attention` per head, heads joined and ``@ w_out.T``.

    Parameters
    ----------
    x : array_like
        (B, L, D).
    w_qkv : array_like
        (3 D, D), torch's packed ``in_proj_weight`` (rows q, k, v; head h uses features
        [h D / H, (h + 1) D / H)).
    w_out : array_like
        (D, D).
    num_heads : int
        Divides D.
    attn_mask, is_causal
        As in :func:`scaled_dot_product_attention`.

    Returns
    -------
    ndarray
        (B, L, D).

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> x = np.ones((1, 3, 4)); w = np.zeros((12, 4)); w[8:] = np.eye(4)   # v = x
    >>> pytpp.nn.multi_head_attention(x, w, np.eye(4), 2).shape
    (1, 3, 4)
    """
    from pytpp.nn._linear import linear
    fn = "pytpp.nn.multi_head_attention"
    x, (B, L, D) = sequence_and_heads(x, num_heads, fn)
    w_qkv = _validate.contraction_operand(w_qkv, "w_qkv", fn)
    w_out = _validate.contraction_operand(w_out, "w_out", fn)
    if w_qkv.shape != (3 * D, D) or w_out.shape != (D, D):
        raise ValueError(f"{fn}: w_qkv must be ({3 * D}, {D}) and w_out ({D}, {D}), got "
                         f"{w_qkv.shape} and {w_out.shape}")
    H, hd = int(num_heads), D // int(num_heads)
    qkv = linear(x, w_qkv)                                      # (B, L, 3D)
    heads = qkv.reshape(B, L, 3, H, hd).transpose(2, 0, 3, 1, 4)  # (3, B, H, L, hd)
    mask = attn_mask
    o = scaled_dot_product_attention(heads[0], heads[1], heads[2], mask, is_causal=is_causal)
    return linear(o.transpose(0, 2, 1, 3).reshape(B, L, D), w_out)


# queries per step of the backward: its scores and their gradient, (..., 128, S) at a time
_BWD_BLOCK = 128


def scaled_dot_product_attention_backward(grad_out: ArrayLike, q: ArrayLike, k: ArrayLike,
                                          v: ArrayLike, attn_mask: ArrayLike | None = None, *,
                                          is_causal: bool = False, scale: float | None = None,
                                          dropout_p: float = 0.0, seed: Any = None
                                          ) -> tuple[Array, Array, Array]:
    """Gradients of :func:`scaled_dot_product_attention` with respect to q, k and v, fused in C
    (attention.h): per batch entry and register block of queries, the scores against every key
    recomputed (K^T packed into panels, as the forward), ``P = softmax(q k^T * scale + mask)``,
    ``dP = dO v^T`` (times the dropout's keep factors, drawn from the forward's stream),
    ``dS = P * (dP - rowsum(dP * P))`` (``rowsum(dP * P) = rowsum(dO * O)``: O is not formed)
    and ``dQ = dS k * scale`` while dS's rows are in L1; then per register block of keys
    ``dK = dS^T q * scale`` and ``dV = (P * keep)^T dO`` from the stored rows, a block of
    queries at a time (its P and dS rows, about 256 KiB, stay in L2). Memory per thread: that
    block and the packed q, k, v, dO of one batch entry, O((64 + E) * S + (E + Ev) * L), never
    (L, S). Threads take whole batch entries, or with fewer entries than that suits, query
    blocks of each entry (dK, dV summed from per-thread partials).

    Parameters
    ----------
    grad_out : array_like
        (..., L, Ev), the gradient of the output.
    q, k, v, attn_mask, is_causal, scale
        As passed to :func:`scaled_dot_product_attention`.
    dropout_p, seed
        As passed to the forward (an int or a copy of the Generator's state: the same mask).

    Returns
    -------
    grad_q, grad_k, grad_v : ndarray
        Of q's, k's and v's shapes (summed over broadcast batch dims), in q's dtype. Queries
        whose every key is masked contribute nothing.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> q = k = np.eye(2); v = np.array([[1.0], [3.0]])
    >>> gq, gk, gv = pytpp.nn.scaled_dot_product_attention_backward(np.ones((2, 1)), q, k, v)
    >>> gv
    array([[1.],
           [1.]])
    """
    fn = "pytpp.nn.scaled_dot_product_attention_backward"
    q, k, v, lead = _qkv(q, k, v, fn)
    drop = _dropout_args(dropout_p, seed, fn)
    if attn_mask is not None and is_causal:
        raise ValueError(f"{fn}: give attn_mask or is_causal, not both (as torch)")
    L, E = q.shape[-2:]
    S, Ev = v.shape[-2:]
    g = _validate.contraction_operand(grad_out, "grad_out", fn)
    if g.shape != lead + (L, Ev):
        raise ValueError(f"{fn}: grad_out has shape {g.shape}; expected {lead + (L, Ev)}")
    s = 1.0 / math.sqrt(E) if scale is None else float(scale)
    cdt = _validate.F64 if q.dtype == _validate.F64 else _validate.F32
    mask, (msb, msl, mss) = _mask(attn_mask, lead, L, S, cdt, fn)
    batch = math.prod(lead)

    def flat(a, rows, cols, slot):   # copies (layout, dtype) in per-thread scratch buffers
        return _layout.dense(slot, a, lead + (rows, cols), cdt).reshape(batch, rows, cols)
    qf, kf, vf = flat(q, L, E, "sdpa q"), flat(k, S, E, "sdpa k"), flat(v, S, Ev, "sdpa v")
    gf = flat(g, L, Ev, "sdpa grad")
    if _bwd_in_c(L, S, E, Ev):
        dq = np.empty((batch, L, E), cdt)
        dk = np.empty((batch, S, E), cdt)
        dv = np.empty((batch, S, Ev), cdt)
        _attention.sdpa_backward(gf, qf, kf, vf, dq, dk, dv, mask, msb, msl, mss,
                                 bool(is_causal), s, *drop)
    else:
        dq, dk, dv = _backward_blocks(gf, qf, kf, vf, mask, bool(is_causal), s, drop, cdt)

    def unflat(d, a, rows, cols):
        d = d.reshape(lead + (rows, cols))
        extra = len(lead) - (a.ndim - 2)
        d = d.sum(axis=tuple(range(extra))) if extra else d
        axes = tuple(i for i, n in enumerate(a.shape[:-2]) if n == 1 and d.shape[i] != 1)
        if axes:
            d = d.sum(axis=axes, keepdims=True)
        return d.astype(q.dtype, copy=False)
    return unflat(dq, q, L, E), unflat(dk, k, S, E), unflat(dv, v, S, Ev)


# "auto" (the C engine), or "numpy" / "c" (tests run each path on every shape); the numpy
# blocks stay as the reference
_BWD_PATH = "auto"


def _bwd_in_c(L, S, E, Ev):
    return _BWD_PATH != "numpy" and E > 0 and Ev > 0


def _backward_blocks(gf, qf, kf, vf, mask, is_causal, s, drop, cdt):
    """The numpy reference of the backward on (batch, rows, features) operands: blocks of 128
    queries through pytpp.matmul -> (dq, dk, dv)."""
    from pytpp import linalg
    from pytpp.nn._activations import softmax
    batch, L, E = qf.shape
    S, Ev = vf.shape[1:]
    dq = np.zeros((batch, L, E), cdt)
    dk = np.zeros((batch, S, E), cdt)
    dv = np.zeros((batch, S, Ev), cdt)
    kt, vt = np.swapaxes(kf, 1, 2), np.swapaxes(vf, 1, 2)
    for i0 in range(0, L, _BWD_BLOCK):
        i1 = min(L, i0 + _BWD_BLOCK)
        sc = linalg.matmul(qf[:, i0:i1], kt)                       # (batch, bq, S)
        sc *= cdt.type(s)
        if mask is not None:
            sc += mask[:, i0:i1]
        if is_causal:
            sc[:, np.arange(S)[None, :] > np.arange(i0, i1)[:, None]] = -np.inf
        with np.errstate(invalid="ignore"):
            p = softmax(sc, axis=-1, out=sc)
        if mask is not None:
            np.nan_to_num(p, copy=False, nan=0.0)                     # fully masked rows
        pd = p
        if drop[1]:
            keep = _keep_factors(batch, L, S, i0, i1, drop, cdt)
            pd = p * keep                                             # the probabilities V saw
        dv += linalg.matmul(np.swapaxes(pd, 1, 2), gf[:, i0:i1])
        ds = linalg.matmul(gf[:, i0:i1], vt)                          # dP, then dS in place
        if drop[1]:
            ds *= keep
        # rowsum(dO * O) as rowsum(dP * P): O = P V is not formed again
        ds -= np.einsum("bls,bls->bl", ds, p)[..., None]
        ds *= p
        # the scale goes on the (bq, E) and (S, E) products, not on the (bq, S) block
        dq[:, i0:i1] = linalg.matmul(ds, kf)
        dq[:, i0:i1] *= cdt.type(s)
        dk += linalg.matmul(np.swapaxes(ds, 1, 2), qf[:, i0:i1])

    dk *= cdt.type(s)
    return dq, dk, dv
