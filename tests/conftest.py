"""Shared fixtures: every kernel test runs at every ISA level this machine has."""
import importlib.util
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pytpp


def _poison_fresh_memory():
    """glibc fills every block malloc hands out (and frees) with junk bytes for the whole run
    (M_PERTURB): an output a kernel forgets to write then fails its test instead of passing on
    whatever correct values a freed buffer still held (how a missing remainder case of the bf16
    products of rows went unseen). numpy keeps its own cache of blocks up to 1 KiB, which this
    does not reach: tests of smaller outputs write into a NaN-filled `out`. Elsewhere than glibc
    nothing changes."""
    import ctypes
    try:
        ctypes.CDLL(None).mallopt(-6, 165)   # M_PERTURB
    except (OSError, AttributeError):
        pass


_poison_fresh_memory()


@pytest.fixture(params=pytpp.available_isas())
def isa(request):
    """Run the test body with kernels dispatched for one ISA level (ref, avx2, avx512...)."""
    with pytpp.use_isa(request.param):
        yield request.param


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    old = pytpp.get_num_threads()
    pytpp.set_num_threads(request.param)
    yield request.param
    pytpp.set_num_threads(old)


def gemm_tolerance(dtype, k, a, b):
    """Bound on |C - C_ref| for a sum of k products in `dtype` (C_ref exact in float64):
    each output is a k-term dot product, whose rounding error is at most ~k * eps * sum|a||b|
    (Higham); we use a 2x slack on the typical sqrt-free worst case for blocked summation."""
    eps = np.finfo(dtype).eps
    mag = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64) if a.ndim == 2 else None
    return 2 * max(k, 1) * eps, mag


_USER_SETUP = textwrap.dedent('''
    import numpy, pytpp
    from setuptools import setup, Extension
    from Cython.Build import cythonize
    ext = Extension("{name}", ["{name}.pyx"],
                    include_dirs=[pytpp.get_include(), numpy.get_include()])
    setup(ext_modules=cythonize([ext], quiet=True), script_args=["build_ext", "--inplace", "-q"])
''')


@pytest.fixture(scope="session")
def cython_user_module(tmp_path_factory):
    """build(name, pyx): a third-party Cython extension compiled from `pyx` against this pytpp
    (its .pxd files and get_include()) and imported: a user's module calling pytpp's C API."""
    pytest.importorskip("Cython")

    def build(name, pyx):
        d = tmp_path_factory.mktemp(name)
        (d / f"{name}.pyx").write_text(pyx)
        (d / "setup.py").write_text(_USER_SETUP.format(name=name))
        # the build must find pytpp (and its .pxd files) where the tests imported it from
        root = os.path.dirname(os.path.dirname(os.path.abspath(pytpp.__file__)))
        env = dict(os.environ,
                   PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
        r = subprocess.run([sys.executable, "setup.py"], cwd=d, capture_output=True, text=True,
                           env=env)
        assert r.returncode == 0, r.stderr[-3000:]
        (path,) = d.glob(f"{name}*.so")
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return build
