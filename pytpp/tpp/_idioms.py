"""Idioms of TPP equations (paper 000, 4.3): whole trees recognised as a known composite and run
by the fused kernel written for it, the instruction sequence the composite access pattern
wants, instead of node by node.

- softmax over rows: ``exp(x - max(x)) / sum(exp(x - max(x)))`` -> the softmax row kernel
  (max, exp and sum, scale: three passes over a row held in cache);
- layer normalisation over rows: ``xc * rsqrt(sum(square(xc)) / n + eps)`` with
  ``xc = x - sum(x) / n``, optionally ``* g + b`` (as ``muladd`` or a product and a sum) with g,
  b rows -> the layer_norm row kernel (statistics and output in one read of the row).

A tree matches structurally (the same input indices and constants; a subexpression may be one
object or written twice). Only ``strategy="auto"`` takes an idiom, and only for operands of the
shapes the kernel takes (x dense (m, n), g and b (1, n)) and an output apart from them; anything
else runs the general plan. The results are the kernels' own: within the equation's tolerance of
the node-by-node evaluation, not bit for bit (other summation orders).
"""
from __future__ import annotations

import numpy as np

from pytpp._core import _eltwise as _ew
from pytpp._core import _norm
from pytpp._core import _runtime


def _same(a, b):
    """Structurally equal expressions (one object, or the same kinds, ops, values, children)."""
    if a is b:
        return True
    if a.kind != b.kind or a.op != b.op or a.value != b.value:
        return False
    return len(a.children) == len(b.children) and all(
        _same(x, y) for x, y in zip(a.children, b.children))


def _is(e, kind, op=None):
    return e.kind == kind and (op is None or e.op == op)


def _input(e):
    return e.value if e.kind == "input" else None


def _const(e):
    return e.value if e.kind == "const" else None


def _softmax(e):
    """x's index when e is exp(x - max(x)) / sum(exp(x - max(x)))."""
    if not (_is(e, "binary", "div") and _is(e.children[1], "reduce", "sum")):
        return None
    num, den = e.children[0], e.children[1].children[0]
    if not _same(num, den) or not _is(num, "unary", "exp"):
        return None
    d = num.children[0]
    if not (_is(d, "binary", "sub") and _is(d.children[1], "reduce", "max")):
        return None
    x, mx = d.children[0], d.children[1].children[0]
    return _input(x) if _input(x) is not None and _same(x, mx) else None


def _mean_of(e, n):
    """The expression averaged when e is sum(v) / n or sum(v) * (1 / n) (n exact)."""
    if _is(e, "binary", "div") and _is(e.children[0], "reduce", "sum"):
        if _const(e.children[1]) == float(n):
            return e.children[0].children[0]
    if _is(e, "binary", "mul"):
        for s, c in (e.children, e.children[::-1]):
            if _is(s, "reduce", "sum") and _const(c) == 1.0 / n:
                return s.children[0]
    return None


def _normalised(e, n):
    """(x index, eps) when e is (x - mean(x)) * rsqrt(mean(square(x - mean(x))) + eps)."""
    if not _is(e, "binary", "mul"):
        return None
    for xc, inv in (e.children, e.children[::-1]):
        if not (_is(inv, "unary", "rsqrt") and _is(inv.children[0], "binary", "add")):
            continue
        for var, eps in (inv.children[0].children, inv.children[0].children[::-1]):
            eps = _const(eps)
            sq = _mean_of(var, n)
            if eps is None or eps < 0 or sq is None or not _is(sq, "unary", "square"):
                continue
            if not _same(sq.children[0], xc) or not _is(xc, "binary", "sub"):
                continue
            x, mean = xc.children
            if _input(x) is not None and (m := _mean_of(mean, n)) is not None and _same(m, x):
                return _input(x), eps
    return None


def _layer_norm(e, n):
    """(x, g or None, b or None, eps) of a layer-normalisation tree over rows of n."""
    parts = None
    if _is(e, "ternary", "muladd"):
        parts = e.children
    elif _is(e, "binary", "add") and _is(e.children[0], "binary", "mul"):
        parts = (*e.children[0].children, e.children[1])
    if parts is not None and _input(parts[1]) is not None and _input(parts[2]) is not None:
        got = _normalised(parts[0], n)
        if got is not None:
            return got[0], _input(parts[1]), _input(parts[2]), got[1]
    if _is(e, "binary", "mul"):
        for norm, g in (e.children, e.children[::-1]):
            got = _normalised(norm, n) if _input(g) is not None else None
            if got is not None:
                return got[0], _input(g), None, got[1]
    got = _normalised(e, n)
    return None if got is None else (got[0], None, None, got[1])


def match(expr, shape, dtype, input_dtypes):
    """The idiom `expr` is, for results of `shape` and `dtype`, as (name, args) or None."""
    m, n = shape
    if m < 1 or n < 1 or any(np.dtype(d) != np.dtype(dtype) for d in input_dtypes):
        return None
    x = _softmax(expr)
    if x is not None:
        return "softmax", (x,)
    got = _layer_norm(expr, n)
    if got is not None and got[0] not in got[1:3]:
        return "layer_norm", got
    return None


def run(idiom, ops, specs, target, out_code):
    """Runs `idiom` on the call's operands (after the equation's checks: each a 2-D array, its
    spec (ld, storage code, broadcast)) into target (storage code out_code); False when these
    operands are not the kernel's (the caller then runs the general plan)."""
    name, args = idiom
    m, n = target.shape
    x = ops[args[0]]
    params = [i for i in args[1:3] if i is not None] if name == "layer_norm" else []
    # x dense (m, n), unit column stride; g and b rows (1, n); nothing over the output
    if x.shape != (m, n) or (n > 1 and x.strides[1] != x.itemsize):
        return False
    if any(ops[i].shape != (1, n) for i in params):
        return False
    if any(np.may_share_memory(ops[i], target) for i in [args[0], *params]):
        return False
    ldx, xcode, _ = specs[args[0]]
    if name == "softmax":
        ldy = target.strides[0] // target.itemsize if m > 1 else n
        cdt = _ew.F64 if x.dtype == np.float64 else _ew.F32
        _ew.run(_ew.KIND_SOFTMAX, 0, m, n, ((x, ldx, xcode, 0),), (target, ldy, out_code), cdt,
                _runtime.active_isa_index())
        return True
    _, g, b, eps = args
    cdt = np.float64 if x.dtype == np.float64 else np.float32
    w = None if g is None else np.ascontiguousarray(ops[g].reshape(-1), dtype=cdt)
    bias = None if b is None else np.ascontiguousarray(ops[b].reshape(-1), dtype=cdt)
    _norm.forward(_norm.LAYER, x, w, bias, eps, target, np.empty(m, cdt), np.empty(m, cdt))
    return True
