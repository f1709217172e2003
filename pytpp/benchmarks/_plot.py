"""`python -m pytpp bench CASE... --plot FILE.png`: one PNG of a benchmark report.

Left, one roofline panel per thread count: the measured compute peaks (fp64, fp32, bf16) and the
measured copy bandwidth as lines, every row with known work placed at its arithmetic intensity
(flops per compulsory byte) and achieved rate, pytpp and each peer library with its own marker.
Element-wise cases count one operation per element (they are pure bandwidth: their points sit
on or under the memory line). Each case carries a number, the same in every panel; the numbers
of cases at one intensity stand in a column beside their points. Rows marked '(ref)' (a plain
copy beside a transpose) are drawn but are no peers.
Right: pytpp's speedup over the best peer per case and thread count (best median of the pytpp
implementations against the best median of the others; > 1: pytpp faster).

matplotlib (extra ``pytpp[plot]``) is imported only here, and the figure is drawn without
pyplot, so a user's backend setting is left alone.
"""
import math

from pytpp.benchmarks._harness import scaled_peak

MARKERS = {"pytpp": ("o", "C3"), "numpy": ("s", "C0"), "torch": ("^", "C1"),
           "scipy": ("D", "C2"), "dask": ("v", "C4")}
OTHER = ("x", "C7")
ROOFS = (("f64", "fp64 FMA"), ("f32", "fp32 FMA"), ("bf16", "bf16 dot"))


def require():
    """matplotlib's Figure class; ImportError saying how to install it when it is missing."""
    try:
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ImportError(f"--plot needs matplotlib ({e}): pip install 'pytpp[plot]' "
                          f"(or matplotlib>=3.5)") from None
    return Figure


def _peaks(report):
    """The report's peaks with integer thread keys again (JSON made them strings)."""
    return {int(t): row for t, row in report["machine"]["peaks"].items()}


def _numbers(rows):
    """{case: number from 1} in the order cases first ran."""
    return {case: i + 1 for i, case in enumerate(dict.fromkeys(r["case"] for r in rows))}


def _roofline(ax, rows, peaks, threads, numbers):
    points = [r for r in rows if r["threads"] == threads and r.get("flops") and r.get("bytes")]
    xs = [r["flops"] / r["bytes"] for r in points]
    ys = [r["flops"] / r["median_s"] / 1e9 for r in points]
    bandwidth = scaled_peak(peaks, "copy_gbs", threads)
    roofs = [(label, scaled_peak(peaks, kind, threads)) for kind, label in ROOFS
             if peaks[1].get(kind) is not None]
    top = max([p for _, p in roofs] + ys + [1.0])
    ridge = top / bandwidth
    lo = min(xs + [ridge]) / 4
    hi = max(xs + [ridge]) * 8
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    # the memory line up to where it meets the highest roof (beyond, the roofs take over)
    ax.plot([lo, ridge], [bandwidth * lo, top], "k-", lw=1.2,
            label=f"memory copy {bandwidth:.1f} GB/s")
    for (label, peak), style in zip(roofs, ("--", "-.", ":")):
        ax.plot(grid, [min(peak, bandwidth * x) for x in grid], "k" + style, lw=1,
                label=f"{label} peak {peak:.0f} GFLOP/s")
    seen = set()
    for r, x, y in zip(points, xs, ys):
        marker, color = MARKERS.get(r["library"], OTHER)
        pytpp_row = r["library"] == "pytpp"
        ax.plot([x], [y], marker, color=color, ms=7 if pytpp_row else 5,
                mfc=color if pytpp_row else "none", ls="none",
                label=None if r["library"] in seen else r["library"])
        seen.add(r["library"])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(min(ys + [top]) / 4, top * 2)
    _number_cases(ax, points, xs, ys, numbers)
    ax.set_xlabel("arithmetic intensity (flop per byte; element-wise: 1 op per element)")
    ax.set_ylabel("achieved GFLOP/s (median)")
    ax.set_title(f"roofline, {threads} thread{'s' if threads > 1 else ''}")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="lower right")


