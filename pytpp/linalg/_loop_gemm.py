"""``pytpp.matmul(a, b, loops="...")``: 001 Listing 1's GEMM, a loop-spec string driving BRGEMMs
over blocked layouts, beside the Goto path.

A is read in place when it is C-contiguous (its K blocks are column ranges of its rows; copied
with zero-padded columns otherwise), B is copied into column panels as wide as the BRGEMM's
register blocks (each panel one contiguous stream over K), and the nest of the string runs in C
(pytpp/_core/frame/loops.c) with one stride-mode BRGEMM of ``k_step`` K blocks per panel of a
body call, written straight into C (row-major). Letters: ``a`` the K blocks,
``b`` the M blocks, ``c`` the N blocks. A letter that appears j + 1 times is blocked j times,
with block steps from the prime factors of its block count (001 II-D rule 2: prefix products,
l0 = step * p0 ..., the factors shared evenly among the levels); the innermost step of ``a``
(the BRGEMM batch) keeps a batch's blocks within half of L2.
"""
from __future__ import annotations

import numpy as np

from pytpp import _validate, loops as _loops
from pytpp._core._loops import gemm_panel_width
from pytpp._core._runtime import get_cache_info

_FN = "pytpp.matmul(loops=)"
BM = BN = 64
BK = 64


def _factors(t):
    out, p = [], 2
    while t > 1 and p * p <= t:
        while t % p == 0:
            out.append(p)
            t //= p
        p += 1
    if t > 1:
        out.append(t)
    return out


def block_steps(trips, step, occurrences):
    """The block steps of a letter that appears `occurrences` times over `trips` blocks with
    innermost `step`, outermost first: prefix products of the prime factors of trips / step
    (001 II-D rule 2), the factors shared out evenly among the levels, the outer levels taking
    the extra ones. 32 blocks in three levels: 2 x 4 x 4 trips (steps 8, 2), 1.04x the
    one-factor-per-level 2 x 2 x 8 on 2048^3 fp32 "bcaBCb"."""
    need = occurrences - 1
    if need <= 0:
        return ()
    fs = _factors(max(1, trips // step))
    base, extra = divmod(len(fs), need + 1)
    steps, acc, used = [], step, 0
    for j in range(need):   # level j (0 = innermost) holds base factors, + 1 among the outer ones
        take = base + (1 if need - j <= extra - 1 else 0)
        for f in fs[used:used + take]:
            acc *= f
        used += take
        steps.append(acc)
    return tuple(reversed(steps))


def plan(m, n, k, spec, esz=4):
    """(ThreadedLoop, block sizes, k_step) for an m x k x n product under the string `spec`."""
    parsed = _loops.parse(spec)
    for lv in parsed.levels:
        if lv.loop == 0 and lv.parallel:
            raise ValueError(_loops._error("the K loop (a) cannot be parallel: two threads "
                                           "would add into one block of C", spec, lv.pos,
                                           _FN).args[0])
    bm, bn, bk = min(BM, max(m, 1)), min(BN, max(n, 1)), min(BK, max(k, 1))
    mb, nb, kb = -(-m // bm), -(-n // bn), -(-k // bk)
    # a missing or extra letter is refused by ThreadedLoop below, marked in the string
    occ = tuple(parsed.occurrences[i] if i < parsed.nloops else 1 for i in range(3))
    # one BRGEMM reduces k_step K blocks: as many as keep its A and B blocks within half of L2,
    # so the BRGEMM holds each C tile in registers over the whole batch (beyond L2 it would
    # reduce in short chunks, storing and reloading C between them); fewer, longer reductions
    # load and store C less often (2048^3 fp32, 1 MiB L2: 8 blocks 0.95x pytpp.matmul, 16 0.99x)
    pair = (bm * bk + bk * bn) * esz
    k_step = max(1, min(kb, get_cache_info()["l2"] // 2 // pair))
    if parsed.schedule != "static" and occ[0] > 1 or (parsed.schedule != "static" and kb > k_step):
        first_par = next((lv.pos for lv in parsed.levels if lv.parallel), len(spec))
        outer_a = [lv for lv in parsed.levels if lv.loop == 0 and lv.pos < first_par]
        if outer_a:
            raise ValueError(_loops._error(
                "a K loop outside dynamically scheduled loops: two threads could update one "
                "block of C at once (put the K loops inside, or use a static schedule)", spec,
                outer_a[0].pos, _FN).args[0])
    specs = [_loops.LoopSpec(0, kb, k_step, block_steps(kb, k_step, occ[0])),
             _loops.LoopSpec(0, mb, 1, block_steps(mb, 1, occ[1])),
             _loops.LoopSpec(0, nb, 1, block_steps(nb, 1, occ[2]))]
    return _loops.ThreadedLoop(specs, spec), (bm, bn, bk, mb, nb, kb), k_step


def _a_rows(a, kp, dt):
    """A as rows of kp elements (unit column stride), zero beyond its k columns: A itself when
    it already is one."""
    m, k = a.shape
    if k == kp and a.dtype == dt and a.flags.c_contiguous:
        return a
    out = np.empty((m, kp), dt)
    out[:, k:] = 0
    out[:, :k] = a
    return out


def matmul_loops(a, b, spec, out=None):
    """a @ b for 2-D float32 / float64 operands under the loop-spec string `spec`."""
    if not isinstance(spec, str):
        raise TypeError(f"{_FN}: loops must be a str, got {type(spec).__name__}")
    a = _validate.contraction_operand(a, "a", _FN)
    b = _validate.contraction_operand(b, "b", _FN)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"{_FN}: loops= takes 2-D operands, got shapes {a.shape} and {b.shape}")
    dt = _validate.promote(a.dtype, b.dtype)
    if dt not in _validate.FLOAT_TYPES:
        dt = _validate.F32
    m, k = a.shape
    k2, n = b.shape
    if k != k2:
        raise ValueError(f"{_FN}: core dimensions do not match: {a.shape} @ {b.shape}")
    loop, (bm, bn, bk, mb, nb, kb), k_step = plan(m, n, k, spec, np.dtype(dt).itemsize)
    if out is not None:
        _validate.check_out(out, (m, n), dt, _FN)
    if m == 0 or n == 0:
        res = np.zeros((m, n), dt)
    elif k == 0:
        res = np.zeros((m, n), dt)
    else:
        pw = gemm_panel_width(bool(dt == np.float64), bn)
        arows = _a_rows(a, kb * bk, dt)
        if b.dtype != dt or any(st % b.itemsize for st in b.strides):
            b = np.ascontiguousarray(b, dtype=dt)
        direct = (out is not None and out.dtype == dt and out.flags.c_contiguous
                  and not np.may_share_memory(out, arows))
        res = out if direct else np.empty((m, n), dt)
        loop.c_nest().gemm(loop.num_threads, arows, b, res, m, n, kb, bm, bn, bk, k_step, pw)
        if direct:
            return out
    if out is not None:
        out[...] = res
        return out
    return res
