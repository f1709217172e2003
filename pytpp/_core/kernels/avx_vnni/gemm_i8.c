/* 8-bit GEMM micro-kernels and packers, AVX-VNNI (u8 x s8 quads, VEX vpdpbusd on ymm): from the shared template. */
#define PYTPP_I8_AVX_VNNI
#include "pytpp/simd_i8_avx2.h"
#include "pytpp/gemm_lane.inc"
