/* Equation fused kernel (strategy 2), f32, avx2: instantiated from the shared template. */
#define PYTPP_DT_F32
#include "pytpp/eltwise_simd_avx2.h"
#include "pytpp/equation_rows.inc"
