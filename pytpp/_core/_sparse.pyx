# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Glue of the block-sparse x dense driver (pytpp/_core/include/pytpp/sparse.h): pointers in, C
engine out, GIL released. The caller (pytpp.sparse._spmm) validated everything: indptr int64 and
idx int32 C-contiguous and in range, data (nblocks, bm, bk) of the dense operands' dtype (float32
or float64) with element strides, the dense operand and out of that dtype with the strides the
header asks for."""
cimport numpy as cnp
from libc.stdint cimport int64_t, int32_t
from pytpp._core._runtime cimport num_threads, active_isa, level
from pytpp._core.cengine cimport PYTPP_F64, PYTPP_F32, pytpp_gemm_kernels

cnp.import_array()

cdef extern from "pytpp/sparse.h" nogil:
    ctypedef struct pytpp_bsparse:
        int64_t ngroups
        int64_t ninner
        int64_t bm, bk
        const int64_t *indptr
        const int32_t *idx
        const void *data
        int64_t bstride, brs, bcs

    int pytpp_spmm_rows(const pytpp_gemm_kernels *kt, int dtype, const pytpp_bsparse *a,
                        const void *b, int b_bf16, int64_t ldb, int64_t n, void *c, int64_t ldc,
                        int nthreads)
    int pytpp_spmm_cols(const pytpp_gemm_kernels *kt, int dtype, const void *x, int64_t m,
                        int64_t rsx, int64_t csx, const pytpp_bsparse *w, void *c, int64_t ldc,
                        int nthreads)


cdef int fill(pytpp_bsparse *s, cnp.ndarray indptr, cnp.ndarray idx, cnp.ndarray data,
              int64_t ninner):
    cdef int64_t isz = cnp.PyArray_ITEMSIZE(data)
    s.ngroups = cnp.PyArray_DIM(indptr, 0) - 1
    s.ninner = ninner
    s.bm = cnp.PyArray_DIM(data, 1)
    s.bk = cnp.PyArray_DIM(data, 2)
    s.indptr = <const int64_t *>cnp.PyArray_DATA(indptr)
    s.idx = <const int32_t *>cnp.PyArray_DATA(idx)
    s.data = cnp.PyArray_DATA(data)
    s.bstride = cnp.PyArray_STRIDE(data, 0) // isz
    s.brs = cnp.PyArray_STRIDE(data, 1) // isz
    s.bcs = cnp.PyArray_STRIDE(data, 2) // isz
    return PYTPP_F64 if cnp.PyArray_TYPE(data) == cnp.NPY_DOUBLE else PYTPP_F32


def spmm_rows(cnp.ndarray indptr, cnp.ndarray idx, cnp.ndarray data, cnp.ndarray b,
              cnp.ndarray c):
    """c = A @ b, A given by its block rows (indptr, idx, data); b and c with unit column
    stride. b may be bfloat16 (2-byte elements) with float32 data and c: widened as packed."""
    cdef pytpp_bsparse s
    cdef int dt = fill(&s, indptr, idx, data, cnp.PyArray_DIM(b, 0) // cnp.PyArray_DIM(data, 2))
    cdef int64_t isz = cnp.PyArray_ITEMSIZE(data)
    cdef const pytpp_gemm_kernels *kt = level(active_isa()).brgemm[dt]
    cdef const void *pb = cnp.PyArray_DATA(b)
    cdef void *pc = cnp.PyArray_DATA(c)
    cdef int b_bf16 = cnp.PyArray_ITEMSIZE(b) == 2
    cdef int64_t ldb = cnp.PyArray_STRIDE(b, 0) // cnp.PyArray_ITEMSIZE(b)
    cdef int64_t n = cnp.PyArray_DIM(c, 1)
    cdef int64_t ldc = cnp.PyArray_STRIDE(c, 0) // isz
    cdef int nt = num_threads()
    cdef int err
    with nogil:
        err = pytpp_spmm_rows(kt, dt, &s, pb, b_bf16, ldb, n, pc, ldc, nt)
    if err:
        raise MemoryError("pytpp.sparse.spmm: no memory for the block pointers")


def spmm_cols(cnp.ndarray x, cnp.ndarray indptr, cnp.ndarray idx, cnp.ndarray data,
              cnp.ndarray c):
    """c = x @ W, W given by its block columns (indptr, idx, data; blocks with unit column
    stride); x any element strides, c unit column stride."""
    cdef pytpp_bsparse s
    cdef int dt = fill(&s, indptr, idx, data, cnp.PyArray_DIM(x, 1) // cnp.PyArray_DIM(data, 1))
    cdef int64_t isz = cnp.PyArray_ITEMSIZE(data)
    cdef const pytpp_gemm_kernels *kt = level(active_isa()).brgemm[dt]
    cdef const void *px = cnp.PyArray_DATA(x)
    cdef void *pc = cnp.PyArray_DATA(c)
    cdef int64_t m = cnp.PyArray_DIM(x, 0)
    cdef int64_t rsx = cnp.PyArray_STRIDE(x, 0) // isz, csx = cnp.PyArray_STRIDE(x, 1) // isz
    cdef int64_t ldc = cnp.PyArray_STRIDE(c, 0) // isz
    cdef int nt = num_threads()
    cdef int err
    with nogil:
        err = pytpp_spmm_cols(kt, dt, px, m, rsx, csx, &s, pc, ldc, nt)
    if err:
        raise MemoryError("pytpp.sparse.spmm: no memory for the block pointers")


def vector_width(bint f64):
    """Elements per vector register of the active level's BRGEMM table (1 at the ref level)."""
    return level(active_isa()).brgemm[PYTPP_F64 if f64 else PYTPP_F32].vl
