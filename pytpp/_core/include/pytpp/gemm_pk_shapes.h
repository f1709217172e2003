/* The register blocks of the packed-panel kernels: every block up to PK_MR_MAIN x PK_NV_MAIN. */
#ifndef PYTPP_GEMM_PK_SHAPES_H
#define PYTPP_GEMM_PK_SHAPES_H
#include "pytpp/kernel_common.h"

/* The main register blocks of the packed-panel tables: their kernel sources (and the bf16
 * shims) set PK_MR_MAIN / BF16_MR_MAIN from these, and the packers (frame/pack.c) specialise
 * the same widths. */
#define PYTPP_PK_MR_REF 4
#define PYTPP_PK_MR_AVX2 6
#define PYTPP_PK_MR_AVX512 12
#define PYTPP_PK_NV 2                                 /* vectors per row, AVX2 and AVX-512 */
#define PYTPP_PK_NV_REF 4
#define PYTPP_PK_NR_AVX2_F32 (PYTPP_PK_NV * 8)        /* fp32 lanes of a panel row: 16 */
#define PYTPP_PK_NR_AVX512_F32 (PYTPP_PK_NV * 16)     /* 32 */

#define PK_NVS_1(X) PYTPP_ROWS(PK_MR_MAIN)(X, 1)
#define PK_NVS_2(X) PK_NVS_1(X) PYTPP_ROWS(PK_MR_MAIN)(X, 2)
#define PK_NVS_3(X) PK_NVS_2(X) PYTPP_ROWS(PK_MR_MAIN)(X, 3)
#define PK_NVS_4(X) PK_NVS_3(X) PYTPP_ROWS(PK_MR_MAIN)(X, 4)
#define PK_NVS_(N) PK_NVS_##N
#define PK_NVS(N) PK_NVS_(N)
#define PK_SHAPES(X) PK_NVS(PK_NV_MAIN)(X)
#endif
