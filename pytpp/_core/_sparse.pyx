# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Glue of the block-sparse x dense driver (pytpp/_core/include/pytpp/sparse.h): pointers in, C
engine out, GIL released. The caller (pytpp.sparse._spmm) validated everything: indptr int64 and
idx int32 C-contiguous and in range, data (nblocks, bm, bk) of the dense operands' dtype (float32
or float64; for bfloat16 operands the form of the mode, sparse.h) with element strides, the dense
operand and out with the dtypes and strides the header asks for."""
cimport numpy as cnp
from libc.stdint cimport int64_t, int32_t
from pytpp._core._runtime cimport num_threads, active_isa, level, features
from pytpp._core._matmul cimport pytpp_pk_kernels
from pytpp._core.cdispatch cimport pytpp_bf16_select, PYTPP_BF16_AUTO
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

    enum:
        PYTPP_SPMM_PLAIN
        PYTPP_SPMM_BF16_WIDENED
        PYTPP_SPMM_BF16_PAIRS
    int pytpp_spmm_bf16_pairs(const pytpp_pk_kernels *bf)
    int pytpp_spmm_rows(const pytpp_gemm_kernels *kt, const pytpp_pk_kernels *bf, int mode,
                        int dtype, const pytpp_bsparse *a, const void *b, int64_t kb,
                        int64_t ldb, int64_t n, void *c, int64_t ldc, int nthreads)
    int pytpp_spmm_cols(const pytpp_gemm_kernels *kt, const pytpp_pk_kernels *bf, int mode,
                        int dtype, const void *x, int64_t m, int64_t rsx, int64_t csx,
                        const pytpp_bsparse *w, void *c, int64_t ldc, int nthreads)

# the modes, for pytpp.sparse._spmm
PLAIN = PYTPP_SPMM_PLAIN
BF16_WIDENED = PYTPP_SPMM_BF16_WIDENED
BF16_PAIRS = PYTPP_SPMM_BF16_PAIRS


cdef const pytpp_pk_kernels *bf16_table() noexcept nogil:
    return pytpp_bf16_select(active_isa(), features(), PYTPP_BF16_AUTO)


def bf16_mode():
    """How the active level multiplies bfloat16 blocks: BF16_PAIRS (the bf16 table's direct
    kernels on bf16 words) or BF16_WIDENED (the float32 kernels on widened operands, pairs
    stored odd element first): the same bits."""
    return BF16_PAIRS if pytpp_spmm_bf16_pairs(bf16_table()) else BF16_WIDENED


cdef void fill(pytpp_bsparse *s, cnp.ndarray indptr, cnp.ndarray idx, cnp.ndarray data,
               int64_t ninner, int vnni):
    cdef int64_t isz = cnp.PyArray_ITEMSIZE(data)
    s.ngroups = cnp.PyArray_DIM(indptr, 0) - 1
    s.ninner = ninner
    s.indptr = <const int64_t *>cnp.PyArray_DATA(indptr)
    s.idx = <const int32_t *>cnp.PyArray_DATA(idx)
    s.data = cnp.PyArray_DATA(data)
    s.bstride = cnp.PyArray_STRIDE(data, 0) // isz
    # vnni: (blocks, depth / 2, columns, 2), a block of `depth` rows
    s.bm = cnp.PyArray_DIM(data, 1) * (2 if vnni else 1)
    s.bk = cnp.PyArray_DIM(data, 2)
    s.brs = cnp.PyArray_STRIDE(data, 1) // isz
    s.bcs = cnp.PyArray_STRIDE(data, 2) // isz


def spmm_rows(cnp.ndarray indptr, cnp.ndarray idx, cnp.ndarray data, cnp.ndarray b,
              cnp.ndarray c, int mode, int64_t kb):
    """c = A @ b, A given by its block rows (indptr, idx, data); b and c with unit column
    stride; kb rows of b per inner block. PLAIN: data, b and c of one float dtype (kb the
    blocks' depth); the bf16 modes: b bfloat16, data in the mode's form (bf16 or widened
    float32, its depth kb padded to even), c float32."""
    cdef pytpp_bsparse s
    cdef int64_t nin = cnp.PyArray_DIM(b, 0) // kb if kb > 0 else 0
    fill(&s, indptr, idx, data, nin, 0)
    cdef int dt = PYTPP_F64 if cnp.PyArray_TYPE(c) == cnp.NPY_DOUBLE else PYTPP_F32
    cdef int64_t isz = cnp.PyArray_ITEMSIZE(c)
    cdef const pytpp_gemm_kernels *kt = level(active_isa()).brgemm[dt]
    cdef const pytpp_pk_kernels *bf = bf16_table()
    cdef const void *pb = cnp.PyArray_DATA(b)
    cdef void *pc = cnp.PyArray_DATA(c)
    cdef int64_t ldb = cnp.PyArray_STRIDE(b, 0) // cnp.PyArray_ITEMSIZE(b)
    cdef int64_t n = cnp.PyArray_DIM(c, 1)
    cdef int64_t ldc = cnp.PyArray_STRIDE(c, 0) // isz
    cdef int nt = num_threads()
    cdef int err
    with nogil:
        err = pytpp_spmm_rows(kt, bf, mode, dt, &s, pb, kb, ldb, n, pc, ldc, nt)
    if err:
        raise MemoryError("pytpp.sparse.spmm: no memory for the block pointers")


def spmm_cols(cnp.ndarray x, cnp.ndarray indptr, cnp.ndarray idx, cnp.ndarray data,
              cnp.ndarray c, int mode):
    """c = x @ W, W given by its block columns (indptr, idx, data; blocks with unit column
    stride, or for BF16_PAIRS (blocks, depth / 2, columns, 2) VNNI pairs); x any element strides
    (BF16_PAIRS: bf16 rows of whole words), its k laid out per block at the blocks' depth; c
    unit column stride."""
    cdef pytpp_bsparse s
    cdef int vnni = mode == BF16_PAIRS
    cdef int64_t depth = 2 * cnp.PyArray_DIM(data, 1) if vnni else cnp.PyArray_DIM(data, 1)
    fill(&s, indptr, idx, data, cnp.PyArray_DIM(x, 1) // depth, vnni)
    cdef int dt = PYTPP_F64 if cnp.PyArray_TYPE(c) == cnp.NPY_DOUBLE else PYTPP_F32
    cdef int64_t isz = cnp.PyArray_ITEMSIZE(x)
    cdef const pytpp_gemm_kernels *kt = level(active_isa()).brgemm[dt]
    cdef const pytpp_pk_kernels *bf = bf16_table()
    cdef const void *px = cnp.PyArray_DATA(x)
    cdef void *pc = cnp.PyArray_DATA(c)
    cdef int64_t m = cnp.PyArray_DIM(x, 0)
    cdef int64_t rsx = cnp.PyArray_STRIDE(x, 0) // isz, csx = cnp.PyArray_STRIDE(x, 1) // isz
    cdef int64_t ldc = cnp.PyArray_STRIDE(c, 0) // cnp.PyArray_ITEMSIZE(c)
    cdef int nt = num_threads()
    cdef int err
    with nogil:
        err = pytpp_spmm_cols(kt, bf, mode, dt, px, m, rsx, csx, &s, pc, ldc, nt)
    if err:
        raise MemoryError("pytpp.sparse.spmm: no memory for the block pointers")

