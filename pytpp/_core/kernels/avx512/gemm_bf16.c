/* bf16 GEMM micro-kernels, AVX-512 emulation (paper Fig. 4): from the shared template. */
#include "pytpp/simd_bf16_avx512.h"
#include "pytpp/gemm_bf16.inc"
