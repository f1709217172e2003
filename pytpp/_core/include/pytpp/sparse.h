/* Block-sparse x dense products (paper 001, III-C, Listing 5), output-stationary: every output
 * block row (sparse x dense) or block column (dense x sparse) is computed by one thread as ONE
 * batch-reduce over the non-empty blocks of the sparse operand's matching block row / column,
 * through the level's BRGEMM micro-kernels (gemm_ukr.inc, address mode: one pointer per block).
 * No atomics, no private copies of the output: a tile is written once, when its reduction ends.
 * Threads take runs of consecutive output blocks of near-equal non-zero count (not row count),
 * 8 runs per thread handed out dynamically, so a skewed matrix (most blocks in a few rows) still
 * splits evenly.
 *
 * Row-major (numpy C order) throughout; strides in elements. The paper's BCSC of a column-major
 * A is, in these terms, the block-row walk below. */
#ifndef PYTPP_SPARSE_H
#define PYTPP_SPARSE_H
#include <stdint.h>
#include "pytpp/gemm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The compressed block structure of the sparse operand, along the dimension it is walked by:
 * outer group g (a block row for the row walk, a block column for the column walk) holds blocks
 * indptr[g] .. indptr[g+1]-1; block p sits at inner block index idx[p] and its bo x bi values
 * (bo rows, bi columns, in the matrix's own orientation) start at data + p * bstride, element
 * (r, c) at r * brs + c * bcs. */
typedef struct pytpp_bsparse {
    int64_t ngroups;          /* block rows (row walk) or block columns (column walk) */
    int64_t ninner;           /* blocks across a group: the range of idx */
    int64_t bm, bk;           /* block rows x block columns of the sparse matrix */
    const int64_t *indptr;    /* ngroups + 1, non-decreasing, indptr[0] == 0 */
    const int32_t *idx;       /* inner block index of each block */
    const void *data;
    int64_t bstride, brs, bcs;
} pytpp_bsparse;

/* C (ngroups*bm x n) = A @ B: A the sparse matrix walked by block rows (any block strides);
 * B dense K x n (K = inner blocks * bk) with row stride ldb and unit column stride; C row
 * stride ldc, unit column stride. Every element of C is written (empty block rows give 0).
 * b_bf16: B holds bfloat16 (ldb in its elements), widened exactly to float32 as it is packed
 * (dtype must be PYTPP_F32). dtype: enum pytpp_dtype of the table kt. Returns 0, or -1 when a
 * scratch allocation failed. */
int pytpp_spmm_rows(const pytpp_gemm_kernels *kt, int dtype, const pytpp_bsparse *a, const void *b,
                    int b_bf16, int64_t ldb, int64_t n, void *c, int64_t ldc, int nthreads);

/* C (m x ngroups*bk) = X @ W: W the sparse matrix (K x N) walked by block columns, its blocks
 * bm x bk with unit column stride (bcs == 1); X dense m x K with any element strides (rsx, csx);
 * C row stride ldc, unit column stride. */
int pytpp_spmm_cols(const pytpp_gemm_kernels *kt, int dtype, const void *x, int64_t m, int64_t rsx,
                    int64_t csx, const pytpp_bsparse *w, void *c, int64_t ldc, int nthreads);

#ifdef __cplusplus
}
#endif
#endif
