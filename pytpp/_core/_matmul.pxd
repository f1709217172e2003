# C API of the Goto GEMM behind pytpp.matmul (pytpp/_core/include/pytpp/gemm_goto.h), for Cython
# users: `from pytpp._core._matmul cimport pytpp_matmul, pytpp_mm_desc, ...`.
from libc.stdint cimport int64_t, uint16_t
from pytpp._core.cengine cimport pytpp_gemm_kernels, pytpp_cache_info, pytpp_table_info

cdef extern from "pytpp/gemm_goto.h" nogil:
    enum:
        PYTPP_MM_BF16

    ctypedef struct pytpp_pk_kernels:
        const char *name
        pytpp_table_info info
        int vl
        int nv_main, mr_main
        int c_first, ftz, bf16_widened, kc_l1_x8, nc_l2_x8, nopack_l2_x8
        const void *dot_bt
        const void *dot_bn
        const void *brd[1][1][1]

    const pytpp_pk_kernels pytpp_mm_f32_ref, pytpp_mm_f32_avx2, pytpp_mm_f32_avx512
    const pytpp_pk_kernels pytpp_mm_f64_ref, pytpp_mm_f64_avx2, pytpp_mm_f64_avx512
    const pytpp_pk_kernels pytpp_mm_bf16_ref, pytpp_mm_bf16_avx2
    const pytpp_pk_kernels pytpp_mm_bf16_avx512, pytpp_mm_bf16_avx512_bf16
    const pytpp_pk_kernels pytpp_mm_f32_bf16w_avx2

    ctypedef struct pytpp_mm_desc:
        int64_t m, n, k
        int64_t rsa, csa, rsb, csb, ldc
        int dtype

    ctypedef struct pytpp_mm_blocking:
        int64_t mr, nr, vl
        int64_t kc, mc, nc
        int64_t nopack_bytes
        int bf16_widened
        int dot_flags

    ctypedef struct pytpp_mm_kernels:
        const pytpp_pk_kernels *kp
        const pytpp_gemm_kernels *kt
        const void *ew
        const pytpp_pk_kernels *rows_bt
        const pytpp_pk_kernels *rows_bn

    void pytpp_mm_blocking_init(const pytpp_mm_kernels *ks, const pytpp_cache_info *ci, int dtype,
                                pytpp_mm_blocking *bk)
    int pytpp_matmul(const pytpp_mm_kernels *ks, const pytpp_cache_info *ci,
                     const pytpp_mm_desc *d, const void *a, const void *b, void *c, int nthreads)
    int pytpp_matmul_blocked(const pytpp_mm_kernels *ks, const pytpp_mm_blocking *bk,
                             const pytpp_mm_desc *d, const void *a, const void *b, void *c,
                             int nthreads, void *ws, size_t ws_bytes)
    size_t pytpp_matmul_workspace(const pytpp_mm_kernels *ks, const pytpp_mm_blocking *bk,
                                  const pytpp_mm_desc *d, int prepacked, int nthreads)
    int pytpp_matmul_batch(const pytpp_mm_kernels *ks, const pytpp_cache_info *ci,
                           const pytpp_mm_desc *d, const void *a, const void *b, void *c,
                           int64_t count, const int64_t *off_a, const int64_t *off_b,
                           const int64_t *off_c, int nthreads)
    int64_t pytpp_mm_packed_size(const pytpp_mm_blocking *bk, int dtype, int64_t k, int64_t n)
    void pytpp_mm_pack_b_full(const pytpp_mm_blocking *bk, const void *ew,
                              int dtype, int64_t k, int64_t n, const void *b, int64_t rsb,
                              int64_t csb, void *packed, int nthreads)
    int pytpp_matmul_prepacked(const pytpp_mm_kernels *ks, const pytpp_mm_blocking *bk,
                               const pytpp_mm_desc *d, const void *a, const void *packed_b,
                               void *c, int64_t count, const int64_t *off_a,
                               const int64_t *off_c, int nthreads, void *ws, size_t ws_bytes)
    ctypedef struct pytpp_mm_epilogue:
        const void *bias
        const void *res
        int64_t ldr
        void *add
        void *act

    int pytpp_matmul_fused(const pytpp_mm_kernels *ks, const pytpp_mm_blocking *bk,
                           const pytpp_mm_desc *d, const void *a, const void *b, void *c,
                           int nthreads, void *ws, size_t ws_bytes, const pytpp_mm_epilogue *ep)
    int pytpp_matmul_prepacked_fused(const pytpp_mm_kernels *ks, const pytpp_mm_blocking *bk,
                                     const pytpp_mm_desc *d, const void *a,
                                     const void *packed_b, void *c, int nthreads, void *ws,
                                     size_t ws_bytes, const pytpp_mm_epilogue *ep)
    void pytpp_cvt_f32_bf16(const float *src, uint16_t *dst, int64_t rows, int64_t cols,
                            int64_t src_rs, int64_t dst_rs, int64_t dst_cs)


cdef bint acquire_workspace(size_t need, void **ws, size_t *wsb) except -1
cdef void release_workspace()
