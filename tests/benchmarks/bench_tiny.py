"""A tiny benchmark run through the command line: one small matmul case (picked with --match),
its JSON report (and plot, with matplotlib)."""
import importlib.util
import os
import subprocess
import sys

CASE = "matmul fp32 64x64x64"
HAS_MPL = importlib.util.find_spec("matplotlib") is not None


def bench(tmp_path, name, *extra, **env):
    """Run the tiny case through the command line; the path of its JSON report."""
    path = tmp_path / f"{name}.json"
    cmd = [sys.executable, "-m", "pytpp", "bench", "matmul", "--quick", "--repeats", "5",
           "--match", CASE, "--json", str(path), *extra]
    res = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **env))
    assert res.returncode == 0, res.stderr
    assert "\r" not in res.stderr, res.stderr   # no progress line when stderr is not a terminal
    return path
