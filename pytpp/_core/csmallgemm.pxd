# C declarations of the small-GEMM engine (pytpp/_core/include/pytpp/smallgemm.h).
# Cython users: `from pytpp._core.csmallgemm cimport pytpp_smm_plan, pytpp_smm_run1` and
# `from pytpp._core._smallgemm cimport GemmKernel`; see docs/smallgemm.md.
from libc.stdint cimport int64_t
from pytpp._core.cengine cimport pytpp_table_info

cdef extern from "pytpp/smallgemm.h" nogil:
    ctypedef struct pytpp_smm_kernels:
        const char *name
        pytpp_table_info info
        int vl
        int vbytes
        int nregs

    ctypedef struct pytpp_smm_plan:
        const pytpp_smm_kernels *kt
        int dtype
        int esz
        int swap
        int pack_b
        int scratch_c
        int64_t m, n, k
        int64_t rsa, csa, rsb, csb
        int64_t rsc, csc
        double alpha, beta
        int64_t nvec, n_ib, n_jb, n_last
        int tail
        int64_t mr, nfull, nshort
        int64_t per_chunk
        int pf
        int64_t pfd
        double flops
        int64_t bytes
        double cost

    enum pytpp_smm_plan_flags:
        PYTPP_SMM_ALLOW_COPIES
        PYTPP_SMM_REDUCTION

    void pytpp_smm_plan_make(pytpp_smm_plan *p, const pytpp_smm_kernels *const *tables,
                             int ntables, int force, int dtype, int64_t m, int64_t n, int64_t k,
                             int64_t rsa, int64_t csa, int64_t rsb, int64_t csb,
                             int64_t rsc, int64_t csc, double alpha, double beta,
                             int flags)
    size_t pytpp_smm_scratch_bytes(const pytpp_smm_plan *p)
    void pytpp_smm_run1(const pytpp_smm_plan *p, const void *a, const void *b, void *c,
                        void *scratch)
    int pytpp_smm_stack(const pytpp_smm_plan *p, int64_t count, const void *a, int64_t sa,
                        const void *b, int64_t sb, void *c, int64_t sc, int nthreads)
    int pytpp_smm_indexed(const pytpp_smm_plan *p, const void *a, int64_t blk_a,
                          const void *b, int64_t blk_b, void *c, int64_t blk_c, int64_t nc,
                          int64_t count, const int64_t *a_index, const int64_t *b_index,
                          const int64_t *c_index, int nthreads)

    const pytpp_smm_kernels pytpp_smm_f64_ref, pytpp_smm_f32_ref
    const pytpp_smm_kernels pytpp_smm_f64_avx2, pytpp_smm_f32_avx2
    const pytpp_smm_kernels pytpp_smm_f64_avx2x, pytpp_smm_f32_avx2x
    const pytpp_smm_kernels pytpp_smm_f64_avx512, pytpp_smm_f32_avx512
    const pytpp_smm_kernels pytpp_smm_f64_avx512y, pytpp_smm_f32_avx512y
