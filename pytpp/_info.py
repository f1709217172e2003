"""What the machine is and what pytpp chose: `pytpp.show_config()` and `python -m pytpp info`."""
from __future__ import annotations

import platform
import textwrap
from typing import TextIO

from pytpp import _config
from pytpp._core import _runtime
from pytpp._core import _eltwise
from pytpp._version import __version__


def config():
    """A dict of what was detected and chosen (no measurement)."""
    caches = _runtime.get_cache_info()
    return {
        "version": __version__,
        "cpu": _runtime.cpu_brand() or platform.processor() or "unknown",
        "features": _runtime.cpu_features(),
        "best_isa": _runtime.best_isa(),
        "active_isa": _config.get_isa(),
        "available_isas": _config.available_isas(),
        "threads": _config.get_num_threads(),
        "cache": caches,
    }


def show_config(file: TextIO | None = None) -> None:
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
        "kernels (python -m pytpp info --kernels lists every op): " + ", ".join(
            f"{fam} {dt} {sym}" for fam, dt, sym, _, _ in kernels()
            if fam in ("brgemm", "matmul", "gelu", "softmax") and dt in ("f32", "bf16")),
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
               for kind in ("f64", "f32", "bf16", "int8", "int8_7bit")}
        # without vdpbf16ps the bf16 kernels run fp32 FMAs on widened operands: that is their peak
        row["bf16_native"] = row["bf16"] is not None
        if row["bf16"] is None and row["f32"] is not None:
            row["bf16"] = row["f32"]
        rd, cp, cp_nt = _runtime.measure_bandwidth(PROBE_BYTES, nt, 2 * reps)
        row["read_gbs"], row["copy_plain_gbs"], row["copy_stream_gbs"] = rd, cp, cp_nt
        row["copy_gbs"] = max(cp, cp_nt)
        result[nt] = row
    return result


def print_measured(peaks, file=None):
    for nt, row in peaks.items():
        fmt = lambda v, unit: "n/a" if v is None else f"{v:7.1f} {unit}"
        seven = row.get("int8_7bit")
        int8 = fmt(row["int8"], "GOP/s") + ("" if seven is None else f" (7-bit A {seven:.1f})")
        print(f"peak, {nt} thread{'s' if nt > 1 else ''}: "
              f"fp64 {fmt(row['f64'], 'GFLOP/s')} | fp32 {fmt(row['f32'], 'GFLOP/s')} | "
              f"bf16 {'dot' if row.get('bf16_native') else '(fp32 FMA)'} "
              f"{fmt(row['bf16'], 'GFLOP/s')} | int8 {int8} | "
              f"memory read {row['read_gbs']:.1f} GB/s, copy {row['copy_gbs']:.1f} GB/s "
              f"(ordinary stores {row['copy_plain_gbs']:.1f}, streaming {row['copy_stream_gbs']:.1f})",
              file=file)


def _main_symbol(info):
    """The table's main register-block kernel (its mr x nv block, no tail suffix)."""
    mr, nv = info["main"]
    token = f"_{mr}x{nv}v"
    return next((k for k in info["kernels"] if k.endswith(token)), info["symbol"])


def _op_symbol(info, prefix):
    return next((k for k in info["kernels"] if k.startswith(prefix)), info["symbol"])


