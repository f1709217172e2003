/* bf16 GEMM micro-kernels, native vdpbf16ps (AVX512_BF16): from the shared template. */
#define PYTPP_BF16_NATIVE
#include "pytpp/simd_bf16_avx512.h"
#include "pytpp/gemm.h"
#include "pytpp/bf16_rows_avx512.h"
#define BF16_DOT_BT tpp_bf16n_dot_bt_avx512_bf16
#include "pytpp/bf16_store_avx512.h"
#define BF16_TO_BF16 tpp_bf16n_to_bf16_avx512_bf16
#include "pytpp/gemm_bf16.inc"
