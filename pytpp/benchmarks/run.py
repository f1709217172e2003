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


def main(cases=(), threads="1", quick=False, repeats=None, json_path=None, plot_path=None,
         match=None):
    """Run the benchmark modules `cases` (default: all that run by default) and print a table.

    json_path: also write the report (machine, settings, rows) there; plot_path: also draw it
    there as a PNG (needs matplotlib, checked before anything runs); match: time only the cases
    whose name contains this text.
    """
    names = list(cases) or [n for n in available() if _in_default_run(n)]
    unknown = [c for c in names if c not in available()]
    if unknown:
        raise SystemExit(f"unknown benchmark(s) {unknown}; available: {available()}")
    if plot_path:
        from pytpp.benchmarks import _plot
        try:
            _plot.require()
        except ImportError as e:
            raise SystemExit(f"python -m pytpp bench: {e}") from None
    from pytpp.benchmarks import _machine, _progress, _report
    thread_counts = tuple(int(t) for t in str(threads).split(",") if t)
    progress = _progress.Progress()
    h = Harness(thread_counts, quick=quick, repeats=repeats, out=progress.printer(print),
                match=match, progress=progress)
    import pytpp
    pytpp.show_config()
    print_peaks(h)
    machine = _machine.machine(h.peaks())   # before set_threads: the ISA and defaults as found
    print("columns: case, implementation, threads, median and best time, median rate (best), "
          "% of measured peak, pytpp speedup over that implementation (median; >1 = pytpp faster)")
    for i, name in enumerate(names):
        progress.begin(i + 1, len(names), name)
        importlib.import_module(f"pytpp.benchmarks.{name}").run(h)
    progress.clear()
    settings = dict(cases=names, threads=list(thread_counts), quick=quick, repeats=h.repeats,
                    match=match)
    report = _report.build(machine, h.rows, settings)
    if json_path:
        _report.write(report, json_path)
        print(f"report: {len(h.rows)} rows written to {json_path}")
    if plot_path:
        _plot.plot(report, plot_path)
        print(f"plot: {plot_path}")
    return 0
