/* Embedding-bag kernels, f64, avx2: instantiated from the shared template embedding_rows.inc. */
#define PYTPP_DT_F64
#include "pytpp/eltwise_simd_avx2.h"
#include "pytpp/embedding_rows.inc"
