/* Goto GEMM packed-panel micro-kernels, f32, avx2: from the shared template. */
#define PYTPP_DT_F32
#include "pytpp/simd_avx2.h"
#include "pytpp/gemm_pk_shapes.h"
#ifndef PK_MR_MAIN
#define PK_MR_MAIN PYTPP_PK_MR_AVX2
#define PK_NV_MAIN PYTPP_PK_NV
#endif
#include "pytpp/gemm_avx2_blocks.h"
#include "pytpp/gemm_packed.inc"
