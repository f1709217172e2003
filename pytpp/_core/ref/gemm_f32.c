/* BRGEMM micro-kernels, f32, ref: instantiated from the shared template. */
#define PYTPP_DT_F32
#include "pytpp/simd_ref.h"
#include "pytpp/gemm_ukr.inc"