def kernels(level=None):
    """What each op family runs at ISA `level` (default: the active one), from the dispatch
    table: rows of (family, dtype, kernel symbol, table symbol, template)."""
    idx = _runtime.isa_index(level or _config.get_isa())
    t = _runtime.kernel_tables(idx)
    rows = []
    for dt, info in t["brgemm"].items():
        rows.append(("brgemm", dt, _main_symbol(info), info["symbol"], info["source"]))
    for dt, infos in t["gemm"].items():   # the planner picks the block per shape and flavour
        for info in infos:
            rows.append(("gemm", dt, info["symbol"], info["symbol"], info["source"]))
    for dt, info in t["matmul"].items():
        rows.append(("matmul", dt, _main_symbol(info), info["symbol"], info["source"]))
    for dt, info in t["eltwise"].items():
        for name, code in _eltwise.UNARY_CODES.items():
            rows.append((name, dt, info["unary"][code], info["symbol"], info["source"]))
        for name, code in _eltwise.BINARY_CODES.items():
            rows.append((name, dt, info["binary"][code], info["symbol"], info["source"]))
        for name in ("softmax", "dropout", "rand", "transpose", "reduce_row", "cmp", "blend"):
            rows.append((name, dt, _op_symbol(info, f"tpp_ew_{name}_"), info["symbol"],
                         info["source"]))
    for dt, info in t["norm"].items():
        for name in ("layer_fwd", "rms_fwd", "layer_bwd", "rms_bwd"):
            rows.append((f"norm {name}", dt, _op_symbol(info, f"tpp_norm_{name}_"),
                         info["symbol"], info["source"]))
    for dt, info in t["optim"].items():
        for name in ("sgd", "adamw", "split_sgd")[:3 if dt == "f32" else 2]:
            rows.append((f"optim {name}", dt, _op_symbol(info, f"tpp_optim_{name}_"),
                         info["symbol"], info["source"]))
    for dt, info in t["embedding"].items():
        for name in ("bag_fwd", "bag_bwd"):
            rows.append((f"embedding {name}", dt, _op_symbol(info, f"tpp_{name}_"),
                         info["symbol"], info["source"]))
    for dt, info in t["pool"].items():
        for name, prefix in (("pool2d", "tpp_pool_rows_"), ("pool2d backward", "tpp_pool_backward_")):
            rows.append((name, dt, _op_symbol(info, prefix), info["symbol"], info["source"]))
    return rows


def print_kernels(level=None, file=None):
    """Print :func:`kernels` as a table."""
    rows = kernels(level)
    print(f"kernels at ISA level {level or _config.get_isa()} (family, dtype, kernel, table, "
          f"template):", file=file)
    width = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  " + "  ".join(v.ljust(w) for v, w in zip(r, width)) + "  " + r[4], file=file)


def kernel_map():
    """Markdown of every kernel symbol of every table, per level and family: docs/kernels.md
    (generated by `python -m pytpp info --kernel-map`; a test keeps it current)."""
    out = ["# Kernel map",
           "",
           "Every kernel symbol pytpp builds, by ISA level, family and table, generated from the "
           "dispatch table",
           "(`python -m pytpp info --kernel-map > docs/kernels.md`; `tests/core/test_dispatch.py` "
           "checks it is current).",
           "To find a kernel: its table is `pytpp/_core/include/pytpp/dispatch.h`'s row for the "
           "level, its",
           "code the template named here (in `pytpp/_core/include/pytpp/`), instantiated by the "
           "kernel source",
           "`pytpp/_core/kernels/<level>/` (or `ref/`) that includes it. Element-wise kernels are "
           "named",
           "`tpp_ew_<op>_<dtype>_<level>_row` after the op lists of `eltwise_ops.h`.",
           ""]
    seen = set()
    for idx, level in enumerate(_runtime.LEVELS):
        t = _runtime.kernel_tables(idx)
        tables = [("brgemm", t["brgemm"][d]) for d in ("f64", "f32")]
        tables += [("gemm", i) for d in ("f64", "f32") for i in t["gemm"][d]]
        tables += [("matmul", t["matmul"][d]) for d in ("f64", "f32")]
        tables += [("eltwise", t["eltwise"][d]) for d in ("f64", "f32")]
        tables += [("norm", t["norm"][d]) for d in ("f64", "f32")]
        tables += [("optim", t["optim"][d]) for d in ("f64", "f32")]
        tables += [("embedding", t["embedding"][d]) for d in ("f64", "f32")]
        tables += [("equation", t["equation"][d]) for d in ("f64", "f32")]
        tables += [("pool", t["pool"][d]) for d in ("f64", "f32")]
        out.append(f"## {level}")
        out.append("")
        for family, info in tables:
            seen.add(info["symbol"])
            out += _kernel_section(family, info)
    out.append("## bf16 GEMM kernels")
    out.append("")
    for name, info in _runtime.bf16_tables().items():
        if info["symbol"] in seen:
            continue
        out += _kernel_section(name, info)
    out.append("## Lane GEMM kernels (8-bit, widened bf16)")
    out.append("")
    for name, info in _runtime.i8_tables().items():
        out += _kernel_section(name, info)
    return "\n".join(out) + "\n"


def _kernel_section(title, info):
    lines = textwrap.wrap(" ".join(f"`{k}`" for k in info["kernels"]), 100,
                          break_long_words=False, break_on_hyphens=False)
    return [f"### {title}: `{info['symbol']}` ({info['source']})", ""] + lines + [""]
