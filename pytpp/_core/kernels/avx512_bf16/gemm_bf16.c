/* bf16 GEMM micro-kernels, native vdpbf16ps (AVX512_BF16): from the shared template. */
#define PYTPP_BF16_NATIVE
#include "pytpp/simd_bf16_avx512.h"
#include "pytpp/gemm_bf16.inc"
