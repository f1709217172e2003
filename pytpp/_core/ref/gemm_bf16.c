/* bf16 GEMM micro-kernels, portable reference: from the shared template. */
#include "pytpp/simd_bf16_ref.h"
#include "pytpp/gemm_bf16.inc"
