/* BRGEMM micro-kernels, f32, avx512: instantiated from the shared template. */
#define PYTPP_DT_F32
#include "pytpp/simd_avx512.h"
#include "pytpp/gemm_ukr.inc"
