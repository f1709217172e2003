/* BRGEMM micro-kernels, f32, avx2: instantiated from the shared template. */
#define PYTPP_DT_F32
#include "pytpp/simd_avx2.h"
#include "pytpp/gemm_ukr.inc"
