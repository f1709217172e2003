# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Glue of the embedding bags: pointers in, C engine out, GIL released.

The caller (pytpp.nn._embedding) has validated everything: w is a 2-D table with unit column
stride, float64, float32 or bfloat16 (float32 compute), or None in a backward other than max
(the compute dtype is g's there, the shape out's); idx a contiguous 1-D int32 or int64
array of rows in range; offsets a contiguous int64 array, non-decreasing from 0 to at most
len(idx); psw None or contiguous of the compute dtype and idx's length; y, g, out, ends, pos,
pbag contiguous of the shapes and dtypes the kernels write and read. These entry points only pick
the tables and run the drivers."""
cimport numpy as cnp
from libc.stdint cimport int64_t
from pytpp._core.cembedding cimport *
from pytpp._core._runtime cimport num_threads, active_isa, level
from pytpp._core.cengine cimport PYTPP_F32
from pytpp._core._arrays cimport compute_code as compute, data_or_null as ptr, row_ld as ld

cnp.import_array()

MODES = {"sum": PYTPP_BAG_SUM, "mean": PYTPP_BAG_MEAN, "max": PYTPP_BAG_MAX}


cdef inline bint is_bf16(cnp.ndarray a) noexcept:
    """Stored as bfloat16 (validated above: else float32 or float64, the compute dtype)."""
    cdef int t = cnp.PyArray_TYPE(a)
    return t != cnp.NPY_DOUBLE and t != cnp.NPY_FLOAT


cdef pytpp_bag_index bags(cnp.ndarray idx, cnp.ndarray offsets, int mode, object psw):
    cdef pytpp_bag_index ix
    ix.idx = cnp.PyArray_DATA(idx)
    ix.idx64 = cnp.PyArray_ITEMSIZE(idx) == 8
    ix.nidx = cnp.PyArray_SIZE(idx)
    ix.offsets = <const int64_t *>cnp.PyArray_DATA(offsets)
    ix.nbags = cnp.PyArray_SIZE(offsets)
    ix.mode = mode
    ix.psw = ptr(psw)
    return ix


def forward(cnp.ndarray w, cnp.ndarray idx, cnp.ndarray offsets, int mode, object psw,
            cnp.ndarray y):
    cdef int isa = active_isa(), cdt = compute(w)
    cdef const pytpp_embedding_kernels *kt = level(isa).embedding[cdt]
    cdef pytpp_bag_index ix = bags(idx, offsets, mode, psw)
    cdef int64_t dim = cnp.PyArray_DIM(w, 1), ldw = ld(w)
    cdef int wbf = is_bf16(w), ybf = is_bf16(y)
    cdef void *pw = cnp.PyArray_DATA(w)
    cdef void *py = cnp.PyArray_DATA(y)
    cdef int nt = num_threads()
    cdef int err
    with nogil:
        err = pytpp_embedding_bag_forward(kt, &ix, dim, pw, wbf, ldw, py, ybf, nt)
    if err:
        raise MemoryError("pytpp embedding_bag: no memory")


cdef struct table:
    void *p
    int64_t ld
    int bf16


cdef table table_of(object w):
    """The table the backward of max reads (None for the other modes: never read)."""
    cdef table t
    t.p, t.ld, t.bf16 = NULL, 0, 0
    if w is not None:
        t.p, t.ld, t.bf16 = cnp.PyArray_DATA(<cnp.ndarray>w), ld(w), is_bf16(w)
    return t


def backward(cnp.ndarray g, object w, cnp.ndarray idx, cnp.ndarray offsets, int mode,
             object psw, cnp.ndarray out):
    cdef int isa = active_isa(), cdt = compute(g)
    cdef const pytpp_embedding_kernels *kt = level(isa).embedding[cdt]
    cdef pytpp_bag_index ix = bags(idx, offsets, mode, psw)
    cdef int64_t nrows = cnp.PyArray_DIM(out, 0), dim = cnp.PyArray_DIM(out, 1)
    cdef table t = table_of(w)
    cdef int obf = is_bf16(out)
    cdef void *pg = cnp.PyArray_DATA(g)
    cdef void *po = cnp.PyArray_DATA(out)
    cdef int nt = num_threads()
    cdef int err
    with nogil:
        err = pytpp_embedding_bag_backward(kt, &ix, dim, pg, t.p, t.bf16, t.ld, po, obf, nrows,
                                           nt)
    if err:
        raise MemoryError("pytpp embedding_bag_backward: no memory for the grouped positions")


def backward_rows(cnp.ndarray g, object w, cnp.ndarray idx, cnp.ndarray offsets, int mode,
                  object psw, cnp.ndarray ends, cnp.ndarray pos, cnp.ndarray pbag,
                  cnp.ndarray out):
    cdef int isa = active_isa(), cdt = compute(g)
    cdef const pytpp_embedding_kernels *kt = level(isa).embedding[cdt]
    cdef pytpp_bag_index ix = bags(idx, offsets, mode, psw)
    cdef int64_t nslots = cnp.PyArray_DIM(out, 0), dim = cnp.PyArray_DIM(out, 1)
    cdef table t = table_of(w)
    cdef void *pg = cnp.PyArray_DATA(g)
    cdef const int64_t *pe = <const int64_t *>cnp.PyArray_DATA(ends)
    cdef const int64_t *pp = <const int64_t *>cnp.PyArray_DATA(pos)
    cdef const int64_t *pb = <const int64_t *>cnp.PyArray_DATA(pbag)
    cdef void *po = cnp.PyArray_DATA(out)
    cdef int nt = num_threads()
    cdef int err
    with nogil:
        err = pytpp_embedding_bag_backward_rows(kt, &ix, dim, pg, t.p, t.bf16, t.ld, nslots, pe,
                                                pp, pb, po, nt)
    if err:
        raise MemoryError("pytpp embedding_bag_backward: no memory for the argmax")


def gather(cnp.ndarray w, cnp.ndarray idx, cnp.ndarray out):
    cdef int64_t row_bytes = cnp.PyArray_DIM(w, 1) * cnp.PyArray_ITEMSIZE(w)
    cdef int64_t ldw_bytes = cnp.PyArray_STRIDE(w, 0)
    cdef const void *pw = cnp.PyArray_DATA(w)
    cdef const void *pi = cnp.PyArray_DATA(idx)
    cdef int idx64 = cnp.PyArray_ITEMSIZE(idx) == 8
    cdef int64_t n = cnp.PyArray_SIZE(idx)
    cdef void *po = cnp.PyArray_DATA(out)
    cdef int nt = num_threads()
    # the active level's rows in flight (its table's, the float32 one: any will do)
    cdef int64_t pf = level(active_isa()).embedding[PYTPP_F32].prefetch_bytes
    with nogil:
        pytpp_embedding_gather(pw, row_bytes, ldw_bytes, pi, idx64, n, po, pf, nt)
