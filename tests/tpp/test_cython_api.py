"""A third-party Cython module cimports a pytpp kernel handle and calls it inside nogil
(the CP2K/EDGE use case: the user's own prange loop around pytpp kernels)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pytpp

PYX = textwrap.dedent('''
    # cython: language_level=3
    cimport numpy as cnp
    from pytpp._core._brgemm cimport BrgemmKernel
    from pytpp._core.cengine cimport pytpp_batch, PYTPP_BATCH_STRIDE

    def run(BrgemmKernel kern, cnp.ndarray a, cnp.ndarray b, cnp.ndarray c, long count):
        cdef pytpp_batch bt
        bt.mode = PYTPP_BATCH_STRIDE
        bt.count = count
        bt.stride_a = kern.stride_a
        bt.stride_b = kern.stride_b
        cdef const void *pa = cnp.PyArray_DATA(a)
        cdef const void *pb = cnp.PyArray_DATA(b)
        cdef void *pc = cnp.PyArray_DATA(c)
        cdef int err
        with nogil:
            err = kern.run(pa, pb, pc, &bt)
        return err
''')

SETUP = textwrap.dedent('''
    import numpy, pytpp
    from setuptools import setup, Extension
    from Cython.Build import cythonize
    ext = Extension("user_kernels", ["user_kernels.pyx"],
                    include_dirs=[pytpp.get_include(), numpy.get_include()])
    setup(ext_modules=cythonize([ext], quiet=True), script_args=["build_ext", "--inplace", "-q"])
''')


@pytest.fixture(scope="module")
def user_module(tmp_path_factory):
    pytest.importorskip("Cython")
    d = tmp_path_factory.mktemp("cython_user")
    (d / "user_kernels.pyx").write_text(PYX)
    (d / "setup.py").write_text(SETUP)
    # the build must find pytpp (and its .pxd files) where this test imported it from
    root = os.path.dirname(os.path.dirname(os.path.abspath(pytpp.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "setup.py"], cwd=d, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    sys.path.insert(0, str(d))
    try:
        import user_kernels
        yield user_kernels
    finally:
        sys.path.remove(str(d))


def test_cimported_kernel_runs_in_nogil(user_module, rng):
    m, n, k, nb = 9, 20, 7, 3
    kern = pytpp.tpp.brgemm(m, n, k, dtype=np.float64, beta=0.0)
    a = rng.standard_normal((nb, m, k)); b = rng.standard_normal((nb, k, n))
    c = np.empty((m, n))
    assert user_module.run(kern, a, b, c, nb) == 0
    np.testing.assert_allclose(c, np.einsum("bik,bkj->ij", a, b), rtol=1e-12, atol=1e-12)
