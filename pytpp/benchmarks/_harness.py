"""Timing and reporting shared by every benchmark case.

Rules (PERF-NOTES): reuse output buffers, warm up, time many short repetitions, report median and
best, and compare against the peers measured in the same run. Rates are also shown as % of the
peak measured at the start of the run (`python -m pytpp info` loops).

Every measured row is also kept in `Harness.rows` (a dict per case, implementation and thread
count) for the JSON report, the plots and `bench compare`: times, rate, and the work of one call
as flops and compulsory bytes (each operand read once, the result written once) where the case
knows them, which places it on the roofline.
"""
import importlib
import statistics
import time


import pytpp
from pytpp import _info


def optional_import(name):
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - a broken optional peer is just absent
        return None


def library(impl):
    """The library an implementation label belongs to: its first word ('pytpp.matmul' and
    'pytpp exact' are pytpp, 'np.einsum' is numpy), or 'reference' for a label ending in
    '(ref)': a yardstick timed beside the case (a plain copy next to a transpose, pytpp's fp32
    product next to its bf16 one), neither pytpp's answer nor a peer's."""
    if impl.endswith("(ref)"):
        return "reference"
    word = impl.replace(".", " ").split()[0].lower()
    return {"np": "numpy"}.get(word, word)


def scaled_peak(peaks, kind, threads):
    """The peak of `kind` for `threads` from measured `peaks` ({threads: {kind: value}}, as
    :func:`pytpp._info.measure` returns it, always with an entry for 1 thread)."""
    one = peaks[1].get(kind)
    measured = peaks[threads].get(kind) if threads in peaks else None
    if kind.endswith("_gbs"):  # bandwidth does not scale with cores
        return measured if measured is not None else one
    if kind == "bf16" and one is None:
        # no bf16 dot-product instruction: bf16 products run on the fp32 FMAs at best
        return scaled_peak(peaks, "f32", threads)
    if kind == "int8_7bit" and one is None:
        # no separate 7-bit kernels (AVX-512 levels): 7-bit data runs the 8-bit ones
        return scaled_peak(peaks, "int8", threads)
    if one is None:
        return None
    # Compute scales with cores exactly (PERF-NOTES); a t-thread loop that shared the CPU
    # with another process would understate it and inflate every "% of peak".
    return max(measured or 0.0, one * threads)


