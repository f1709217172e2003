/* Embedding-bag kernels, f64, ref: instantiated from the shared template embedding_rows.inc. */
#define PYTPP_DT_F64
#include "pytpp/eltwise_simd_ref.h"
#include "pytpp/embedding_rows.inc"
