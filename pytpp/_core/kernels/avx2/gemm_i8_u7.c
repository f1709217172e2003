/* 8-bit GEMM micro-kernels and packers, AVX2 for 7-bit A (vpmaddubsw, exact below 128): from the shared template. */
#define PYTPP_I8_U7
#include "pytpp/simd_i8_avx2.h"
#include "pytpp/gemm_lane.inc"
