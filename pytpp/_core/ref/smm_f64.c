/* Small-GEMM kernels, f64, ref: instantiated from the shared template gemm_small.inc. */
#define PYTPP_DT_F64
#include "pytpp/simd_ref.h"
#define PYTPP_SMM_SHAPES(X) PYTPP_ROWS_4(X, 1) PYTPP_ROWS_4(X, 2) PYTPP_ROWS_4(X, 3) PYTPP_ROWS_4(X, 4)
#define PYTPP_SMM_MR_MAX_BY_NV {0, 4, 4, 4, 4}
#define PYTPP_SMM_NREGS 16
#include "pytpp/gemm_small.inc"
