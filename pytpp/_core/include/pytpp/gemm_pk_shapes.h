/* The register blocks of the packed-panel kernels: every block up to PK_MR_MAIN x PK_NV_MAIN. */
#include "pytpp/kernel_common.h"

#define PK_NVS_1(X) PYTPP_ROWS(PK_MR_MAIN)(X, 1)
#define PK_NVS_2(X) PK_NVS_1(X) PYTPP_ROWS(PK_MR_MAIN)(X, 2)
#define PK_NVS_3(X) PK_NVS_2(X) PYTPP_ROWS(PK_MR_MAIN)(X, 3)
#define PK_NVS_4(X) PK_NVS_3(X) PYTPP_ROWS(PK_MR_MAIN)(X, 4)
#define PK_NVS_(N) PK_NVS_##N
#define PK_NVS(N) PK_NVS_(N)
#define PK_SHAPES(X) PK_NVS(PK_NV_MAIN)(X)
