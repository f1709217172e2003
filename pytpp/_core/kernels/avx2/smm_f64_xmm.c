/* Small-GEMM kernels, f64, avx2 at 128 bits (xmm): instantiated from the shared template
 * gemm_small.inc, for rows narrower than a ymm vector. */
#define PYTPP_DT_F64
#include "pytpp/simd_avx2_xmm.h"
#define PYTPP_SMM_SHAPES(X) PYTPP_ROWS_12(X, 1) PYTPP_ROWS_6(X, 2)
#define PYTPP_SMM_MR_MAX_BY_NV {0, 12, 6}
#define PYTPP_SMM_SHIFT_TAILS 1
#define PYTPP_SMM_PF_MODE 0  /* rows this narrow are short products: nothing to prefetch */
#define PYTPP_SMM_COST_MODEL PYTPP_SMM_MODEL_AVX2
#define PYTPP_SMM_NREGS 16
#include "pytpp/gemm_small.inc"
