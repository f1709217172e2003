"""What the machine is and what pytpp chose: `pytpp.show_config()` and `python -m pytpp info`."""
import platform

from pytpp import _config
from pytpp._core import _runtime


def config():
    """A dict of what was detected and chosen (no measurement)."""
    caches = _runtime.get_cache_info()
    return {
        "version": __import__("pytpp").__version__,
        "cpu": _runtime.cpu_brand() or platform.processor() or "unknown",
        "features": _runtime.cpu_features(),
        "best_isa": _runtime.best_isa(),
        "active_isa": _config.get_isa(),
        "available_isas": _config.available_isas(),
        "threads": _config.get_num_threads(),
        "cache": caches,
    }


def show_config(file=None):
    """Print the CPU, its ISA features, the chosen level, cache sizes and thread count.

    >>> import pytpp
    >>> pytpp.show_config()  # doctest: +ELLIPSIS
    pytpp ...
    cpu: ...
    """
    c = config()
    kib = lambda x: f"{x // 1024} KiB"
    lines = [
        f"pytpp {c['version']}",
        f"cpu: {c['cpu']}",
        f"features: {' '.join(c['features']) or '(none)'}",
        f"isa: {c['active_isa']} (best available: {c['best_isa']}; levels: {', '.join(c['available_isas'])})",
        f"cache: L1d {kib(c['cache']['l1d'])}, L2 {kib(c['cache']['l2'])}, L3 {kib(c['cache']['l3'])}",
        f"threads: {c['threads']}",
    ]
    print("\n".join(lines), file=file)


# Bandwidth probe buffers: two of these, well beyond any L3 (a probe that fits in cache
# reports cache bandwidth, and every "% of peak" computed from it is wrong).
PROBE_BYTES = 256 * 2**20


def measure(threads=None, quick=False):
    """Measured peaks: GFLOP/s of FMA loops (fp64, fp32), bf16 / int8 dot-product loops where the
    CPU has them, and memory bandwidth (GB/s), for 1 thread and for `threads`.

    Memory: read (sum of a 256 MiB buffer) and copy between two 256 MiB buffers (bytes read +
    written), once with ordinary stores and once with streaming stores, best of several runs.
    `copy_gbs` is the better of the two copies: the rate a kernel that reads one array and writes
    another can reach, and the reference of every element-wise "% of peak"."""
    threads = threads or _config.get_num_threads()
    iters = 300000 if quick else 2000000
    reps = 3 if quick else 5
    result = {}
    for nt in sorted({1, threads}):
        row = {kind: _runtime.measure_peak(kind, nt, iters, reps)
               for kind in ("f64", "f32", "bf16", "int8")}
        rd, cp, cp_nt = _runtime.measure_bandwidth(PROBE_BYTES, nt, 2 * reps)
        row["read_gbs"], row["copy_plain_gbs"], row["copy_stream_gbs"] = rd, cp, cp_nt
        row["copy_gbs"] = max(cp, cp_nt)
        result[nt] = row
    return result


def print_measured(peaks, file=None):
    for nt, row in peaks.items():
        fmt = lambda v, unit: "n/a" if v is None else f"{v:7.1f} {unit}"
        print(f"peak, {nt} thread{'s' if nt > 1 else ''}: "
              f"fp64 {fmt(row['f64'], 'GFLOP/s')} | fp32 {fmt(row['f32'], 'GFLOP/s')} | "
              f"bf16 dot {fmt(row['bf16'], 'GFLOP/s')} | int8 dot {fmt(row['int8'], 'GOP/s')} | "
              f"memory read {row['read_gbs']:.1f} GB/s, copy {row['copy_gbs']:.1f} GB/s "
              f"(ordinary stores {row['copy_plain_gbs']:.1f}, streaming {row['copy_stream_gbs']:.1f})",
              file=file)
