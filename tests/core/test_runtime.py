"""Runtime: ISA detection and forcing, threads, threadpoolctl, show_config, CLI."""
import os
import subprocess
import sys

import numpy as np
import pytest
import threadpoolctl

import pytpp
from pytpp._core import _runtime


def test_levels_are_consistent():
    levels = pytpp.available_isas()
    assert levels[0] == "ref"
    assert levels[-1] == _runtime.best_isa()
    feats = set(_runtime.cpu_features())
    if "avx512" in levels:
        assert {"avx512f", "avx512bw", "avx512dq", "avx512vl", "os_avx512"} <= feats
    if "avx2" in levels:
        assert {"avx2", "fma", "os_avx"} <= feats


def test_set_isa_validates():
    with pytest.raises(ValueError, match="ISA level must be one of"):
        pytpp.set_isa("sse9")
    if pytpp.available_isas()[-1] != "avx512":
        with pytest.raises(ValueError, match="not available"):
            pytpp.set_isa("avx512")
    before = pytpp.get_isa()
    with pytpp.use_isa("ref"):
        assert pytpp.get_isa() == "ref"
    assert pytpp.get_isa() == before
    # numpy's str_ (what np.random.choice over available_isas() gives) is a str
    with pytpp.use_isa(np.str_(pytpp.available_isas()[0])):
        assert pytpp.get_isa() == pytpp.available_isas()[0]
    assert pytpp.get_isa() == before
    with pytest.raises(TypeError, match="pytpp.use_isa: level must be a str"):
        with pytpp.use_isa(1):
            pass
    with pytest.raises(TypeError, match="pytpp.set_isa: level must be a str"):
        pytpp.set_isa(None)
    assert pytpp.get_isa() == before


@pytest.mark.parametrize("cap", ["ref", "avx2", "avx512"])
def test_env_caps_level(cap):
    code = "import pytpp; print(pytpp.get_isa())"
    env = dict(os.environ, PYTPP_ISA=cap)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.strip()
    levels = pytpp.available_isas()
    assert out == (cap if cap in levels else levels[-1])


def test_env_bad_value_warns_and_is_ignored():
    env = dict(os.environ, PYTPP_ISA="avx1024")
    r = subprocess.run([sys.executable, "-c", "import pytpp"], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and "PYTPP_ISA" in r.stderr and "ignoring" in r.stderr


def test_threads_api():
    old = pytpp.get_num_threads()
    try:
        pytpp.set_num_threads(1)
        assert pytpp.get_num_threads() == 1
        with pytest.raises(ValueError):
            pytpp.set_num_threads(0)
        with pytest.raises(TypeError):
            pytpp.set_num_threads(1.5)
    finally:
        pytpp.set_num_threads(old)


def test_threadpoolctl_limits_pytpp():
    old = pytpp.get_num_threads()
    pytpp.set_num_threads(2)
    try:
        info = [i for i in threadpoolctl.threadpool_info() if i["internal_api"] == "pytpp"]
        assert info and info[0]["num_threads"] == 2
        with threadpoolctl.threadpool_limits(1):
            assert pytpp.get_num_threads() == 1
        assert pytpp.get_num_threads() == 2
        with threadpoolctl.threadpool_limits(limits=1, user_api="pytpp"):
            assert pytpp.get_num_threads() == 1
    finally:
        pytpp.set_num_threads(old)


def test_show_config(capsys):
    pytpp.show_config()
    out = capsys.readouterr().out
    assert "isa:" in out and pytpp.get_isa() in out and "threads:" in out and "L2" in out


def test_measured_peaks_are_sane():
    p = _runtime.measure_peak("f64", 1, 200000, 2)
    if "avx2" in pytpp.available_isas():
        assert p > 1.0
        assert _runtime.measure_peak("f32", 1, 200000, 2) > p  # twice the lanes
    rd, cp, cp_nt = _runtime.measure_bandwidth(16 * 2**20, 1, 1)
    assert rd > 0.5 and cp > 0.5 and cp_nt > 0.5


def test_cli_demo_runs():
    r = subprocess.run([sys.executable, "-m", "pytpp", "demo"], capture_output=True, text=True,
                       check=True)
    assert "GFLOP/s" in r.stdout and "rel. diff" in r.stdout
    for step in ("matmul", "small GEMMs", "MLP", "conv2d", "int8 linear", "layer_norm", "softmax",
                 "brgemm"):
        assert step in r.stdout
    # every float step's difference from its float64 reference is within float32 rounding; the
    # int8 layer's is that of 8-bit quantization (docs/quant.md: about 2% of the output range)
    rows = [line for line in r.stdout.splitlines() if "ms " in line]
    diffs = [float(line.split()[-1]) for line in rows if "int8" not in line]
    assert diffs and max(diffs) < 1e-4
    q = [float(line.split()[-1]) for line in rows if "int8" in line]
    assert q and q[0] < 0.05


def test_gil_released_during_kernel():
    # Two Python threads calling pytpp concurrently must both make progress and agree.
    import threading
    a = np.random.default_rng(0).standard_normal((64, 64, 64))
    results = []

    def work():
        results.append(pytpp.brgemm(a, a))

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert all(np.array_equal(r, results[0]) for r in results)
