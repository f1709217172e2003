/* BRGEMM engine: descriptors, batch specifications and the per-ISA kernel table.
 *
 * Layout convention (row-major, numpy C order):
 *   A_i is m x k with element strides (rsa, csa): any strides, so A^T costs nothing.
 *   B_i is k x n with row stride ldb and column stride csb (csb != 1 is packed by the driver).
 *   C   is m x n with row stride ldc and unit column stride.
 * All strides and offsets are in elements, not bytes. */
#ifndef PYTPP_GEMM_H
#define PYTPP_GEMM_H

#include <stdint.h>
#include <stddef.h>
#include "pytpp/kernel_common.h"

#ifdef __cplusplus
extern "C" {
#endif

enum pytpp_dtype { PYTPP_F64 = 0, PYTPP_F32 = 1, PYTPP_NDTYPES = 2 };
enum pytpp_batch_mode { PYTPP_BATCH_STRIDE = 0, PYTPP_BATCH_OFFSET = 1, PYTPP_BATCH_ADDRESS = 2 };

/* Register-block family limits shared by every ISA's table. */
#define PYTPP_NV_MAX 4   /* vectors per micro-tile row */
#define PYTPP_MR_MAX 12  /* rows per micro-tile */

/* Micro-kernel: C[0:MR, 0:NR] = alpha * sum_b A_b[MR x k] B_b[k x NR] + beta * C.
 * ap[b] + a_off and bp[b] + b_off address the first element of each block.
 * The last vector of a row is masked to n_last valid lanes when the kernel is a masked variant.
 * beta == 0 never reads C. */
typedef void (*pytpp_ukr_fn)(int64_t k, int64_t nb,
                             const void *const *ap, int64_t a_off, int64_t rsa, int64_t csa,
                             const void *const *bp, int64_t b_off, int64_t ldb,
                             void *c, int64_t ldc, double alpha, double beta,
                             int64_t n_last);

/* C += the product instead of C = it; B streams from memory (software prefetch into L2);
 * dot_nn reads B in slices of 4 rows instead of 8 (the machine's choice: tuning.h). */
enum pytpp_dot_flags { PYTPP_DOT_ACCUMULATE = 1, PYTPP_DOT_PREFETCH = 2, PYTPP_DOT_SLICE4 = 4 };

typedef struct pytpp_gemm_kernels {
    const char *name;                 /* e.g. "avx512" */
    pytpp_table_info info;
    int vl;                           /* elements per vector register */
    int nv_main;                      /* vectors per row of the main register block */
    int mr_max[PYTPP_NV_MAX + 1];     /* largest MR available for nv = 1..NV_MAX */
    pytpp_ukr_fn ukr[PYTPP_NV_MAX][PYTPP_MR_MAX][2]; /* [nv-1][mr-1][masked] */
    /* Same blocks, prefetching the next batch element's operands inside the k loop (the
     * block-sparse walk). These read ap[nb] and bp[nb] (one past the batch) as the block to
     * prefetch during the last one: pass the next chunk's first block, or the last block again. */
    pytpp_ukr_fn ukr_pf[PYTPP_NV_MAX][PYTPP_MR_MAX][2];
    /* Same blocks, fetching the byte range [ap[nb], bp[nb]) into L2 during the call, its lines
     * spread evenly over the k steps (at most one per step; NULL, NULL: none): a BRGEMM
     * reduction streaming from memory fetches its next chunk with these */
    pytpp_ukr_fn ukr_lpf[PYTPP_NV_MAX][PYTPP_MR_MAX][2];
    /* Few rows of A (gemm_dot.inc), flags PYTPP_DOT_*. dot_nt: C (m x n) (+)= A B^T, A (m x k)
     * and B (n x k) rows with unit stride along k, every row of B read once per group of 4 rows
     * of A (x @ w.T at small m). dot_nn: the same for B (k x n) with unit column stride (x @ W)
     * and A of any strides, k in slices of 8 rows of B with C accumulating in cache. */
    void (*dot_nt)(int64_t m, int64_t n, int64_t k, const void *a, int64_t lda, const void *b,
                   int64_t ldb, void *c, int64_t ldc, int flags);
    void (*dot_nn)(int64_t m, int64_t n, int64_t k, const void *a, int64_t rsa, int64_t csa,
                   const void *b, int64_t ldb, void *c, int64_t ldc, int flags);
    /* dot_pk: the same for B one k block of a PackedMatrix, panels of PYTPP_PK_NV vectors of
     * columns (panel g at b + g * ldgroup, row p at + p * NR), each lane's sum in registers
     * over the block (x @ PackedLinear's weight at small m). */
    void (*dot_pk)(int64_t m, int64_t n, int64_t k, const void *a, int64_t rsa, int64_t csa,
                   const void *b, int64_t ldgroup, void *c, int64_t ldc, int flags);
} pytpp_gemm_kernels;

typedef struct pytpp_gemm_desc {
    int64_t m, n, k;
    int64_t rsa, csa;       /* A strides */
    int64_t ldb, csb;       /* B strides */
    int64_t ldc;            /* C row stride */
    int dtype;              /* enum pytpp_dtype */
    double alpha, beta;     /* beta == 0: C is write-only */
} pytpp_gemm_desc;

typedef struct pytpp_batch {
    int mode;               /* enum pytpp_batch_mode */
    int64_t count;
    int64_t stride_a, stride_b;          /* STRIDE: A_i = a + i*stride_a */
    const int64_t *off_a, *off_b;        /* OFFSET: A_i = a + off_a[i]     */
    const void *const *ptr_a;            /* ADDRESS: A_i = ptr_a[i]        */
    const void *const *ptr_b;
} pytpp_batch;

/* Tuning inputs the Python layer measures once (cache sizes) and passes down. */
typedef struct pytpp_cache_info {
    int64_t l1, l2, l3;     /* bytes per core (l3: shared total) */
} pytpp_cache_info;

/* One BRGEMM: C = alpha * sum_i A_i B_i + beta * C.  Returns 0, or -1 if scratch allocation failed. */
int pytpp_brgemm(const pytpp_gemm_kernels *kt, const pytpp_cache_info *ci,
                 const pytpp_gemm_desc *d, const void *a, const void *b, void *c,
                 const pytpp_batch *batch, int nthreads);

/* `many` independent BRGEMMs that differ by fixed element strides of a, b and c (or by offset
 * arrays when outer_off_* are non-NULL); parallel over them. */
int pytpp_brgemm_many(const pytpp_gemm_kernels *kt, const pytpp_cache_info *ci,
                      const pytpp_gemm_desc *d, const void *a, const void *b, void *c,
                      const pytpp_batch *batch, int64_t many,
                      int64_t outer_a, int64_t outer_b, int64_t outer_c, int nthreads);

/* Kernel tables, one per (ISA, dtype). The ISA ones must only be used after a cpu check. */
extern const pytpp_gemm_kernels pytpp_gemm_f64_ref, pytpp_gemm_f32_ref;
extern const pytpp_gemm_kernels pytpp_gemm_f64_avx2, pytpp_gemm_f32_avx2;
extern const pytpp_gemm_kernels pytpp_gemm_f64_avx512, pytpp_gemm_f32_avx512;

#ifdef __cplusplus
}
#endif
#endif
