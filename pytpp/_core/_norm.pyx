# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Glue of the normalisation kernels: pointers and row strides in, C engine out, GIL released.

The caller (pytpp.nn._norms) has validated everything: x, y, g, dx are 2-D arrays with unit
column stride, float64, or float32 / bfloat16 in any mix (float32 compute; the compute dtype is
dx's in backward); w, b, mean, rstd, gw, gb contiguous 1-D arrays of the compute dtype or None.
These entry points only pick the tables and run the driver."""
cimport numpy as cnp
from libc.stdint cimport int64_t
from pytpp._core.cnorm cimport *
from pytpp._core._runtime cimport num_threads, active_isa, level
from pytpp._core._arrays cimport compute_code as compute, data_or_null as ptr, row_ld as ld
from pytpp._core.celtwise cimport pytpp_ew_kernels, PYTPP_EW_F64, PYTPP_EW_F32, PYTPP_EW_BF16

cnp.import_array()

LAYER, RMS = PYTPP_NORM_LAYER, PYTPP_NORM_RMS


cdef inline int storage(cnp.ndarray a) noexcept:
    """enum pytpp_ew_dtype of an operand: float64, float32, else bfloat16 (validated above)."""
    cdef int t = cnp.PyArray_TYPE(a)
    return PYTPP_EW_F64 if t == cnp.NPY_DOUBLE else PYTPP_EW_F32 if t == cnp.NPY_FLOAT else PYTPP_EW_BF16


def forward(int kind, cnp.ndarray x, object w, object b, double eps, cnp.ndarray y,
            object mean, cnp.ndarray rstd):
    cdef int isa = active_isa(), cdt = compute(x)
    cdef const pytpp_norm_kernels *kt = level(isa).norm[cdt]
    cdef const pytpp_ew_kernels *ew = level(isa).eltwise[cdt]
    cdef int64_t m = cnp.PyArray_DIM(x, 0), n = cnp.PyArray_DIM(x, 1)
    cdef int64_t ldx = ld(x), ldy = ld(y)
    cdef int xdt = storage(x), ydt = storage(y)
    cdef void *px = cnp.PyArray_DATA(x)
    cdef void *py = cnp.PyArray_DATA(y)
    cdef void *pw = ptr(w)
    cdef void *pb = ptr(b)
    cdef void *pm = ptr(mean)
    cdef void *pr = cnp.PyArray_DATA(rstd)
    cdef int nt = num_threads()
    cdef int err
    with nogil:
        err = pytpp_norm_forward(kt, ew, kind, m, n, px, xdt, ldx, pw, pb, eps, py, ydt, ldy,
                                 pm, pr, nt)
    if err:
        raise MemoryError("pytpp norm forward: no memory for the row buffers")


def backward(int kind, cnp.ndarray g, cnp.ndarray x, object mean, cnp.ndarray rstd, object w,
             cnp.ndarray dx, object gw, object gb):
    cdef int isa = active_isa(), cdt = compute(dx)
    cdef const pytpp_norm_kernels *kt = level(isa).norm[cdt]
    cdef const pytpp_ew_kernels *ew = level(isa).eltwise[cdt]
    cdef int64_t m = cnp.PyArray_DIM(x, 0), n = cnp.PyArray_DIM(x, 1)
    cdef int64_t ldg = ld(g), ldx = ld(x), lddx = ld(dx)
    cdef int gdt = storage(g), xdt = storage(x), ddt = storage(dx)
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
        err = pytpp_norm_backward(kt, ew, kind, m, n, pg, gdt, ldg, px, xdt, ldx, pm, pr, pw,
                                  pdx, ddt, lddx, pgw, pgb, nt)
    if err:
        raise MemoryError("pytpp norm backward: no memory for the per-thread buffers")


cdef inline const pytpp_norm_kernels *table_of(cnp.ndarray x):
    return level(active_isa()).norm[compute(x)]


def group_forward(cnp.ndarray x, int64_t n, int64_t c, int64_t hw, int64_t groups, object w,
                  object b, double eps, cnp.ndarray y, cnp.ndarray mean, cnp.ndarray rstd):
    """x, y: C-contiguous (n, c, hw) of the compute dtype; mean, rstd: n * groups."""
    cdef const pytpp_norm_kernels *kt = table_of(x)
    cdef void *px = cnp.PyArray_DATA(x)
    cdef void *pw = ptr(w)
    cdef void *pb = ptr(b)
    cdef void *py = cnp.PyArray_DATA(y)
    cdef void *pm = cnp.PyArray_DATA(mean)
    cdef void *pr = cnp.PyArray_DATA(rstd)
    cdef int nt = num_threads()
    with nogil:
        pytpp_group_norm_forward(kt, n, c, hw, groups, px, pw, pb, eps, py, pm, pr, nt)


def group_backward(cnp.ndarray g, cnp.ndarray x, int64_t n, int64_t c, int64_t hw, int64_t groups,
                   cnp.ndarray mean, cnp.ndarray rstd, object w, cnp.ndarray dx, object gw,
                   object gb):
    cdef const pytpp_norm_kernels *kt = table_of(x)
    cdef void *pg = cnp.PyArray_DATA(g)
    cdef void *px = cnp.PyArray_DATA(x)
    cdef void *pm = cnp.PyArray_DATA(mean)
    cdef void *pr = cnp.PyArray_DATA(rstd)
    cdef void *pw = ptr(w)
    cdef void *pdx = cnp.PyArray_DATA(dx)
    cdef void *pgw = ptr(gw)
    cdef void *pgb = ptr(gb)
    cdef int nt = num_threads()
    cdef int err
    with nogil:
        err = pytpp_group_norm_backward(kt, n, c, hw, groups, pg, px, pm, pr, pw, pdx, pgw, pgb, nt)
    if err:
        raise MemoryError("pytpp group_norm backward: no memory for the per-channel sums")


def batch_forward(bint nhwc, bint training, cnp.ndarray x, int64_t n, int64_t c, int64_t hw,
                  object w, object b, double eps, cnp.ndarray y, cnp.ndarray mean,
                  cnp.ndarray var, cnp.ndarray rstd):
    """x, y: C-contiguous, (n, c, hw) or (n, hw, c) with nhwc; mean, var, rstd: c elements."""
    cdef const pytpp_norm_kernels *kt = table_of(x)
    cdef void *px = cnp.PyArray_DATA(x)
    cdef void *pw = ptr(w)
    cdef void *pb = ptr(b)
    cdef void *py = cnp.PyArray_DATA(y)
    cdef void *pm = cnp.PyArray_DATA(mean)
    cdef void *pv = cnp.PyArray_DATA(var)
    cdef void *pr = cnp.PyArray_DATA(rstd)
    cdef int nt = num_threads()
    cdef int err
    with nogil:
        err = pytpp_batch_norm_forward(kt, nhwc, training, n, c, hw, px, pw, pb, eps, py, pm, pv,
                                       pr, nt)
    if err:
        raise MemoryError("pytpp batch_norm: no memory for the per-channel sums")


def batch_backward(bint nhwc, cnp.ndarray g, cnp.ndarray x, int64_t n, int64_t c, int64_t hw,
                   cnp.ndarray mean, cnp.ndarray rstd, object w, cnp.ndarray dx, object gw,
                   object gb):
    cdef const pytpp_norm_kernels *kt = table_of(x)
    cdef void *pg = cnp.PyArray_DATA(g)
    cdef void *px = cnp.PyArray_DATA(x)
    cdef void *pm = cnp.PyArray_DATA(mean)
    cdef void *pr = cnp.PyArray_DATA(rstd)
    cdef void *pw = ptr(w)
    cdef void *pdx = cnp.PyArray_DATA(dx)
    cdef void *pgw = ptr(gw)
    cdef void *pgb = ptr(gb)
    cdef int nt = num_threads()
    cdef int err
    with nogil:
        err = pytpp_batch_norm_backward(kt, nhwc, n, c, hw, pg, px, pm, pr, pw, pdx, pgw, pgb, nt)
    if err:
        raise MemoryError("pytpp batch_norm backward: no memory for the per-channel sums")
