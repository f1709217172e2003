# The one dispatch table (pytpp/_core/include/pytpp/dispatch.h): every kernel family's table per
# ISA level. The glue modules read kernels only from here, through _runtime's level().
from libc.stdint cimport uint32_t
from pytpp._core.cengine cimport pytpp_table_info, pytpp_gemm_kernels, PYTPP_NDTYPES, PYTPP_NISA
from pytpp._core._matmul cimport pytpp_pk_kernels
from pytpp._core.csmallgemm cimport pytpp_smm_kernels
from pytpp._core.celtwise cimport pytpp_ew_kernels
from pytpp._core.cnorm cimport pytpp_norm_kernels
from pytpp._core.coptim cimport pytpp_optim_kernels
from pytpp._core.cembedding cimport pytpp_embedding_kernels

cdef extern from "pytpp/equation.h" nogil:
    ctypedef struct pytpp_eqn_kernels:
        const char *name
        pytpp_table_info info

cdef extern from "pytpp/pool.h" nogil:
    ctypedef struct pytpp_pool_kernels:
        const char *name
        pytpp_table_info info

cdef extern from "pytpp/gemm_lowp.h" nogil:
    ctypedef struct pytpp_i8_kernels:
        const char *name
        pytpp_table_info info
        int vl, nv_main, mr_main, group

cdef extern from "pytpp/dispatch.h" nogil:
    enum:
        PYTPP_I8_AUTO
        PYTPP_I8_NKERNELS
    ctypedef struct pytpp_i8_entry:
        const char *name
        const pytpp_i8_kernels *kt
        int isa
        uint32_t features
        int s8_b_only
        int a7_only
    const pytpp_i8_entry pytpp_i8_kernel_list[PYTPP_I8_NKERNELS]
    const pytpp_i8_kernels *pytpp_i8_select(int isa, uint32_t features, int which, int a_signed,
                                            int b_signed)

    enum:
        PYTPP_BF16_AUTO
        PYTPP_BF16_NATIVE
        PYTPP_BF16_NKERNELS

    ctypedef struct pytpp_level_kernels:
        const char *name
        const pytpp_gemm_kernels *brgemm[PYTPP_NDTYPES]
        const pytpp_pk_kernels *packed[PYTPP_NDTYPES]
        const pytpp_smm_kernels *smm[PYTPP_NDTYPES][2]
        int smm_flavours
        const pytpp_ew_kernels *eltwise[PYTPP_NDTYPES]
        const pytpp_norm_kernels *norm[PYTPP_NDTYPES]
        const pytpp_optim_kernels *optim[PYTPP_NDTYPES]
        const pytpp_embedding_kernels *embedding[PYTPP_NDTYPES]
        const pytpp_eqn_kernels *equation[PYTPP_NDTYPES]
        const pytpp_pool_kernels *pool[PYTPP_NDTYPES]
        int bf16_default
        const pytpp_i8_kernels *bf16_lanes

    ctypedef struct pytpp_bf16_entry:
        const char *name
        const pytpp_pk_kernels *kt
        int isa
        uint32_t features

    const pytpp_level_kernels pytpp_levels[PYTPP_NISA]
    const pytpp_bf16_entry pytpp_bf16_kernels[PYTPP_BF16_NKERNELS]
    const pytpp_pk_kernels *pytpp_bf16_select(int isa, uint32_t features, int which)
    const pytpp_pk_kernels *pytpp_bf16_rows_select(int isa, uint32_t features, int bt)
    int pytpp_dispatch_missing(int isa)
