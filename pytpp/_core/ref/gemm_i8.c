/* 8-bit GEMM micro-kernels and packers, portable C: from the shared template. */
#include "pytpp/simd_i8_ref.h"
#include "pytpp/gemm_lane.inc"
