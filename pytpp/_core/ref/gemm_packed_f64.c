/* Goto GEMM packed-panel micro-kernels, f64, ref: from the shared template. */
#define PYTPP_DT_F64
#include "pytpp/simd_ref.h"
#include "pytpp/gemm_pk_shapes.h"
#ifndef PK_MR_MAIN
#define PK_MR_MAIN PYTPP_PK_MR_REF
#define PK_NV_MAIN PYTPP_PK_NV_REF
#endif
#include "pytpp/gemm_packed.inc"