class Harness:
    """Times cases and records rows.

    match: only cases whose name contains this text are timed (None: all).
    peaks: preset peaks in the form of :func:`pytpp._info.measure` (None: measured when needed).
    progress: an object with `step(case)` told after each timed case (the command line's
    progress line), or None.
    """

    def __init__(self, threads=(1,), quick=False, repeats=None, out=print, match=None,
                 peaks=None, progress=None):
        self.threads = tuple(threads)
        self.quick = quick
        self.repeats = repeats or (10 if quick else 30)
        self.out = out
        self.match = match
        self.progress = progress
        self.torch = optional_import("torch")
        self._peaks = peaks
        self._evict_buf = None
        self.rows = []
        self.nthreads = 1

    def wants(self, case):
        """True when `case` is to be timed (its name contains the --match text)."""
        return self.match is None or self.match in case

    # ---- machine limits -------------------------------------------------------------
    def peaks(self):
        if self._peaks is None:
            self._peaks = _info.measure(threads=max(self.threads), quick=True)
        return self._peaks

    def peak(self, kind, threads):
        """Measured peak for `kind` ('f64', 'f32', 'bf16', 'int8', 'int8_7bit', 'read_gbs',
        'copy_gbs')."""
        return scaled_peak(self.peaks(), kind, threads)

    # ---- thread control ---------------------------------------------------------------
    def set_threads(self, n):
        """Same thread count for pytpp, numpy's BLAS and torch."""
        pytpp.set_num_threads(n)
        self.nthreads = n
        from threadpoolctl import threadpool_limits
        self._limits = threadpool_limits(n, user_api="blas")
        if self.torch is not None:
            self.torch.set_num_threads(n)

    # ---- timing -----------------------------------------------------------------------
    @staticmethod
    def _warm(fn, warmup):
        """Warm fn up (fewer calls when one call takes seconds); return the seconds of one call."""
        for i in range(max(warmup, 1)):
            t0 = time.perf_counter()
            fn()
            single = time.perf_counter() - t0
            if single > 0.5:
                break
        return single

    def _evict(self):
        """Read a buffer twice the last-level cache: the next call starts with its operands in
        memory and no dirty lines of whatever ran before it to write back on its time."""
        if self._evict_buf is None:
            import numpy as np
            l3 = _info.config()["cache"]["l3"] or (32 << 20)
            self._evict_buf = np.ones(max(2 * l3, 64 << 20) // 8)
        self._evict_buf.sum()

    @staticmethod
    def _sample(fn, inner):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        return (time.perf_counter() - t0) / inner

    def time(self, fn, repeats=None, warmup=3, min_seconds=0.0):
        """(median, best) seconds of fn() over `repeats` calls after `warmup` calls."""
        return self.time_many([fn], repeats, warmup, min_seconds)[0]

    def time_many(self, fns, repeats=None, warmup=3, min_seconds=0.0, budget=10.0, cold=False,
                  hot=False):
        """[(median, best)] seconds per function, sampled in interleaved rounds (one sample of
        each function per round): the machine's speed drifts (PERF-NOTES: cores at half speed
        for a moment), and interleaving makes every function see the same drift, so the ratios
        printed are fair even when the absolute rates move. A function slow enough to need more
        than `budget` seconds for its samples stops early (at least 3 samples): a peer running
        a reference loop (torch bf16 without AVX512_BF16) would otherwise take minutes.
        cold: every sample is one call after :meth:`_evict`, so no function inherits the
        previous one's cache contents (memory-bound cases whose operands outgrow the L2).
        hot: each round takes a block of samples per function after one untimed call, so every
        timed call finds its operands where its own previous call left them (cases timed in
        cache, which a peer's temporaries would otherwise evict between the calls)."""
        singles = [self._warm(fn, warmup) for fn in fns]
        # calls under ~50 us are looped in one sample so the timer's overhead stays small
        inner = [1 if cold else max(1, int(5e-5 / max(t, 1e-9))) for t in singles]
        caps = [max(3, int(budget / max(t, 1e-9))) for t in singles]
        repeats = repeats or self.repeats
        targets = [min(repeats, cap) for cap in caps]
        # Threaded peers keep their worker threads spinning for a while after a call (OpenBLAS
        # for up to ~0.1 s), which steals a core from whoever runs next: with several threads,
        # each round takes a block of samples per function after a pause that lets the other
        # library's pool go to sleep (its first sample, taken while waking up, is dropped).
        threaded = self.nthreads > 1 and len(fns) > 1
        block, settle = (5, 0.15) if threaded else (3, 0.0) if hot else (1, 0.0)
        samples = [[] for _ in fns]
        start = time.perf_counter()
        rnd = 0
        while True:
            more_time = time.perf_counter() - start < min_seconds
            todo = [len(acc) < target or (more_time and len(acc) < cap)
                    for acc, target, cap in zip(samples, targets, caps)]
            if not any(todo):
                break
            # each round starts one function later: a call right after a heavy peer (the numpy
            # composite of the embedding bags: the next call ran 1.3x slower, eviction or
            # not) is every function's turn equally often, not always the same one's
            order = [(rnd + i) % len(fns) for i in range(len(fns))]
            rnd += 1
            for i in order:
                fn, n, acc = fns[i], inner[i], samples[i]
                if not todo[i]:
                    continue
                if threaded:
                    time.sleep(settle)
                if threaded or hot:
                    self._sample(fn, n)
                for _ in range(block):
                    if cold:
                        self._evict()
                    acc.append(self._sample(fn, n))
        return [(statistics.median(s), min(s)) for s in samples]

    # ---- reporting --------------------------------------------------------------------
    def header(self, title):
        self.out(f"\n== {title}")

    def compare(self, case, threads, work, unit, peak_kind, impls, *, nbytes=None, flops=None,
                cold=False, hot=False):
        """Time each (name, fn) in `impls` (pytpp first) and print one row per implementation.

        work: flops (unit 'GFLOP/s'/'GOP/s') or bytes (unit 'GB/s') per call.
        nbytes: compulsory bytes moved per call, for a flop-rated case (None: unknown).
        flops: operations per call of a byte-rated case; element-wise cases count one per
        element, which puts them on the roofline at 1 / (bytes per element) flop/byte.
        Ratio column: pytpp's median rate over this implementation's median rate.
        cold / hot: each call timed from a cleaned cache / after a call of its own
        (:meth:`time_many`).
        Returns [(name, median, best)], empty when the case is not wanted (--match).
        """
        if not self.wants(case):
            return []
        impls = [(name, fn) for name, fn in impls if fn is not None]
        timings = self.time_many([fn for _, fn in impls], cold=cold, hot=hot)
        results = [(name, med, best) for (name, _), (med, best) in zip(impls, timings)]
        peak = self.peak(peak_kind, threads) if peak_kind else None
        base = results[0][1]
        for name, med, best in results:
            rate_med, rate_best = work / med / 1e9, work / best / 1e9
            pct = f"{100 * rate_med / peak:5.1f}%" if peak else "   n/a"
            ratio = base and med / base
            self.out(f"{case:38s} {name:16s} t={threads} {med * 1e6:11.1f} us (best {best * 1e6:10.1f})"
                     f" {rate_med:8.1f} {unit} (best {rate_best:7.1f}) {pct} of peak"
                     f"  pytpp x{ratio:5.2f}")
            self.record(case, name, threads, med, best, work, unit, ratio, peak=peak,
                        peak_kind=peak_kind, nbytes=nbytes, flops=flops)
        if self.progress is not None:
            self.progress.step(case)
        return results

    def record(self, case, impl, threads, median, best, work, unit, speedup_of_pytpp, *,
               peak=None, peak_kind=None, nbytes=None, flops=None):
        """Keep one measured row (the arguments of :meth:`compare`, per implementation)."""
        if unit == "GB/s":
            nbytes = work
        else:
            flops = work
        rate = work / median / 1e9
        self.rows.append(dict(case=case, impl=impl, library=library(impl), threads=threads,
                              median_s=median, best_s=best, rate=rate, unit=unit,
                              pct_peak=rate / peak if peak else None,
                              speedup_of_pytpp=speedup_of_pytpp, flops=flops, bytes=nbytes,
                              peak_kind=peak_kind))


def print_peaks(h):
    _info.print_measured(h.peaks(), file=None)
