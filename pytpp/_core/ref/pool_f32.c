/* Pooling kernels, f32, ref: instantiated from the shared template pool_rows.inc. */
#define PYTPP_DT_F32
#include "pytpp/simd_ref.h"
#include "pytpp/pool_rows.inc"
