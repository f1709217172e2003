/* BRGEMM micro-kernels, f32, avx512: instantiated from the shared template. */
#define PYTPP_DT_F32
#include "pytpp/simd_avx512.h"
#define PYTPP_GEMM_STREAM_PF 1
#include "pytpp/gemm_ukr.inc"
