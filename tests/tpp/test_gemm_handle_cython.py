"""The Cython-level API of small-GEMM handles: cimport GemmKernel, call run() inside nogil/prange.

Builds a tiny extension module against the installed pytpp (a few seconds of compiling), so it is
marked slow. Tolerance as in test_gemm_handle.py (k-term dot products, 2 (k + 2) eps bound).
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pytpp

PYX = textwrap.dedent('''
    # cython: language_level=3, boundscheck=False, wraparound=False
    from cython.parallel cimport prange
    from pytpp._core._smallgemm cimport GemmKernel

    def per_element(GemmKernel kern, double[:, :, ::1] a, double[:, ::1] b, double[:, :, ::1] c):
        cdef Py_ssize_t e
        with nogil:
            for e in prange(a.shape[0], num_threads=2):
                kern.run(&a[e, 0, 0], &b[0, 0], &c[e, 0, 0])

    def strided(GemmKernel kern, double[:, :, ::1] a, double[:, :, ::1] b, double[:, :, ::1] c):
        cdef int err
        with nogil:
            err = kern.run_stack(a.shape[0], &a[0, 0, 0], a.shape[1] * a.shape[2],
                                 &b[0, 0, 0], b.shape[1] * b.shape[2],
                                 &c[0, 0, 0], c.shape[1] * c.shape[2], 2)
        return err
''')

SETUP = textwrap.dedent('''
    import numpy as np
    from setuptools import setup, Extension
    from Cython.Build import cythonize
    root = {root!r}
    ext = Extension("sgcy", ["sgcy.pyx"], include_dirs=[root, root + "/pytpp/_core/include",
                    np.get_include()], extra_compile_args=["-fopenmp"], extra_link_args=["-fopenmp"])
    setup(ext_modules=cythonize([ext], include_path=[root], quiet=True),
          script_args=["build_ext", "--inplace", "-q"])
''')


@pytest.mark.slow
def test_cimport_nogil_prange(tmp_path, rng):
    root = os.path.dirname(os.path.dirname(os.path.abspath(pytpp.__file__)))
    (tmp_path / "sgcy.pyx").write_text(PYX)
    (tmp_path / "setup.py").write_text(SETUP.format(root=root))
    res = subprocess.run([sys.executable, "setup.py"], cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    sys.path.insert(0, str(tmp_path))
    try:
        import sgcy
    finally:
        sys.path.pop(0)
    m, n, k, count = 9, 15, 35, 64
    kern = pytpp.tpp.gemm(m, n, k, beta=0.0)
    a = rng.standard_normal((count, m, k))
    b = rng.standard_normal((k, n))
    c = np.full((count, m, n), np.nan)
    sgcy.per_element(kern, a, b, c)
    bound = 2 * (k + 2) * np.finfo(np.float64).eps * (np.abs(a) @ np.abs(b))
    assert np.all(np.abs(c - a @ b) <= bound)
    bb = np.ascontiguousarray(np.broadcast_to(b, (count, k, n)))
    c[...] = np.nan
    assert sgcy.strided(kern, a, bb, c) == 0
    assert np.all(np.abs(c - a @ b) <= bound)
