# C declarations of the engine (pytpp/_core/include/pytpp/*.h) for the Cython glue modules.
from libc.stdint cimport int64_t, uint32_t
from libc.stddef cimport size_t

cdef extern from "pytpp/kernel_common.h" nogil:
    ctypedef struct pytpp_table_info:
        const char *symbol
        const char *source
        const char *const *kernels

cdef extern from "pytpp/gemm.h" nogil:
    enum:
        PYTPP_F64
        PYTPP_F32
        PYTPP_NDTYPES
        PYTPP_BATCH_STRIDE
        PYTPP_BATCH_OFFSET
        PYTPP_BATCH_ADDRESS

    ctypedef struct pytpp_gemm_kernels:
        const char *name
        pytpp_table_info info
        int vl
        int nv_main
        int mr_max[5]

    ctypedef struct pytpp_gemm_desc:
        int64_t m, n, k
        int64_t rsa, csa
        int64_t ldb, csb
        int64_t ldc
        int dtype
        double alpha, beta

    ctypedef struct pytpp_batch:
        int mode
        int64_t count
        int64_t stride_a, stride_b
        const int64_t *off_a
        const int64_t *off_b
        const void *const *ptr_a
        const void *const *ptr_b

    ctypedef struct pytpp_cache_info:
        int64_t l1, l2, l3

    int pytpp_brgemm(const pytpp_gemm_kernels *kt, const pytpp_cache_info *ci,
                     const pytpp_gemm_desc *d, const void *a, const void *b, void *c,
                     const pytpp_batch *batch, int nthreads)
    int pytpp_brgemm_many(const pytpp_gemm_kernels *kt, const pytpp_cache_info *ci,
                          const pytpp_gemm_desc *d, const void *a, const void *b, void *c,
                          const pytpp_batch *batch, int64_t many,
                          int64_t outer_a, int64_t outer_b, int64_t outer_c, int nthreads)

    const pytpp_gemm_kernels pytpp_gemm_f64_ref, pytpp_gemm_f32_ref
    const pytpp_gemm_kernels pytpp_gemm_f64_avx2, pytpp_gemm_f32_avx2
    const pytpp_gemm_kernels pytpp_gemm_f64_avx512, pytpp_gemm_f32_avx512

cdef extern from "pytpp/tuning.h" nogil:
    int64_t PYTPP_DEFAULT_L1, PYTPP_DEFAULT_L2, PYTPP_DEFAULT_L3
    double PYTPP_HANDLE_NOGIL_FLOPS

cdef extern from "pytpp/cpu.h" nogil:
    enum:
        PYTPP_ISA_REF
        PYTPP_ISA_AVX2
        PYTPP_ISA_AVX512
        PYTPP_NISA
        PYTPP_FEAT_AVX2
        PYTPP_FEAT_FMA
        PYTPP_FEAT_F16C
        PYTPP_FEAT_AVX512F
        PYTPP_FEAT_AVX512BW
        PYTPP_FEAT_AVX512DQ
        PYTPP_FEAT_AVX512VL
        PYTPP_FEAT_AVX512_BF16
        PYTPP_FEAT_AVX512_VNNI
        PYTPP_FEAT_OS_AVX
        PYTPP_FEAT_OS_AVX512
        PYTPP_FEAT_AVX_VNNI
    uint32_t pytpp_cpu_features()
    int pytpp_cpu_best_isa(uint32_t features)
    void pytpp_cpu_brand(char *buf)

cdef extern from "pytpp/peak.h" nogil:
    double pytpp_peak_fma_f64_avx512(int64_t iters, double *sink)
    double pytpp_peak_fma_f32_avx512(int64_t iters, double *sink)
    double pytpp_peak_fma_f64_avx2(int64_t iters, double *sink)
    double pytpp_peak_fma_f32_avx2(int64_t iters, double *sink)
    double pytpp_peak_bf16_dot_avx512(int64_t iters, double *sink)
    double pytpp_peak_int8_dot_avx512(int64_t iters, double *sink)
    double pytpp_peak_int8_madd_avx2(int64_t iters, double *sink)
    double pytpp_peak_int8_madd_avx512(int64_t iters, double *sink)
    double pytpp_peak_int8_u7_avx2(int64_t iters, double *sink)
    double pytpp_peak_int8_dot_avx_vnni(int64_t iters, double *sink)
    double pytpp_stream_read(const double *x, int64_t n, double *sink)
    double pytpp_stream_copy(const double *x, double *y, int64_t n)
    double pytpp_stream_copy_nt(const double *x, double *y, int64_t n)
    void *pytpp_stream_alloc(size_t bytes)
