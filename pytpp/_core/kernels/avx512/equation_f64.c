/* Equation fused kernel (strategy 2), f64, avx512: instantiated from the shared template. */
#define PYTPP_DT_F64
#include "pytpp/eltwise_simd_avx512.h"
#include "pytpp/equation_rows.inc"
