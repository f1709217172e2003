"""`python -m pytpp bench compare A.json B.json`: a run against itself flags nothing; a slowed
copy (times edited, or a run forced to the ref ISA level) is flagged, and only beyond the noise."""
import json
import re
import subprocess
import sys

import pytest
from bench_tiny import CASE, bench

from pytpp.benchmarks import _compare


def compare(a, b):
    res = subprocess.run([sys.executable, "-m", "pytpp", "bench", "compare", str(a), str(b)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return res.stdout


def flags(out):
    """{impl: flag} of the case's rows in compare's output (columns apart by 2+ spaces)."""
    found = {}
    for line in out.splitlines():
        if line.startswith(CASE + "  "):
            fields = re.split(r"\s{2,}", line.strip())
            found[fields[1]] = fields[6] if len(fields) > 6 else ""
    return found


def test_run_against_itself_flags_nothing(report_run):
    path, _ = report_run
    out = compare(path, path)
    assert "no change beyond the noise" in out
    assert set(flags(out).values()) == {""}


def test_slowed_copy_is_flagged(report_run, tmp_path):
    path, _ = report_run
    report = json.loads(path.read_text())
    slow = json.loads(path.read_text())
    slow["rows"][0]["median_s"] *= 3
    slow["rows"][0]["best_s"] *= 3
    # within the noise: 30% slower median, but the best still inside A's [best, median]
    slow["rows"][1]["median_s"] *= 1.3
    slow["rows"][1]["best_s"] = report["rows"][1]["best_s"]
    (tmp_path / "slow.json").write_text(json.dumps(slow))
    out = compare(path, tmp_path / "slow.json")
    got = flags(out)
    assert got["pytpp.matmul"] == "slower" and got["numpy"] == ""
    assert flags(compare(tmp_path / "slow.json", path))["pytpp.matmul"] == "faster"


def test_ref_isa_run_is_flagged(report_run, tmp_path):
    """The same case at PYTPP_ISA=ref (portable C kernels, several times slower)."""
    path, _ = report_run
    slow = bench(tmp_path, "ref", PYTPP_ISA="ref")
    assert json.loads(slow.read_text())["machine"]["isa"] == "ref"
    out = compare(path, slow)
    assert flags(out)["pytpp.matmul"] == "slower"
    assert "different CPUs or ISA levels" in out


@pytest.mark.parametrize("a,b,expected", [
    ((10, 12), (10, 12), ""),          # identical
    ((10, 12), (12.5, 13), ""),        # ranges apart, but within 10%
    ((10, 12), (12, 20), ""),          # 67% slower median, ranges touch: noise
    ((10, 12), (12.1, 14), "slower"),  # apart and 17% slower
    ((12.1, 14), (10, 12), "faster"),
])
def test_change_rule(a, b, expected):
    def row(best, med):
        return {"best_s": best, "median_s": med}
    assert _compare.change(row(*a), row(*b))[1] == expected


def test_rows_only_in_one_report():
    row = dict(case="c", impl="pytpp", threads=1, best_s=1.0, median_s=1.0)
    a = {"machine": {}, "rows": [row, dict(row, case="d")]}
    b = {"machine": {}, "rows": [row, dict(row, threads=2)]}
    got = {(r[0], r[2]): r[6] for r in _compare.compare(a, b)}
    assert got == {("c", 1): "", ("d", 1): "only in A", ("c", 2): "only in B"}
