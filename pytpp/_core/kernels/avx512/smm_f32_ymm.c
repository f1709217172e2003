/* Small-GEMM kernels, f32, avx512y: instantiated from the shared template gemm_small.inc. */
#define PYTPP_DT_F32
#include "pytpp/simd_avx512y.h"
#define PYTPP_SMM_SHAPES(X) PYTPP_ROWS_12(X, 1) PYTPP_ROWS_12(X, 2) PYTPP_ROWS_8(X, 3) PYTPP_ROWS_6(X, 4) \
    PYTPP_ROWS_5(X, 5) PYTPP_ROWS_4(X, 6) PYTPP_ROWS_3(X, 7) PYTPP_ROWS_2(X, 8)
#define PYTPP_SMM_MR_MAX_BY_NV {0, 12, 12, 8, 6, 5, 4, 3, 2}
#define PYTPP_SMM_NREGS 32
#include "pytpp/gemm_small.inc"
