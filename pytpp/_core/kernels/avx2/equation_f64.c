/* Equation fused kernel (strategy 2), f64, avx2: instantiated from the shared template. */
#define PYTPP_DT_F64
#include "pytpp/eltwise_simd_avx2.h"
#include "pytpp/equation_rows.inc"
