/* 8-bit GEMM micro-kernels and packers, AVX-512BW (int16 pairs, vpmaddwd): from the shared template. */
#include "pytpp/simd_i8_avx512.h"
#include "pytpp/gemm_lane.inc"
