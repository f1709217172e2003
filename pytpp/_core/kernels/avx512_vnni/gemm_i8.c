/* 8-bit GEMM micro-kernels and packers, AVX512_VNNI (u8 x s8 quads, vpdpbusd): from the shared template. */
#define PYTPP_I8_VNNI
#include "pytpp/simd_i8_avx512.h"
#include "pytpp/gemm_lane.inc"
