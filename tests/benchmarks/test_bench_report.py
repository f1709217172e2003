"""`python -m pytpp bench CASE --json FILE --plot FILE.png`: the report of a tiny run (one small
matmul case picked with --match) has the machine record and one row per implementation, with
the work that places it on the roofline; the plot is a PNG."""
import json
import subprocess
import sys

import pytest
from bench_tiny import CASE, HAS_MPL

import pytpp


def test_json_report_structure(report_run):
    path, _ = report_run
    report = json.loads(path.read_text())
    assert {"machine", "rows"} <= set(report)
    m = report["machine"]
    assert m["isa"] == pytpp.get_isa() and m["isa"] in ("ref", "avx2", "avx512")
    assert m["cpu"] and m["date"]
    assert {"pytpp", "python", "numpy"} <= set(m["versions"])
    assert m["versions"]["pytpp"] == pytpp.__version__
    peaks = m["peaks"]["1"]
    assert peaks["f64"] > 0 and peaks["f32"] > 0 and peaks["copy_gbs"] > 0
    rows = report["rows"]
    assert [r["impl"] for r in rows][:2] == ["pytpp.matmul", "numpy"]
    for r in rows:
        assert r["case"] == CASE and r["threads"] == 1
        assert 0 < r["best_s"] <= r["median_s"]
        assert r["flops"] == 2 * 64 ** 3 and r["bytes"] == 3 * 64 * 64 * 4
        assert r["unit"] == "GFLOP/s" and r["rate"] == pytest.approx(
            r["flops"] / r["median_s"] / 1e9)
    assert rows[0]["library"] == "pytpp" and rows[1]["library"] == "numpy"


@pytest.mark.skipif(not HAS_MPL, reason="matplotlib not installed (pip install 'pytpp[plot]')")
def test_plot_written(report_run):
    _, tmp = report_run
    png = (tmp / "run.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


@pytest.mark.skipif(not HAS_MPL, reason="matplotlib not installed (pip install 'pytpp[plot]')")
def test_plot_of_report_without_peers_or_work(tmp_path, report_run):
    """Rows without flops/bytes (dask) or without a peer are left out, not an error."""
    from pytpp.benchmarks import _plot, _report
    path, _ = report_run
    report = _report.read(path)
    report["rows"] = [dict(r, flops=None) for r in report["rows"][:1]]
    _plot.plot(report, tmp_path / "empty.png")
    assert (tmp_path / "empty.png").stat().st_size > 0


def test_unknown_case_and_bad_compare_usage():
    res = subprocess.run([sys.executable, "-m", "pytpp", "bench", "nosuchcase"],
                         capture_output=True, text=True)
    assert res.returncode != 0 and "unknown benchmark" in res.stderr
    res = subprocess.run([sys.executable, "-m", "pytpp", "bench", "compare", "a.json"],
                         capture_output=True, text=True)
    assert res.returncode != 0 and "compare A.json B.json" in res.stderr


# every benchmark but the ones that start services (dask) or build large inputs first
# (sparse_grid: 40 s of matrices)
NOTHING_SELECTED = ["attention", "brgemm", "conv", "dense", "eltwise", "equation", "loops",
                    "lowprec", "matmul", "norms", "quant", "smallgemm", "sparse"]


def test_benchmarks_run_with_no_case_selected():
    """A --match that selects no case: every summary and ratio of the benchmarks meets empty
    results (a bf16 conv summary once raised KeyError on `bench conv --match pool`). In a child
    process: the harness sets torch's, BLAS's and pytpp's thread counts for the whole process."""
    r = subprocess.run([sys.executable, "-m", "pytpp", "bench", *NOTHING_SELECTED, "--quick",
                        "--threads", "1", "--match", "no case has this name"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
