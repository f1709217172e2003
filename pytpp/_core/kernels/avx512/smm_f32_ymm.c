/* Small-GEMM kernels, f32, avx512y: instantiated from the shared template gemm_small.inc. */
#define PYTPP_DT_F32
#include "pytpp/simd_avx512y.h"
#define PYTPP_SMM_SHAPES(X) SMM_MR_UPTO_12(X, 1) SMM_MR_UPTO_12(X, 2) SMM_MR_UPTO_8(X, 3) SMM_MR_UPTO_6(X, 4) \
    SMM_MR_UPTO_5(X, 5) SMM_MR_UPTO_4(X, 6) SMM_MR_UPTO_3(X, 7) SMM_MR_UPTO_2(X, 8)
#define PYTPP_SMM_MR_MAX_BY_NV {0, 12, 12, 8, 6, 5, 4, 3, 2}
#define PYTPP_SMM_NREGS 32
#include "pytpp/gemm_small.inc"
