"""`python -m pytpp bench compare A.json B.json`: the change of every row from run A to run B.

Rows are matched by (case, implementation, threads). The ratio is B's median time over A's
(> 1: B is slower). A change is flagged only when it is beyond the noise of the two runs: the
ranges [best, median] of A and of B do not overlap, and the ratio is beyond the tolerance
(10%: above 1.10 or below 1 / 1.10). A run compared with itself flags nothing.
"""
import statistics

TOLERANCE = 0.10


def _key(row):
    return (row["case"], row["impl"], row["threads"])


def _index(rows):
    """{key: row}; a key met again (a case measured twice) gets its occurrence number."""
    out = {}
    for row in rows:
        key, n = _key(row), 1
        while key + ((n,) if n > 1 else ()) in out:
            n += 1
        out[key + ((n,) if n > 1 else ())] = row
    return out


def change(a, b, tolerance=TOLERANCE):
    """(ratio of median times B / A, flag): flag is 'slower', 'faster' or '' (within noise)."""
    ratio = b["median_s"] / a["median_s"]
    apart = b["best_s"] > a["median_s"] or a["best_s"] > b["median_s"]
    if apart and ratio > 1 + tolerance:
        return ratio, "slower"
    if apart and ratio < 1 / (1 + tolerance):
        return ratio, "faster"
    return ratio, ""


def compare(report_a, report_b, tolerance=TOLERANCE):
    """Rows of (case, impl, threads, A median s or None, B median s or None, ratio, flag), in
    A's order and then B's rows that A does not have; flag 'only in A' / 'only in B' there."""
    rows_a, rows_b = _index(report_a["rows"]), _index(report_b["rows"])
    result = []
    for key, a in rows_a.items():
        b = rows_b.get(key)
        if b is None:
            result.append((*key[:3], a["median_s"], None, None, "only in A"))
        else:
            result.append((*key[:3], a["median_s"], b["median_s"], *change(a, b, tolerance)))
    for key, b in rows_b.items():
        if key not in rows_a:
            result.append((*key[:3], None, b["median_s"], None, "only in B"))
    return result


def _us(seconds):
    return "-" if seconds is None else f"{seconds * 1e6:.1f}"


def _machine_line(name, report):
    m = report["machine"]
    return f"{name}: {m.get('cpu')} isa={m.get('isa')} {m.get('date')}"


def format_table(report_a, report_b, tolerance=TOLERANCE):
    """The printed comparison: a line per machine, a row per matched case, a summary."""
    rows = compare(report_a, report_b, tolerance)
    lines = [_machine_line("A", report_a), _machine_line("B", report_b)]
    ma, mb = report_a["machine"], report_b["machine"]
    if (ma.get("cpu"), ma.get("isa")) != (mb.get("cpu"), mb.get("isa")):
        lines.append("note: A and B ran on different CPUs or ISA levels")
    case_w = max([len(r[0]) for r in rows] + [4])
    impl_w = max([len(r[1]) for r in rows] + [4])
    lines.append(f"{'case':{case_w}s}  {'impl':{impl_w}s}  {'t':>2s}  {'A us':>11s}  "
                 f"{'B us':>11s}  {'B/A':>6s}  change")
    for case, impl, threads, ta, tb, ratio, flag in rows:
        r = "-" if ratio is None else f"{ratio:.3f}"
        lines.append(f"{case:{case_w}s}  {impl:{impl_w}s}  {threads:>2}  {_us(ta):>11s}  "
                     f"{_us(tb):>11s}  {r:>6s}  {flag}")
    flagged = [r for r in rows if r[6] in ("slower", "faster")]
    matched = [r for r in rows if r[5] is not None]
    if matched:
        # every row moving together, the peers' too, is the machine's drift, not pytpp's change
        lines.append(f"median B/A of all matched rows: "
                     f"{statistics.median(r[5] for r in matched):.3f}")
    lines.append(f"{len(flagged)} of {len(matched)} matched rows changed beyond the noise "
                 f"([best, median] ranges apart and B/A beyond {1 + tolerance:.2f} or "
                 f"{1 / (1 + tolerance):.2f})" if flagged else
                 f"no change beyond the noise in {len(matched)} matched rows")
    return "\n".join(lines)


def main(path_a, path_b):
    """Print the comparison of two report files; returns 0."""
    from pytpp.benchmarks import _report
    print(format_table(_report.read(path_a), _report.read(path_b)))
    return 0
