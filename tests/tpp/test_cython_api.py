"""A third-party Cython module cimports a pytpp kernel handle and calls it inside nogil
(the CP2K/EDGE use case: the user's own prange loop around pytpp kernels)."""
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

@pytest.fixture(scope="module")
def user_module(cython_user_module):
    return cython_user_module("user_kernels", PYX)


def test_cimported_kernel_runs_in_nogil(user_module, rng):
    m, n, k, nb = 9, 20, 7, 3
    kern = pytpp.tpp.brgemm(m, n, k, dtype=np.float64, beta=0.0)
    a = rng.standard_normal((nb, m, k)); b = rng.standard_normal((nb, k, n))
    c = np.empty((m, n))
    assert user_module.run(kern, a, b, c, nb) == 0
    np.testing.assert_allclose(c, np.einsum("bik,bkj->ij", a, b), rtol=1e-12, atol=1e-12)
