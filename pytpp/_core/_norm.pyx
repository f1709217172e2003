# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Glue of the normalisation kernels: pointers and row strides in, C engine out, GIL released.

The caller (pytpp.nn._norms) has validated everything: x, y, g, dx are 2-D arrays of one engine
dtype (float64 or float32) with unit column stride; w, b, mean, rstd, gw, gb contiguous 1-D
arrays of that dtype or None. These entry points only pick the table and run the driver."""
cimport numpy as cnp
from libc.stdint cimport int64_t
from pytpp._core.cnorm cimport *
from pytpp._core._runtime cimport num_threads, active_isa, level
from pytpp._core.cengine cimport PYTPP_F64, PYTPP_F32

cnp.import_array()

LAYER, RMS = PYTPP_NORM_LAYER, PYTPP_NORM_RMS


cdef inline const pytpp_norm_kernels *table(cnp.ndarray x):
    cdef int dt = PYTPP_F64 if cnp.PyArray_TYPE(x) == cnp.NPY_DOUBLE else PYTPP_F32
    return level(active_isa()).norm[dt]


cdef inline void *ptr(object a):
    return NULL if a is None else cnp.PyArray_DATA(<cnp.ndarray>a)


cdef inline int64_t ld(cnp.ndarray a):
    return cnp.PyArray_STRIDE(a, 0) // cnp.PyArray_ITEMSIZE(a)


def forward(int kind, cnp.ndarray x, object w, object b, double eps, cnp.ndarray y,
            object mean, cnp.ndarray rstd):
    cdef const pytpp_norm_kernels *kt = table(x)
    cdef int64_t m = cnp.PyArray_DIM(x, 0), n = cnp.PyArray_DIM(x, 1)
    cdef int64_t ldx = ld(x), ldy = ld(y)
    cdef void *px = cnp.PyArray_DATA(x)
    cdef void *py = cnp.PyArray_DATA(y)
    cdef void *pw = ptr(w)
    cdef void *pb = ptr(b)
    cdef void *pm = ptr(mean)
    cdef void *pr = cnp.PyArray_DATA(rstd)
    cdef int nt = num_threads()
    with nogil:
        pytpp_norm_forward(kt, kind, m, n, px, ldx, pw, pb, eps, py, ldy, pm, pr, nt)


def backward(int kind, cnp.ndarray g, cnp.ndarray x, object mean, cnp.ndarray rstd, object w,
             cnp.ndarray dx, object gw, object gb):
    cdef const pytpp_norm_kernels *kt = table(x)
    cdef int64_t m = cnp.PyArray_DIM(x, 0), n = cnp.PyArray_DIM(x, 1)
    cdef int64_t ldg = ld(g), ldx = ld(x), lddx = ld(dx)
    cdef void *pg = cnp.PyArray_DATA(g)
    cdef void *px = cnp.PyArray_DATA(x)
    cdef void *pm = ptr(mean)
    cdef void *pr = cnp.PyArray_DATA(rstd)
    cdef void *pw = ptr(w)
    cdef void *pdx = cnp.PyArray_DATA(dx)
    cdef void *pgw = ptr(gw)
    cdef void *pgb = ptr(gb)
    cdef int nt = num_threads()
    cdef int err
    with nogil:
        err = pytpp_norm_backward(kt, kind, m, n, pg, ldg, px, ldx, pm, pr, pw, pdx, lddx,
                                  pgw, pgb, nt)
    if err:
        raise MemoryError("pytpp norm backward: no memory for the per-thread partials")

