/* Pooling kernels, f64, avx512: instantiated from the shared template pool_rows.inc. */
#define PYTPP_DT_F64
#include "pytpp/simd_avx512.h"
#include "pytpp/pool_rows.inc"
