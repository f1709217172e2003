"""Timing and reporting shared by every benchmark case.

Rules (PERF-NOTES): reuse output buffers, warm up, time many short repetitions, report median and
best, and compare against the peers measured in the same run. Rates are also shown as % of the
peak measured at the start of the run (`python -m pytpp info` loops).
"""
import statistics
import time

import numpy as np

import pytpp
from pytpp import _info


def optional_import(name):
    try:
        return __import__(name)
    except Exception:  # noqa: BLE001 - a broken optional peer is just absent
        return None


class Harness:
    def __init__(self, threads=(1,), quick=False, repeats=None, out=print):
        self.threads = tuple(threads)
        self.quick = quick
        self.repeats = repeats or (10 if quick else 30)
        self.out = out
        self.torch = optional_import("torch")
        self._peaks = None
        self.rows = []

    # ---- machine limits -------------------------------------------------------------
    def peaks(self):
        if self._peaks is None:
            self._peaks = _info.measure(threads=max(self.threads), quick=True)
        return self._peaks

    def peak(self, kind, threads):
        """Measured peak for `kind` ('f64', 'f32', 'bf16', 'int8', 'read_gbs', 'copy_gbs')."""
        p = self.peaks()
        if threads in p:
            return p[threads][kind]
        one = p[1][kind]
        return None if one is None else one * threads

    # ---- thread control ---------------------------------------------------------------
    def set_threads(self, n):
        """Same thread count for pytpp, numpy's BLAS and torch."""
        pytpp.set_num_threads(n)
        from threadpoolctl import threadpool_limits
        self._limits = threadpool_limits(n, user_api="blas")
        if self.torch is not None:
            self.torch.set_num_threads(n)

    # ---- timing -----------------------------------------------------------------------
    def time(self, fn, repeats=None, warmup=3, min_seconds=0.0):
        """(median, best) seconds of fn() over `repeats` calls after `warmup` calls.
        Calls that take under ~50 us are batched into loops so timer overhead stays small."""
        for _ in range(warmup):
            fn()
        t0 = time.perf_counter()
        fn()
        single = time.perf_counter() - t0
        inner = max(1, int(5e-5 / max(single, 1e-9)))
        samples = []
        repeats = repeats or self.repeats
        start = time.perf_counter()
        while len(samples) < repeats or time.perf_counter() - start < min_seconds:
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            samples.append((time.perf_counter() - t0) / inner)
        return statistics.median(samples), min(samples)

    # ---- reporting --------------------------------------------------------------------
    def header(self, title):
        self.out(f"\n== {title}")

    def compare(self, case, threads, work, unit, peak_kind, impls):
        """Time each (name, fn) in `impls` (pytpp first) and print one row per implementation.

        work: flops (unit 'GFLOP/s'/'GOP/s') or bytes (unit 'GB/s') per call.
        Ratio column: pytpp's median rate over this implementation's median rate.
        """
        results = []
        for name, fn in impls:
            if fn is None:
                continue
            med, best = self.time(fn)
            results.append((name, med, best))
        peak = self.peak(peak_kind, threads) if peak_kind else None
        base = results[0][1]
        for name, med, best in results:
            rate_med, rate_best = work / med / 1e9, work / best / 1e9
            pct = f"{100 * rate_med / peak:5.1f}%" if peak else "   n/a"
            ratio = base and med / base
            self.out(f"{case:38s} {name:16s} t={threads} {med * 1e6:11.1f} us (best {best * 1e6:10.1f})"
                     f" {rate_med:8.1f} {unit} (best {rate_best:7.1f}) {pct} of peak"
                     f"  pytpp x{ratio:5.2f}")
            self.rows.append(dict(case=case, impl=name, threads=threads, median_s=med, best_s=best,
                                  rate=rate_med, unit=unit, pct_peak=(rate_med / peak) if peak else None,
                                  speedup_of_pytpp=ratio))
        return results


def print_peaks(h):
    _info.print_measured(h.peaks(), file=None)
