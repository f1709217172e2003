/* bf16 x bf16 -> fp32 lane kernels, AVX2 (operands widened to fp32, the vdpbf16ps order): from the shared template. */
#include "pytpp/simd_bf16_lanes_avx2.h"
#include "pytpp/gemm_lane.inc"
