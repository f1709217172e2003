/* Equation fused kernel (strategy 2), f64, ref: instantiated from the shared template. */
#define PYTPP_DT_F64
#include "pytpp/eltwise_simd_ref.h"
#include "pytpp/equation_rows.inc"
