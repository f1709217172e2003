/* Small-GEMM kernels, f64, avx2: instantiated from the shared template gemm_small.inc. */
#define PYTPP_DT_F64
#include "pytpp/simd_avx2.h"
#define PYTPP_SMM_SHAPES(X) SMM_MR_UPTO_12(X, 1) SMM_MR_UPTO_6(X, 2) SMM_MR_UPTO_4(X, 3) SMM_MR_UPTO_3(X, 4) \
    SMM_MR_UPTO_2(X, 5) SMM_MR_UPTO_2(X, 6)
#define PYTPP_SMM_MR_MAX_BY_NV {0, 12, 6, 4, 3, 2, 2}
#define PYTPP_SMM_SHIFT_TAILS 1
#define PYTPP_SMM_PF_MODE 2
#define PYTPP_SMM_COST_MODEL PYTPP_SMM_MODEL_AVX2
#define PYTPP_SMM_NREGS 16
#include "pytpp/gemm_small.inc"
