"""Autotuning of the loop-string GEMM (paper 001 II-D, II-E): candidate strings from the paper's
constraints, ranked by a performance model (a per-thread trace of the A, B, C block slices each
body call touches, run through LRU caches of L2 and the thread's share of L3; a call costs the
larger of its FMAs at peak and its L2 traffic, plus the slices it waits for from L3 or memory), the top classes timed, the
best persisted per (CPU, shape, dtype, threads) in the user cache directory.

``python -m pytpp tune gemm M N K`` shows the ranking with a progress bar; ``--exhaustive``
also times every candidate and sets the tuned string beside the fastest (001 V-A3).
"""
from __future__ import annotations

import contextlib
import itertools
import json
import os
import sys
import time
from collections import OrderedDict

import numpy as np

from pytpp import loops as _loops

#: cores' per-cycle figures for the model (AVX2 + FMA: two 8-lane FMAs; 64/32/16 bytes per
#: cycle from L1/L2/L3); memory bandwidth and clock come from the environment or defaults
CYCLE_FLOPS = {4: 32.0, 8: 16.0}
LEVEL_BYTES_PER_CYCLE = (64.0, 32.0, 16.0)
CLOCK_HZ = 3.0e9
MEMORY_GBS = 20.0


def cache_path() -> str:
    """Where tuned strings are kept: $PYTPP_TUNE_CACHE, else $XDG_CACHE_HOME/pytpp/tune.json,
    else ~/.cache/pytpp/tune.json (the platformdirs location on Linux)."""
    env = os.environ.get("PYTPP_TUNE_CACHE")
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pytpp", "tune.json")


def _key(m, n, k, dtype, threads):
    from pytpp._core import _runtime
    return f"{_runtime.cpu_brand()}|gemm|{m}x{n}x{k}|{np.dtype(dtype).name}|t{threads}"


def _load():
    try:
        with open(cache_path()) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _store(key, value):
    data = _load()
    data[key] = value
    path = cache_path()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def tuned(m, n, k, dtype=np.float32, threads=None):
    """The persisted best string for this problem on this CPU, or None."""
    threads = threads or _threads()
    got = _load().get(_key(m, n, k, dtype, threads))
    return got["best"] if got else None


def _threads():
    from pytpp._core import _runtime
    return _runtime.effective_num_threads()


@contextlib.contextmanager
def _running_on(threads):
    """pytpp's kernels on `threads` threads for the timed runs (the count is restored after):
    a tuning for one thread is timed on one."""
    from pytpp._core import _runtime
    before = _runtime.get_num_threads()
    _runtime.set_num_threads(threads)
    try:
        yield
    finally:
        _runtime.set_num_threads(before)


def candidates(max_blocking=(1, 2, 2)):
    """Loop strings under 001's constraints: a appearing up to max_blocking[0] times, b and c
    up to max_blocking[1/2] times; every order; one parallel loop or two consecutive ones among
    the occurrences of b and c (the independent M and N blocks; K is never parallel). The
    default keeps a whole (001 allows 2 and 3 appearances: ~1000 strings, beyond the model's
    budget in Python); a's batch already holds the K blocks that fit half of L2."""
    out = []
    for oa, ob, oc in itertools.product(*(range(1, x + 1) for x in max_blocking)):
        letters = "a" * oa + "b" * ob + "c" * oc
        for perm in sorted(set(itertools.permutations(letters))):
            s = "".join(perm)
            pos = [i for i, ch in enumerate(s) if ch in "bc"]
            for i in pos:
                out.append(s[:i] + s[i].upper() + s[i + 1:])
                if i + 1 < len(s) and s[i + 1] in "bc" and s[i + 1] != s[i]:
                    out.append(s[:i] + s[i:i + 2].upper() + s[i + 2:])
    return out


class _LRU:
    def __init__(self, capacity):
        self.cap, self.used, self.items = capacity, 0, OrderedDict()

    def touch(self, key, size):
        """True when key was held; key becomes the most recent either way."""
        hit = key in self.items
        if hit:
            self.items.move_to_end(key)
            return True
        self.items[key] = size
        self.used += size
        while self.used > self.cap and self.items:
            _, s = self.items.popitem(last=False)
            self.used -= s
        return False


