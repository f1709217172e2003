"""`python -m pytpp bench [CASE...]`: run benchmark cases, each module of this package."""
import importlib
import pkgutil

import pytpp.benchmarks as _pkg
from pytpp.benchmarks._harness import Harness, print_peaks


def available():
    return sorted(m.name for m in pkgutil.iter_modules(_pkg.__path__)
                  if not m.name.startswith("_") and m.name != "run")


def _in_default_run(name):
    # a module that starts its own cluster (dask) runs only when named
    return getattr(importlib.import_module(f"pytpp.benchmarks.{name}"), "IN_DEFAULT_RUN", True)


def main(cases=(), threads="1", quick=False, repeats=None):
    names = list(cases) or [n for n in available() if _in_default_run(n)]
    unknown = [c for c in names if c not in available()]
    if unknown:
        raise SystemExit(f"unknown benchmark(s) {unknown}; available: {available()}")
    thread_counts = tuple(int(t) for t in str(threads).split(",") if t)
    h = Harness(thread_counts, quick=quick, repeats=repeats)
    import pytpp
    pytpp.show_config()
    print_peaks(h)
    print("columns: case, implementation, threads, median and best time, median rate (best), "
          "% of measured peak, pytpp speedup over that implementation (median; >1 = pytpp faster)")
    for name in names:
        importlib.import_module(f"pytpp.benchmarks.{name}").run(h)
    return 0
