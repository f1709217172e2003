# Cython-level access to the low-precision (bf16, 8-bit) GEMM/BRGEMM handles:
#   from pytpp._core._lowp cimport LowpHandle
#   cdef LowpHandle h = pytpp.tpp.brgemm(m, n, k, dtype=np.uint8, b_dtype=np.int8).c_handle
#   with nogil: err = h.run(a, b, c, &batch, NULL)
# Operands are C-contiguous blocks (A m x k, B k x n or the handle's VNNI layout, C m x n) of the
# handle's types; the batch (pytpp_batch: stride/offset in elements, or addresses) finds them. No
# checks: the caller owns the bounds, as with BrgemmKernel.run (pytpp/_core/_brgemm.pxd).
from libc.stdint cimport int64_t, int32_t
from pytpp._core.cengine cimport pytpp_batch
from pytpp._core._matmul cimport pytpp_pk_kernels
from pytpp._core.cdispatch cimport pytpp_i8_kernels

cdef extern from "pytpp/gemm_lowp.h" nogil:
    enum:
        PYTPP_LP_U8
        PYTPP_LP_S8
        PYTPP_LP_BF16
        PYTPP_LP_I32
        PYTPP_LP_F32
    ctypedef void (*pytpp_lowp_epilogue_fn)(const void *ctx, void *c, int64_t ldc, int64_t i0,
                                            int64_t rows, int64_t j0, int64_t cols)
    ctypedef struct pytpp_lowp_desc:
        int64_t m, n, k
        int64_t rsa, csa
        int g
        int64_t rs_g, rs_e, cs
        int64_t ldc
        int a_type, b_type, c_type
        int accumulate
        int b_packed
        int32_t colsum_scale
        const int32_t *b_colsum
        pytpp_lowp_epilogue_fn epilogue
        const void *epi_ctx
    ctypedef struct pytpp_lowp_kernels:
        const pytpp_i8_kernels *i8
        const pytpp_pk_kernels *bf16
        int64_t l1
    int pytpp_lowp_brgemm(const pytpp_lowp_kernels *ks, const pytpp_lowp_desc *d, const void *a,
                          const void *b, void *c, const pytpp_batch *batch, const int32_t *comp,
                          int nthreads)
    int64_t pytpp_lowp_packed_bytes(const pytpp_lowp_kernels *ks, int64_t k, int64_t n)
    void pytpp_lowp_pack_b(const pytpp_lowp_kernels *ks, const pytpp_lowp_desc *d, const void *b,
                           void *dst)
    int pytpp_lowp_packed_colsums(const pytpp_lowp_kernels *ks, int64_t k, int64_t n,
                                  const void *packed, int32_t *out)


cdef class LowpHandle:
    cdef pytpp_lowp_desc desc        # C-contiguous operands, the handle's types and beta
    cdef pytpp_lowp_kernels ks       # chosen when the handle was made (its ISA level)
    cdef readonly int64_t m, n, k
    cdef readonly int64_t stride_a, stride_b   # elements of one A / B block (stride batches)
    cdef readonly object descriptor
    # C (+)= sum_i A_i B_i (+ comp, n int32 added to every row of an int32 C; NULL for none);
    # returns 0, or -1 (no memory for the panels). Threads: pytpp's setting.
    cdef int run(self, const void *a, const void *b, void *c, const pytpp_batch *batch,
                 const int32_t *comp) noexcept nogil
    # C (+)= A B with B packed once by pack_b() (a GEMM on constant weights).
    cdef int run_packed(self, const void *a, const void *packed_b, void *c,
                        const int32_t *comp) noexcept nogil
