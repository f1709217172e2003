/* BRGEMM micro-kernels, f64, ref: instantiated from the shared template. */
#define PYTPP_DT_F64
#include "pytpp/simd_ref.h"
#include "pytpp/gemm_ukr.inc"