def _number_cases(ax, points, xs, ys, numbers, gap=0.045):
    """Each case's number beside its best pytpp point. Cases of one intensity (element-wise
    ones all share a few) stack up at one x, so their numbers go in a column to the right, in
    the order of their points, at least `gap` of the axis height apart, with a leader line."""
    best = {}
    for r, x, y in zip(points, xs, ys):
        if r["library"] == "pytpp" and y > best.get(r["case"], (0, 0, 0))[2]:
            best[r["case"]] = (numbers[r["case"]], x, y)
    y0, y1 = (math.log10(v) for v in ax.get_ylim())
    columns = {}
    for number, x, y in best.values():
        columns.setdefault(round(math.log10(x), 2), []).append((y, number, x))
    for column in columns.values():
        column.sort()
        placed = []
        for y, number, x in column:
            frac = (math.log10(y) - y0) / (y1 - y0)
            if placed:
                frac = max(frac, placed[-1] + gap)
            placed.append(frac)
            ax.annotate(str(number), (x, y), xytext=(x * 1.6, 10 ** (y0 + frac * (y1 - y0))),
                        fontsize=7, color="C3", va="center",
                        arrowprops=dict(arrowstyle="-", color="C3", lw=0.5, alpha=0.6))


def speedups(rows):
    """[(case, threads, speedup, pytpp impl, best peer impl)] of every case with a pytpp row
    and a peer row: best peer median time over best pytpp median time (reference rows, marked
    '(ref)', are no peers)."""
    groups = {}
    for r in rows:
        groups.setdefault((r["case"], r["threads"]), []).append(r)
    found = []
    for (case, threads), group in groups.items():
        ours = [r for r in group if r["library"] == "pytpp"]
        peers = [r for r in group if r["library"] not in ("pytpp", "reference")]
        if ours and peers:
            best = min(ours, key=lambda r: r["median_s"])
            peer = min(peers, key=lambda r: r["median_s"])
            found.append((case, threads, peer["median_s"] / best["median_s"], best["impl"],
                          peer["impl"]))
    return found


def _speedup(ax, rows, numbers):
    from matplotlib.ticker import FuncFormatter, NullFormatter
    bars = speedups(rows)
    labels = [f"{numbers[c]}  {c}  t={t}" for c, t, _, _, _ in bars]
    values = [s for _, _, s, _, _ in bars]
    pos = list(range(len(bars)))[::-1]      # first case at the top
    # bars grow from 1 (no change) to the speedup, right for pytpp faster, left for slower
    ax.barh(pos, [v - 1 for v in values], left=1.0, height=0.7,
            color=["C3" if v >= 1 else "C0" for v in values])
    ax.axvline(1.0, color="k", lw=1)
    ax.set_yticks(pos)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_ylim(-1, max(len(bars), 3))
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"x{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    for p, (_, _, s, ours, peer) in zip(pos, bars):
        ax.annotate(f"x{s:.2f} {ours} vs {peer}", (max(s, 1.0), p), textcoords="offset points",
                    xytext=(3, -2), fontsize=6)
    if values:
        ax.set_xlim(min(values + [1.0]) / 1.5, max(values + [1.0]) * 8)
    ax.set_xlabel("speedup of pytpp over the best peer (median time; > 1: pytpp faster)")
    ax.set_title("pytpp vs best peer, per case")
    ax.grid(True, axis="x", which="both", alpha=0.25)


def plot(report, path):
    """Write the roofline and speedup panels of `report` (a :mod:`_report` object) to `path`."""
    Figure = require()
    rows = report["rows"]
    peaks = _peaks(report)
    threads = sorted({r["threads"] for r in rows if r.get("flops") and r.get("bytes")})
    numbers = _numbers(rows)
    nbars = len(speedups(rows))
    fig = Figure(figsize=(7.5 * (len(threads) + 1), max(5.5, 0.22 * nbars + 1.8)),
                 layout="constrained")
    axes = fig.subplots(1, len(threads) + 1, squeeze=False)[0]
    for ax, t in zip(axes, threads):
        _roofline(ax, rows, peaks, t, numbers)
    _speedup(axes[-1], rows, numbers)
    m = report["machine"]
    fig.suptitle(f"pytpp {m['versions'].get('pytpp')} on {m['cpu']} (isa {m['isa']}), "
                 f"{m['date']}", fontsize=10)
    fig.savefig(path, dpi=90)
