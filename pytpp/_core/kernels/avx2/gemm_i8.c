/* 8-bit GEMM micro-kernels and packers, AVX2 (int16 pairs, vpmaddwd): from the shared template. */
#include "pytpp/simd_i8_avx2.h"
#include "pytpp/gemm_lane.inc"
