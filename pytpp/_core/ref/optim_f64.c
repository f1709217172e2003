/* Optimizer-step kernels, f64, ref: instantiated from the shared template optim_rows.inc. */
#define PYTPP_DT_F64
#include "pytpp/eltwise_simd_ref.h"
#include "pytpp/optim_rows.inc"
