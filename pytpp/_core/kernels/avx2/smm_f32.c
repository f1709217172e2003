/* Small-GEMM kernels, f32, avx2: instantiated from the shared template gemm_small.inc. */
#define PYTPP_DT_F32
#include "pytpp/simd_avx2.h"
#define PYTPP_SMM_SHAPES(X) PYTPP_ROWS_12(X, 1) PYTPP_ROWS_6(X, 2) PYTPP_ROWS_4(X, 3) PYTPP_ROWS_3(X, 4) \
    PYTPP_ROWS_2(X, 5) PYTPP_ROWS_2(X, 6)
#define PYTPP_SMM_MR_MAX_BY_NV {0, 12, 6, 4, 3, 2, 2}
#define PYTPP_SMM_SHIFT_TAILS 1
#define PYTPP_SMM_PF_MODE 2
#define PYTPP_SMM_COST_MODEL PYTPP_SMM_MODEL_AVX2
#define PYTPP_SMM_NREGS 16
#include "pytpp/gemm_small.inc"
