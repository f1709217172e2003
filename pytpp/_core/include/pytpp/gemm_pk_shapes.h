/* X-macro lists of register blocks for the packed-panel kernels: PK_ROWS_<MR>(X, NV) applies X
 * to (1, NV) ... (MR, NV). */
#define PK_ROWS_1(X, NV) X(1, NV)
#define PK_ROWS_2(X, NV) PK_ROWS_1(X, NV) X(2, NV)
#define PK_ROWS_3(X, NV) PK_ROWS_2(X, NV) X(3, NV)
#define PK_ROWS_4(X, NV) PK_ROWS_3(X, NV) X(4, NV)
#define PK_ROWS_5(X, NV) PK_ROWS_4(X, NV) X(5, NV)
#define PK_ROWS_6(X, NV) PK_ROWS_5(X, NV) X(6, NV)
#define PK_ROWS_7(X, NV) PK_ROWS_6(X, NV) X(7, NV)
#define PK_ROWS_8(X, NV) PK_ROWS_7(X, NV) X(8, NV)
#define PK_ROWS_9(X, NV) PK_ROWS_8(X, NV) X(9, NV)
#define PK_ROWS_10(X, NV) PK_ROWS_9(X, NV) X(10, NV)
#define PK_ROWS_11(X, NV) PK_ROWS_10(X, NV) X(11, NV)
#define PK_ROWS_12(X, NV) PK_ROWS_11(X, NV) X(12, NV)
#define PK_ROWS_13(X, NV) PK_ROWS_12(X, NV) X(13, NV)
#define PK_ROWS_14(X, NV) PK_ROWS_13(X, NV) X(14, NV)
#define PK_ROWS_(N) PK_ROWS_##N
#define PK_ROWS(N) PK_ROWS_(N)

/* Every block up to PK_MR_MAIN x PK_NV_MAIN. */
#define PK_NVS_1(X) PK_ROWS(PK_MR_MAIN)(X, 1)
#define PK_NVS_2(X) PK_NVS_1(X) PK_ROWS(PK_MR_MAIN)(X, 2)
#define PK_NVS_3(X) PK_NVS_2(X) PK_ROWS(PK_MR_MAIN)(X, 3)
#define PK_NVS_4(X) PK_NVS_3(X) PK_ROWS(PK_MR_MAIN)(X, 4)
#define PK_NVS_(N) PK_NVS_##N
#define PK_NVS(N) PK_NVS_(N)
#define PK_SHAPES(X) PK_NVS(PK_NV_MAIN)(X)
