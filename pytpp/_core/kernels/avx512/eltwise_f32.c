/* Element-wise row kernels, f32, avx512: instantiated from the shared template. */
#define PYTPP_DT_F32
#include "pytpp/eltwise_simd_avx512.h"
#include "pytpp/eltwise_ukr.inc"
