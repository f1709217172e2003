/* Optimizer-step kernels, f64, avx512: instantiated from the shared template optim_rows.inc. */
#define PYTPP_DT_F64
#include "pytpp/eltwise_simd_avx512.h"
#include "pytpp/optim_rows.inc"
