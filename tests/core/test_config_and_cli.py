"""Runtime configuration and the command line: environment variables that are wrong warn and are
ignored, thread settings respect threadpoolctl's OpenMP limit, --version and bench --list."""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import threadpoolctl

import pytpp


def _run(code, **env):
    full = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True)


def test_unknown_pytpp_isa_warns_and_is_ignored():
    res = _run("import pytpp; print(pytpp.get_isa())", PYTPP_ISA="avx9000")
    assert res.returncode == 0, res.stderr
    assert "PYTPP_ISA" in res.stderr and "ignoring" in res.stderr
    assert res.stdout.strip() == pytpp.available_isas()[-1]


def test_pytpp_isa_caps():
    res = _run("import pytpp; print(pytpp.get_isa())", PYTPP_ISA="ref")
    assert res.returncode == 0 and res.stdout.strip() == "ref"


@pytest.mark.parametrize("value", ["abc", "0", "-2", "1.5"])
def test_bad_pytpp_num_threads_warns(value):
    res = _run("import pytpp; print(pytpp.get_num_threads())", PYTPP_NUM_THREADS=value,
               OMP_NUM_THREADS="")
    assert res.returncode == 0, res.stderr
    assert "PYTPP_NUM_THREADS" in res.stderr
    assert int(res.stdout) >= 1


def test_set_num_threads_checks():
    old = pytpp.get_num_threads()
    try:
        with pytest.warns(RuntimeWarning, match="oversubscription"):
            pytpp.set_num_threads(1000)
        with pytest.raises(ValueError, match=">= 1"):
            pytpp.set_num_threads(0)
        with pytest.raises(TypeError):
            pytpp.set_num_threads(2.0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            pytpp.set_num_threads(1)
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pytpp.set_num_threads(old)


def test_threadpoolctl_limits():
    old = pytpp.get_num_threads()
    pytpp.set_num_threads(2)
    try:
        with threadpoolctl.threadpool_limits(1):
            assert pytpp.get_num_threads() == 1
        assert pytpp.get_num_threads() == 2
        with threadpoolctl.threadpool_limits(1, user_api="openmp"):
            assert pytpp.get_num_threads() == 1
        assert pytpp.get_num_threads() == 2
        with threadpoolctl.threadpool_limits(1, user_api="pytpp"):
            assert pytpp.get_num_threads() == 1
        assert pytpp.get_num_threads() == 2
    finally:
        pytpp.set_num_threads(old)


def test_version_and_list():
    res = subprocess.run([sys.executable, "-m", "pytpp", "--version"], capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout.strip() == f"pytpp {pytpp.__version__}"
    res = subprocess.run([sys.executable, "-m", "pytpp", "bench", "--list"], capture_output=True,
                         text=True)
    assert res.returncode == 0
    assert {"matmul", "brgemm", "smallgemm", "eltwise"} <= set(res.stdout.split())


# ---- fewer OpenMP threads than asked -----------------------------------------------------------

CHECK = """
import numpy as np, pytpp
pytpp.set_num_threads(2)
rng = np.random.default_rng(0)
A = rng.random((400, 300)); B = rng.random((300, 500))
worst = abs(pytpp.matmul(A, B) - A @ B).max()
P = pytpp.linalg.pack(B)
worst = max(worst, abs(pytpp.matmul(A, P) - A @ B).max())
a = rng.random((40, 64, 64)); b = rng.random((40, 64, 64))
worst = max(worst, abs(pytpp.brgemm(a, b) - np.einsum('bik,bkj->ij', a, b)).max() / 1e3)
s = rng.random((4000, 8, 8))
worst = max(worst, abs(pytpp.matmul(s, s) - s @ s).max())
x = rng.random((512, 4096)).astype(np.float32)
y = pytpp.nn.exp(x)
pytpp.set_num_threads(1)
worst = max(worst, abs(y - pytpp.nn.exp(x)).max())     # the element-wise split: same bits
print(worst)
"""


@pytest.mark.parametrize("env", [{"OMP_DYNAMIC": "true"}, {"OMP_THREAD_LIMIT": "1"},
                                 {"OMP_DYNAMIC": "true", "OMP_THREAD_LIMIT": "1"}])
def test_fewer_openmp_threads_than_asked(env):
    res = _run(CHECK, **env)
    assert res.returncode == 0, res.stderr
    assert float(res.stdout) < 1e-9


def test_thread_limit_is_reported():
    res = _run("import pytpp; pytpp.set_num_threads(2); print(pytpp.get_num_threads())",
               OMP_THREAD_LIMIT="1")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "1"


def test_pack_names_itself_in_errors():
    with pytest.raises(TypeError, match="pytpp.linalg.PackedMatrix: b has dtype int64"):
        pytpp.linalg.pack(np.ones((2, 2), np.int64))
