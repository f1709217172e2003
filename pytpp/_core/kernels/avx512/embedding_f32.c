/* Embedding-bag kernels, f32, avx512: instantiated from the shared template embedding_rows.inc. */
#define PYTPP_DT_F32
#include "pytpp/eltwise_simd_avx512.h"
#include "pytpp/embedding_rows.inc"
