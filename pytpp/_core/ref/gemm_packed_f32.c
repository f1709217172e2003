/* Goto GEMM packed-panel micro-kernels, f32, ref: from the shared template. */
#define PYTPP_DT_F32
#include "pytpp/simd_ref.h"
#include "pytpp/gemm_pk_shapes.h"
#ifndef PK_MR_MAIN
#define PK_MR_MAIN 4
#define PK_NV_MAIN 4
#endif
#include "pytpp/gemm_packed.inc"
