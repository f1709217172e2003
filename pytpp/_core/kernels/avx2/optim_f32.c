/* Optimizer-step kernels, f32, avx2: instantiated from the shared template optim_rows.inc. */
#define PYTPP_DT_F32
#include "pytpp/eltwise_simd_avx2.h"
#include "pytpp/optim_rows.inc"
