/* Embedding-bag kernels, f32, avx2: instantiated from the shared template embedding_rows.inc. */
#define PYTPP_DT_F32
#include "pytpp/eltwise_simd_avx2.h"
#include "pytpp/embedding_rows.inc"