def model(spec, m, n, k, dtype=np.float32, threads=1, caches=(32 << 10, 512 << 10, 32 << 20)):
    """Predicted seconds of the loop-string GEMM under `spec` (001 II-E)."""
    from pytpp.linalg import _loop_gemm as lg
    esz = np.dtype(dtype).itemsize
    loop, (bm, bn, bk, mb, nb, kb), k_step = lg.plan(m, n, k, spec, esz)
    loop.num_threads = threads if not loop.grid else loop.num_threads
    trace = loop.trace()
    a_sz, b_sz, c_sz = bm * bk * k_step * esz, bk * bn * k_step * esz, bm * bn * esz
    flops = 2.0 * bm * bn * bk * k_step
    peak = CYCLE_FLOPS[esz] * CLOCK_HZ
    bws = [b * CLOCK_HZ for b in LEVEL_BYTES_PER_CYCLE] + [MEMORY_GBS * 1e9 / max(threads, 1)]
    l3_share = caches[2] // max(threads, 1)
    # the threads' traces are alike: the longest one is simulated (L1 holds no whole slice of
    # 64 x 64 blocks worth tracking: L2, L3 and memory)
    ind_list = max(trace.values(), key=len) if trace else []
    levels = [_LRU(caches[1]), _LRU(l3_share)]
    t = 0.0
    for ik, im, iN in ind_list:
        near = far = 0.0
        for key, size in ((("A", im, ik), a_sz), (("B", iN, ik), b_sz), (("C", im, iN), c_sz)):
            where = 2
            for lvl in (1, 0):
                if levels[lvl].touch(key, size):
                    where = lvl
            if where == 0:
                near += size / bws[1]
            else:
                far += size / bws[where + 1]
        # L2 traffic overlaps the FMAs; a slice from L3 or memory is waited for at the start
        # of the call (the kernels prefetch within a call, not across calls)
        t += max(flops / peak, near) + far
    worst = t
    return worst


def tune_gemm(m, n, k, dtype=np.float32, threads=None, top=5, progress=True, out=None,
              persist=True, max_candidates=None, min_timed=12):
    """Rank every candidate string by the model, time the best of each of the `top` model
    classes (a class: candidates whose prediction agrees within 2%) and, while fewer than
    `min_timed` distinct loop nests are timed, the next candidates in model order; persist the
    fastest. On one thread strings that differ only in case (which loops are parallel) are one
    nest, timed once. Returns {"best", "ranking": [(string, predicted s, measured s or None)],
    "classes"}."""
    threads = threads or _threads()
    out = out if out is not None else sys.stderr
    cands = candidates()
    if max_candidates:
        cands = cands[:max_candidates]
    preds = []
    t0 = time.perf_counter()
    for i, s in enumerate(cands):
        preds.append((model(s, m, n, k, dtype, threads), s))
        if progress:
            _bar(out, "model", i + 1, len(cands), t0)
    preds.sort()
    classes = []
    for p, s in preds:
        if classes and p <= classes[-1][0][0] * 1.02:
            classes[-1].append((p, s))
        else:
            classes.append([(p, s)])
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    c = np.empty((m, n), dtype)
    import pytpp
    timed = {}
    def nest(s):   # one thread runs every loop serially: the case of a letter is moot
        return s.lower() if threads == 1 else s

    picks, seen = [], set()
    # the first of each of the `top` classes, then further candidates in model order (the
    # model's classes can be wide: for 2048^3 on Zen 3, 164 of 280 strings share the first)
    for p, s in [cl[0] for cl in classes[:top]] + preds:
        if nest(s) not in seen and (len(picks) < top or len(seen) < min_timed):
            picks.append((p, s))
            seen.add(nest(s))
    t0 = time.perf_counter()
    with _running_on(threads):
        for i, (p, s) in enumerate(picks):
            pytpp.matmul(a, b, out=c, loops=s)
            best = min(_time_once(lambda: pytpp.matmul(a, b, out=c, loops=s)) for _ in range(3))
            timed[s] = best
            if progress:
                _bar(out, "time ", i + 1, len(picks), t0)
    best = min(timed, key=timed.get)
    result = {"best": best, "ranking": [(s, p, timed.get(s)) for p, s in preds],
              "classes": [[s for _, s in cl] for cl in classes[:top]]}
    if persist:
        _store(_key(m, n, k, dtype, threads), {"best": best, "seconds": timed[best],
                                                "predicted": dict((s, p) for p, s in preds[:20])})
    return result


