/* Pooling kernels, f32, avx2: instantiated from the shared template pool_rows.inc. */
#define PYTPP_DT_F32
#include "pytpp/simd_avx2.h"
#include "pytpp/pool_rows.inc"
