"""The "machine" record of a benchmark report: what ran where, so two reports can be compared.

CPU model and features, the ISA level pytpp ran at (named as ``pytpp.get_isa()`` names it), the
peaks measured at the start of the run, the versions of pytpp, Python and every peer library
that is installed, the BLAS numpy loaded, and the date.
"""
import datetime
import importlib.metadata
import platform

import numpy as np

import pytpp
from pytpp import _info

# Distributions whose version a report records when they are installed.
PEERS = ("scipy", "torch", "ml_dtypes", "threadpoolctl", "dask", "distributed", "matplotlib")


def versions():
    """{name: version} of pytpp, Python, numpy and the installed peers (absent ones omitted)."""
    found = {"pytpp": pytpp.__version__, "python": platform.python_version(),
             "numpy": np.__version__}
    for name in PEERS:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def blas():
    """The BLAS libraries numpy (and torch, scipy) loaded, as threadpoolctl reports them."""
    from threadpoolctl import threadpool_info
    keep = ("internal_api", "version", "architecture", "threading_layer")
    return [{k: lib.get(k) for k in keep} for lib in threadpool_info() if lib["user_api"] == "blas"]


def machine(peaks):
    """The report's "machine" object.

    Parameters
    ----------
    peaks : dict
        ``{threads: {kind: value}}`` as :func:`pytpp._info.measure` returns it (GFLOP/s for
        'f64', 'f32', 'bf16', GOP/s for 'int8', GB/s for the '*_gbs' kinds; None where the CPU
        has no such instruction).

    Returns
    -------
    dict
        JSON-ready: thread counts of `peaks` become string keys.
    """
    cfg = _info.config()
    return {
        "cpu": cfg["cpu"],
        "isa": cfg["active_isa"],
        "best_isa": cfg["best_isa"],
        "available_isas": list(cfg["available_isas"]),
        "features": list(cfg["features"]),
        "cache_bytes": {f"l{level}": cfg["cache"][key] for level, key in
                        ((1, "l1d"), (2, "l2"), (3, "l3"))},
        "platform": platform.platform(),
        "peaks": {str(threads): dict(row) for threads, row in peaks.items()},
        "versions": versions(),
        "blas": blas(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
