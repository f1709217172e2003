/* Goto GEMM packed-panel micro-kernels, f64, avx512: from the shared template. */
#define PYTPP_DT_F64
#include "pytpp/simd_avx512.h"
#include "pytpp/gemm_pk_shapes.h"
#ifndef PK_MR_MAIN
#define PK_MR_MAIN PYTPP_PK_MR_AVX512
#define PK_NV_MAIN PYTPP_PK_NV
#endif
#include "pytpp/gemm_packed.inc"
