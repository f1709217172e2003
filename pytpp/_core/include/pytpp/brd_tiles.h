/* Register blocks of C for the direct kernels (pytpp_lowp_brd_fn): one column panel of nr
 * columns from column j0, its rows [0, m) in ceil(m / mr_main) blocks of equal heights (64 rows:
 * 6 of 10-11, not 5 of 12 and one of 4 whose few accumulator chains wait on the dot product's
 * latency), row blocks [r0, r1) of them. Shared by the low-precision driver (gemm_lowp.c),
 * the small bf16 products of pytpp.matmul (gemm_goto.c) and the bf16 convolutions
 * (conv_bf16.c). */
#ifndef PYTPP_BRD_TILES_H
#define PYTPP_BRD_TILES_H
#include <stdint.h>
#include "pytpp/gemm_goto.h"

typedef pytpp_lowp_brd_fn pytpp_brd_table[PYTPP_PK_NV_MAX][PYTPP_PK_MR_MAX][2];

static inline int64_t pytpp_brd_blocks(int64_t m, int64_t mr_main)
{
    return (m + mr_main - 1) / mr_main;
}

/* the first row of register-block row r of `blocks` over m rows (row r is [first(r),
 * first(r + 1))) */
static inline int64_t pytpp_brd_first_row(int64_t m, int64_t blocks, int64_t r)
{
    return m * r / blocks;
}

/* wb: bytes of B per column (a word); C of 4-byte elements, row stride ldc; cb: the column bias
 * of 8-bit kernels from column j0 (or NULL) */
static inline void pytpp_brd_panel(const pytpp_brd_table *t, int64_t mr_main, int64_t nr,
                                   int64_t vl, int64_t m, int64_t n, int64_t j0, int64_t r0,
                                   int64_t r1, int64_t ks, int64_t nb, const char *const *ap,
                                   int64_t lda, const char *const *bp, int64_t wb, int64_t ldb,
                                   char *c, int64_t ldc, int accumulate, const int32_t *cb)
{
    const int64_t blocks = pytpp_brd_blocks(m, mr_main), cols = n - j0 < nr ? n - j0 : nr;
    const int64_t nv = (cols + vl - 1) / vl, tail = cols - (nv - 1) * vl;
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i0 = pytpp_brd_first_row(m, blocks, r);
        const int64_t rows = pytpp_brd_first_row(m, blocks, r + 1) - i0;
        (*t)[nv - 1][rows - 1][tail != vl](ks, nb, ap, i0 * lda, lda, bp, j0 * wb, ldb,
                                           c + (i0 * ldc + j0) * 4, ldc, accumulate, tail, cb);
    }
}

#endif
