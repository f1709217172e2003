# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Glue of the optimizer steps: pointers in, C engine out, GIL released.

The caller (pytpp.nn._optim) has validated everything: the parameter and state arrays are
C-contiguous, of one engine dtype (float64 or float32; split-SGD: uint16 halves and a float32 or
bfloat16 gradient), of one size, writable and not overlapping."""
cimport numpy as cnp
from libc.string cimport memset
from pytpp._core.coptim cimport *
from pytpp._core._runtime cimport num_threads, active_isa, level
from pytpp._core.cengine cimport PYTPP_F64, PYTPP_F32
from pytpp._core._arrays cimport data_or_null as ptr

cnp.import_array()


cdef void run(pytpp_optim_step *s, int dt):
    cdef const pytpp_optim_kernels *kt = level(active_isa()).optim[dt]
    cdef int nt = num_threads()
    with nogil:
        pytpp_optim_run(kt, s, nt)


cdef inline int dtype_of(cnp.ndarray p):
    return PYTPP_F64 if cnp.PyArray_TYPE(p) == cnp.NPY_DOUBLE else PYTPP_F32


def sgd(cnp.ndarray p, cnp.ndarray g, object buf, double lr, double momentum, double wd):
    cdef pytpp_optim_step s
    memset(&s, 0, sizeof(s))
    s.kind, s.n = PYTPP_OPTIM_SGD, cnp.PyArray_SIZE(p)
    s.p, s.g, s.buf = cnp.PyArray_DATA(p), cnp.PyArray_DATA(g), ptr(buf)
    s.lr, s.momentum, s.wd = lr, momentum, wd
    run(&s, dtype_of(p))


def adamw(cnp.ndarray p, cnp.ndarray g, cnp.ndarray m, cnp.ndarray v, double lr, double b1,
          double b2, double eps, double wd, double bc1, double bc2_sqrt):
    cdef pytpp_optim_step s
    memset(&s, 0, sizeof(s))
    s.kind, s.n = PYTPP_OPTIM_ADAMW, cnp.PyArray_SIZE(p)
    s.p, s.g, s.m, s.v = (cnp.PyArray_DATA(p), cnp.PyArray_DATA(g), cnp.PyArray_DATA(m),
                          cnp.PyArray_DATA(v))
    s.lr, s.b1, s.b2, s.eps, s.wd, s.bc1, s.bc2_sqrt = lr, b1, b2, eps, wd, bc1, bc2_sqrt
    run(&s, dtype_of(p))


def split_sgd(cnp.ndarray hi, cnp.ndarray lo, cnp.ndarray g, bint g_bf16, double lr):
    cdef pytpp_optim_step s
    memset(&s, 0, sizeof(s))
    s.kind, s.n = PYTPP_OPTIM_SPLIT_SGD, cnp.PyArray_SIZE(hi)
    s.hi, s.lo = <uint16_t *>cnp.PyArray_DATA(hi), <uint16_t *>cnp.PyArray_DATA(lo)
    s.g, s.g_bf16, s.lr = cnp.PyArray_DATA(g), g_bf16, lr
    run(&s, PYTPP_F32)
