"""Benchmark reports as JSON: `python -m pytpp bench CASE... --json FILE`.

A report is one object::

    {"format": 1,
     "machine": {...},                 # _machine.machine(): CPU, ISA level, peaks, versions, date
     "settings": {...},                # the command's cases, threads, quick, repeats, match
     "rows": [{"case", "impl", "library", "threads", "median_s", "best_s", "rate", "unit",
               "pct_peak", "speedup_of_pytpp", "flops", "bytes", "peak_kind"}, ...]}

with one row per case, implementation and thread count, in the order they ran. `flops` and
`bytes` are the work of one call (None where a case does not know it).
"""
import json

FORMAT = 1


def build(machine, rows, settings):
    """The report object (see the module docstring)."""
    return {"format": FORMAT, "machine": machine, "settings": settings, "rows": list(rows)}


def write(report, path):
    """Write `report` to `path` as JSON."""
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")


def read(path):
    """The report in `path`; ValueError when it is not a pytpp benchmark report."""
    with open(path) as f:
        report = json.load(f)
    if not (isinstance(report, dict) and isinstance(report.get("rows"), list)
            and isinstance(report.get("machine"), dict)):
        raise ValueError(f"{path}: not a pytpp benchmark report (expected an object with "
                         f"'machine' and 'rows'; write one with `python -m pytpp bench CASE "
                         f"--json FILE`)")
    return report
