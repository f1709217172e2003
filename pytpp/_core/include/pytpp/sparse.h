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
#include "pytpp/gemm_goto.h"

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

/* bfloat16 products (both operands bf16, C float32): per output, the chain vdpbf16ps performs
 * (gemm_goto.h): each block's k range in pairs, the odd element first, a block of odd depth
 * padded with a zero, denormals flushed; blocks in stored order. Two kernels give those bits:
 *   PYTPP_SPMM_BF16_PAIRS: a bf16 table's direct kernels (pytpp_spmm_bf16_pairs) on bf16 words:
 *     the sparse blocks hold bf16 with even depth (zero-padded), the dense A operand of the
 *     column walk bf16 rows of whole words, its k laid out per block at the blocks' even depth;
 *     the sparse B operand of the column walk holds VNNI pairs (a bm x bn block as ceil(bm/2)
 *     rows of bn words);
 *   PYTPP_SPMM_BF16_WIDENED: the float32 table on float32 operands widened from bf16 with each
 *     k pair stored odd element first (the blocks, and X of the column walk, laid out so by the
 *     caller), under DAZ+FTZ.
 * The dense B of the row walk is bf16 as the caller has it in both: the packer lays it out. */
enum pytpp_spmm_mode {
    PYTPP_SPMM_PLAIN = 0, PYTPP_SPMM_BF16_WIDENED = 1, PYTPP_SPMM_BF16_PAIRS = 2
};

/* Whether bf can run PYTPP_SPMM_BF16_PAIRS (it has direct kernels on bf16 words). */
int pytpp_spmm_bf16_pairs(const pytpp_pk_kernels *bf);

/* C (ngroups*bm x n) = A @ B: A the sparse matrix walked by block rows (any block strides; bk
 * its stored block depth); B dense (ninner * kb) x n, kb rows per inner block (bk, or bk - 1 for
 * bf16 blocks padded to even depth), row stride ldb and unit column stride; C row stride ldc,
 * unit column stride. Every element of C is written (empty block rows give 0). kt: the table of
 * dtype (enum pytpp_dtype) for PLAIN, its float32 table for WIDENED; bf: the bf16 table for
 * PAIRS (else unused). ldb is in B's own elements (bf16 for both bf16 modes). Returns 0, or -1
 * when a scratch allocation failed. */
int pytpp_spmm_rows(const pytpp_gemm_kernels *kt, const pytpp_pk_kernels *bf, int mode,
                    int dtype, const pytpp_bsparse *a, const void *b, int64_t kb, int64_t ldb,
                    int64_t n, void *c, int64_t ldc, int nthreads);

/* C (m x ngroups*bk) = X @ W: W the sparse matrix (K x N) walked by block columns, its blocks
 * bm x bk with unit column stride (bcs == 1; PAIRS: VNNI pairs, bm the even depth); X dense
 * m x K (K = inner blocks * bm) with any element strides (rsx, csx; PAIRS: csx == 1, rsx even,
 * X 4-byte aligned); C row stride ldc, unit column stride. */
int pytpp_spmm_cols(const pytpp_gemm_kernels *kt, const pytpp_pk_kernels *bf, int mode,
                    int dtype, const void *x, int64_t m, int64_t rsx, int64_t csx,
                    const pytpp_bsparse *w, void *c, int64_t ldc, int nthreads);

#ifdef __cplusplus
}
#endif
#endif
