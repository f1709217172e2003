/* Pooling kernels, f32, avx512: instantiated from the shared template pool_rows.inc. */
#define PYTPP_DT_F32
#include "pytpp/simd_avx512.h"
#include "pytpp/pool_rows.inc"
