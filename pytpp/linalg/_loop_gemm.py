"""``pytpp.matmul(a, b, loops="...")``: 001 Listing 1's GEMM, a loop-spec string driving BRGEMMs
over blocked layouts, beside the Goto path.

A is packed into blocks [Mb][Kb][bm][bk], B into [Nb][Kb][bk][bn] (zero-padded), and the nest
of the string runs in C (pytpp/_core/frame/loops.c) with one stride-mode BRGEMM of ``k_step``
block pairs per body call, written straight into C (row-major). Letters: ``a`` the K blocks,
``b`` the M blocks, ``c`` the N blocks. A letter that appears j + 1 times is blocked j times,
with block steps from the prime factors of its block count (001 II-D rule 2: l0 = step * p0,
l1 = step * p0 * p1, ...); the innermost step of ``a`` (the BRGEMM batch) keeps a batch's
blocks within half of L2.
"""
from __future__ import annotations

import numpy as np

from pytpp import _validate, loops as _loops

_FN = "pytpp.matmul(loops=)"
BM = BN = 64
BK = 64
L2_BUDGET = 256 * 1024


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
    innermost `step`: prefix products of the prime factors of trips / step, outermost first."""
    need = occurrences - 1
    if need <= 0:
        return ()
    fs = _factors(max(1, trips // step)) or [1]
    steps, acc = [], step
    for j in range(need):
        acc *= fs[j] if j < len(fs) else 1
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
    # reduce in short chunks, storing and reloading C between them)
    pair = (bm * bk + bk * bn) * esz
    k_step = max(1, min(kb, L2_BUDGET // pair))
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


def _blocked(x, br, bc, dt, order):
    """x (r x c) in blocks of br x bc, zero-padded, the block axes (row block, row in block,
    column block, column in block) permuted by `order`: one copy pass when the blocks divide x
    (a padded copy first otherwise)."""
    r, c = x.shape
    rb, cb = -(-r // br), -(-c // bc)
    if r % br or c % bc:
        xp = np.zeros((rb * br, cb * bc), dt)
        xp[:r, :c] = x
        x = xp
    x = np.asarray(x, dtype=dt)
    out = np.empty(tuple((rb, br, cb, bc)[i] for i in order), dt)
    np.copyto(out, x.reshape(rb, br, cb, bc).transpose(order))
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
        ablk = _blocked(a, bm, bk, dt, (0, 2, 1, 3))    # [Mb][Kb][bm][bk]
        bblk = _blocked(b, bk, bn, dt, (2, 0, 1, 3))    # [Nb][Kb][bk][bn]
        direct = (out is not None and out.dtype == dt and out.flags.c_contiguous)
        res = out if direct else np.empty((m, n), dt)
        loop.c_nest().gemm(loop.num_threads, ablk, bblk, res, m, n, kb, bm, bn, bk, k_step)
        if direct:
            return out
    if out is not None:
        out[...] = res
        return out
    return res
