/* bf16 GEMM on AVX2 by widening: the f32 packed-panel kernels, run on bf16 operands that the
 * driver widened to fp32 while packing (pair-swapped k order, see gemm_goto.h), C-first chains,
 * under DAZ+FTZ: the bits of vdpbf16ps at the speed of fp32 FMAs (the in-register emulation
 * spends a shift or an and per product on the FMA ports). */
#define PYTPP_DT_F32
#include "pytpp/simd_avx2.h"
#include "pytpp/gemm_pk_shapes.h"
#define PK_MR_MAIN PYTPP_PK_MR_AVX2
#define PK_NV_MAIN PYTPP_PK_NV
#define PK_C_FIRST 1
#define PK_FTZ 1
#define PK_BF16_WIDENED 1
#define PK_TABLE_SUFFIX _bf16w
#include "pytpp/kernel_common.h"
#include "pytpp/gemm.h"
#include "pytpp/bf16w_rows_avx2.h"
#define PK_PACK_BT tpp_bf16w_pack_bt_avx2
#define PK_DOT_BT tpp_bf16w_dot_bt_avx2
#define PK_DOT_BN tpp_bf16w_dot_bn_avx2
#include "pytpp/gemm_avx2_blocks.h"
#include "pytpp/gemm_packed.inc"