def exhaustive_check(m, n, k, dtype=np.float32, threads=None, top=5, reps=2, progress=True,
                     out=None):
    """The check of 001 V-A3 on this machine: every candidate timed (best of `reps` runs), set
    beside the model's choice. Returns {"exhaustive_best", "exhaustive_s", "tuned", "tuned_s",
    "ratio" (tuned / exhaustive best), "in_top_classes" (the exhaustive best lies in one of the
    model's `top` classes), "seconds" (tuning time)}. Nothing is persisted."""
    threads = threads or _threads()
    out = out if out is not None else sys.stderr
    t0 = time.perf_counter()
    r = tune_gemm(m, n, k, dtype, threads, top=top, progress=False, persist=False)
    tuning_s = time.perf_counter() - t0
    import pytpp
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    c = np.empty((m, n), dtype)
    timed = {}
    strings = [row[0] for row in r["ranking"]]
    t0 = time.perf_counter()
    with _running_on(threads):
        for i, s in enumerate(strings):
            pytpp.matmul(a, b, out=c, loops=s)
            timed[s] = min(_time_once(lambda: pytpp.matmul(a, b, out=c, loops=s))
                           for _ in range(reps))
            if progress:
                _bar(out, "all  ", i + 1, len(strings), t0)
        best = min(timed, key=timed.get)
        # the fastest of many noisy timings is biased low: the two finalists are timed again
        # in turn, and their ratio taken from those runs alone
        final = {best: [], r["best"]: []}
        for _ in range(5 * reps):
            for s in final:
                final[s].append(_time_once(lambda: pytpp.matmul(a, b, out=c, loops=s)))
    best_s, tuned_s = min(final[best]), min(final[r["best"]])
    return {"exhaustive_best": best, "exhaustive_s": best_s, "tuned": r["best"],
            "tuned_s": tuned_s, "ratio": tuned_s / best_s,
            "in_top_classes": any(best in cl for cl in r["classes"]), "seconds": tuning_s}


def _time_once(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _bar(out, what, i, total, t0):
    if out is None:
        return
    w = 30
    done = int(w * i / max(total, 1))
    out.write(f"\r{what} [{'#' * done}{'.' * (w - done)}] {i}/{total} "
              f"{time.perf_counter() - t0:5.1f}s")
    if i == total:
        out.write("\n")
    out.flush()


def main(argv):
    """``python -m pytpp tune gemm M N K [--dtype float32] [--top 5] [--threads T]
    [--exhaustive]``"""
    import argparse
    p = argparse.ArgumentParser(prog="python -m pytpp tune")
    p.add_argument("kernel", choices=["gemm"])
    p.add_argument("m", type=int)
    p.add_argument("n", type=int)
    p.add_argument("k", type=int)
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--top", type=int, default=5)
    p.add_argument("--threads", type=int, default=None,
                   help="threads to tune for (default: pytpp's thread count)")
    p.add_argument("--exhaustive", action="store_true",
                   help="also time every candidate and compare the tuned string with the best")
    args = p.parse_args(argv)
    if args.threads is not None and args.threads < 1:
        p.error(f"--threads must be >= 1, got {args.threads}")
    threads = args.threads or _threads()
    import pytpp
    if args.exhaustive:
        e = exhaustive_check(args.m, args.n, args.k, np.dtype(args.dtype), threads=threads,
                             top=args.top)
        flops = 2.0 * args.m * args.n * args.k
        print(f"gemm {args.m}x{args.n}x{args.k} {args.dtype}, {threads} threads, ISA "
              f"{pytpp.get_isa()}: tuned {e['tuned']!r} {flops / e['tuned_s'] / 1e9:.1f} GFLOP/s "
              f"in {e['seconds']:.1f} s; exhaustive best {e['exhaustive_best']!r} "
              f"{flops / e['exhaustive_s'] / 1e9:.1f} GFLOP/s; tuned / best time "
              f"{e['ratio']:.3f}; best in the model's top-{args.top} classes: "
              f"{e['in_top_classes']}")
        return 0
    t0 = time.perf_counter()
    r = tune_gemm(args.m, args.n, args.k, np.dtype(args.dtype), threads=threads, top=args.top)
    flops = 2.0 * args.m * args.n * args.k
    print(f"gemm {args.m}x{args.n}x{args.k} {args.dtype}, {threads} threads, "
          f"ISA {pytpp.get_isa()}: {len(r['ranking'])} candidates, tuned in "
          f"{time.perf_counter() - t0:.1f} s")
    print(f"{'rank':>4s}  {'string':24s} {'model ms':>9s} {'measured ms':>12s} {'GFLOP/s':>8s}")
    shown = [(i, row) for i, row in enumerate(r["ranking"]) if i < 10 or row[2] is not None]
    for i, (s, pred, meas) in shown:
        g = f"{flops / meas / 1e9:8.1f}" if meas else ""
        ms = f"{meas * 1e3:.2f}" if meas else ""
        print(f"{i + 1:4d}  {s:24s} {pred * 1e3:9.2f} {ms:>12s} {g}")
    print(f"best: {r['best']!r} (kept in {cache_path()})")
    return 0
