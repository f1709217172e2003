/* Optimizer-step kernels, f32, ref: instantiated from the shared template optim_rows.inc. */
#define PYTPP_DT_F32
#include "pytpp/eltwise_simd_ref.h"
#include "pytpp/optim_rows.inc"
