/* bf16 GEMM micro-kernels, AVX2 emulation: from the shared template. */
#include "pytpp/simd_bf16_avx2.h"
#include "pytpp/gemm_bf16.inc"
