/* Element-wise row kernels, f32, avx2: instantiated from the shared template. */
#define PYTPP_DT_F32
#include "pytpp/eltwise_simd_avx2.h"
#include "pytpp/eltwise_ukr.inc"
