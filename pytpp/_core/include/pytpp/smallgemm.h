/* Small-GEMM engine: products of tiny matrices (4..64 per side) one at a time, in strided stacks
 * and in DBCSR-style indexed stacks, with no packing of the operands and no per-matrix dispatch.
 *
 * The kernels are specialised ahead of time: gemm_small.inc is instantiated per (ISA, vector
 * width, dtype) for every register block MR x NV (NV vectors of VL lanes, the last one masked or
 * not) that fits the register file. A plan, made once per shape and layout, picks the vector width
 * and the blocks that cover C with the fewest instructions; running it costs a few indirect calls.
 *
 * Layout convention (row-major, strides in elements, any sign):
 *   A is m x k with element strides (rsa, csa), B is k x n with (rsb, csb), C is m x n with (rsc, csc).
 * The kernels need B and C rows contiguous (csb == csc == 1). The plan gets there without copying
 * whole operands: it computes C^T = B^T A^T when C is column-contiguous, and otherwise copies the
 * one small operand that is not (B per product into scratch, or C through scratch). */
#ifndef PYTPP_SMALLGEMM_H
#define PYTPP_SMALLGEMM_H

#include <stdint.h>
#include <stddef.h>
#include "pytpp/gemm.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PYTPP_SMM_NV_MAX 8   /* vectors per register-block row */
#define PYTPP_SMM_MR_MAX 12  /* rows per register block */
#define PYTPP_SMM_MAX_TABLES 2

/* How the last vector of a row covers the columns past the last multiple of VL (n_last of them):
 * not at all (n is a multiple of VL), through a mask, or as a full vector shifted left to end at
 * column n, overlapping the vector before it (legal when the row has >= VL columns; both
 * vectors compute the shared lanes alike). Masked stores are slow on AMD's AVX2 cores. */
enum pytpp_smm_tail { PYTPP_SMM_TAIL_NONE, PYTPP_SMM_TAIL_MASK, PYTPP_SMM_TAIL_SHIFT, PYTPP_SMM_NTAILS };
/* Software prefetching of a stack kernel (see gemm_small.inc): none, the next register block's
 * operands (tuned on Zen 4), or each block's own operands `pfd` products ahead. */
enum pytpp_smm_pf { PYTPP_SMM_PF_NONE, PYTPP_SMM_PF_NEXT, PYTPP_SMM_PF_AHEAD };
/* The planner's cost model for a table: calibrated on Zen 4 for the AVX-512 tables (and ref),
 * on Zen 3 for the 16-register AVX2 ones. */
enum pytpp_smm_model { PYTPP_SMM_MODEL_ZEN4, PYTPP_SMM_MODEL_AVX2 };

/* Column block of C over a strided stack: for l in [0, count), for the nfull row blocks of MR rows
 * and then the nshort row blocks of MR - 1 rows:
 *   C_l[rows, 0:NV*VL] = alpha * A_l[rows x k] B_l[k x NV*VL] + beta * C_l
 * with A_l = a + l*sa (element strides rsa, csa), B_l = b + l*sb (row stride ldb, unit columns),
 * C_l = c + l*sc (row stride ldc, unit columns). The last vector is masked to n_last lanes in the
 * masked variant, shifted to end at column (NV-1)*VL + n_last in the shifted one. beta == 0 never
 * reads C. pfd: products ahead that the PF_AHEAD variants prefetch (others ignore it). */
typedef void (*pytpp_smm_stack_fn)(int64_t count, int64_t k,
                                   const void *a, int64_t rsa, int64_t csa, int64_t sa,
                                   const void *b, int64_t ldb, int64_t sb,
                                   void *c, int64_t ldc, int64_t sc,
                                   double alpha, double beta, int64_t n_last,
                                   int64_t nfull, int64_t nshort, int64_t pfd);

/* Register block reduced over a list of products (same signature as pytpp_ukr_fn):
 *   C[0:MR, 0:NV*VL] = alpha * sum_i (ap[i] + a_off)[MR x k] (bp[i] + b_off)[k x NV*VL] + beta * C */
typedef pytpp_ukr_fn pytpp_smm_reduce_fn;

typedef struct pytpp_smm_kernels {
    const char *name;                         /* e.g. "avx512" (zmm) or "avx512y" (ymm) */
    pytpp_table_info info;
    int vl;                                   /* lanes per vector */
    int vbytes;                               /* bytes per vector register */
    int nregs;                                /* vector registers of the ISA */
    int shift_tails;                          /* 1: the PYTPP_SMM_TAIL_SHIFT kernels exist */
    int pf_mode;                              /* enum pytpp_smm_pf of the prefetching kernels */
    int cost_model;                           /* enum pytpp_smm_model the planner applies */
    int mr_max[PYTPP_SMM_NV_MAX + 1];         /* largest MR for NV = 1..NV_MAX (0: none) */
    /* [nv-1][mr-1][tail][prefetching] */
    pytpp_smm_stack_fn stack[PYTPP_SMM_NV_MAX][PYTPP_SMM_MR_MAX][PYTPP_SMM_NTAILS][2];
    pytpp_smm_reduce_fn reduce[PYTPP_SMM_NV_MAX][PYTPP_SMM_MR_MAX][PYTPP_SMM_NTAILS];
} pytpp_smm_kernels;

/* How to run one shape and layout: made once by pytpp_smm_plan_make, then read-only (shared by
 * threads). All fields describe the problem after the optional transposition C^T = B^T A^T. */
typedef struct pytpp_smm_plan {
    const pytpp_smm_kernels *kt;
    int dtype;                  /* enum pytpp_dtype */
    int esz;                    /* bytes per element */
    int swap;                   /* 1: run C^T = B^T A^T (operands a/b exchanged by the driver) */
    int pack_b;                 /* 1: copy B (after swap) per product into a k x n scratch */
    int scratch_c;              /* 1: C has no unit stride; compute into scratch, then copy out */
    int64_t m, n, k;            /* after swap */
    int64_t rsa, csa, rsb, csb; /* after swap */
    int64_t rsc, csc;           /* of the caller's C, after swap */
    double alpha, beta;
    /* register blocking of C: rows in n_ib near-equal blocks, vectors in n_jb near-equal blocks */
    int64_t nvec, n_ib, n_jb, n_last;
    int tail;                   /* enum pytpp_smm_tail of the last vector of a row */
    int64_t mr, nfull, nshort;  /* row blocks: nfull of mr rows, then nshort of mr - 1 */
    int64_t per_chunk;          /* products per call of a tile kernel in a stack */
    int pf;                     /* prefetching kernels (see gemm_small.inc): 0 never; 1 PF_NEXT
                                 * ones always, PF_AHEAD ones for large stacks; 2 always */
    int64_t pfd;                /* products ahead the PF_AHEAD kernels prefetch */
    double flops;               /* 2 m n k */
    int64_t bytes;              /* of A, B and C of one product */
    double cost;                /* the cost model's estimate, cycles per product */
} pytpp_smm_plan;

/* Fill `p` for C[m x n] = alpha * A[m x k] B[k x n] + beta * C with the given element strides.
 * `tables` lists the candidate kernel tables of the active ISA (e.g. zmm and ymm flavours);
 * the plan takes the one its cost model prefers (force >= 0 picks tables[force]).
 * flags (an int of enum pytpp_smm_plan_flags): PYTPP_SMM_ALLOW_COPIES lets the plan copy
 * B per product or go through a scratch C when a layout needs it; without it the plan prefers
 * any layout that needs no copy (one that still has pack_b or scratch_c set means none exists).
 * PYTPP_SMM_REDUCTION plans for DBCSR groups, where each C block is loaded and stored once per
 * many products (the cost model then counts no stores per product). */
enum pytpp_smm_plan_flags { PYTPP_SMM_ALLOW_COPIES = 1, PYTPP_SMM_REDUCTION = 2 };
void pytpp_smm_plan_make(pytpp_smm_plan *p, const pytpp_smm_kernels *const *tables, int ntables,
                         int force, int dtype, int64_t m, int64_t n, int64_t k,
                         int64_t rsa, int64_t csa, int64_t rsb, int64_t csb,
                         int64_t rsc, int64_t csc, double alpha, double beta, int flags);

/* Scratch bytes one thread needs for this plan (0 when none). */
size_t pytpp_smm_scratch_bytes(const pytpp_smm_plan *p);

/* One product; `scratch` holds pytpp_smm_scratch_bytes(p) bytes (may be NULL when that is 0). */
void pytpp_smm_run1(const pytpp_smm_plan *p, const void *a, const void *b, void *c, void *scratch);

/* count products at element strides sa, sb, sc (0 broadcasts an operand), parallel over the
 * stack on up to nthreads threads. Returns 0, or -1 if scratch allocation failed. */
int pytpp_smm_stack(const pytpp_smm_plan *p, int64_t count, const void *a, int64_t sa,
                    const void *b, int64_t sb, void *c, int64_t sc, int nthreads);

/* DBCSR stack: c[c_index[i]] += alpha * a[a_index[i]] @ b[b_index[i]] for i < count (the plan has
 * beta == 1 and needs no scratch). Blocks of a, b, c are blk_a, blk_b, blk_c elements apart; there
 * are nc blocks of c. Products are grouped by c_index (a counting sort), each group is reduced in
 * registers and belongs to one thread: repeated c_index entries never race.
 * Indices must be in range (checked by the caller). Returns 0, or -1 if allocation failed. */
int pytpp_smm_indexed(const pytpp_smm_plan *p, const void *a, int64_t blk_a,
                      const void *b, int64_t blk_b, void *c, int64_t blk_c, int64_t nc,
                      int64_t count, const int64_t *a_index, const int64_t *b_index,
                      const int64_t *c_index, int nthreads);

/* Kernel tables, one per (ISA flavour, dtype). ISA ones only after a cpu check. */
extern const pytpp_smm_kernels pytpp_smm_f64_ref, pytpp_smm_f32_ref;
extern const pytpp_smm_kernels pytpp_smm_f64_avx2, pytpp_smm_f32_avx2;
extern const pytpp_smm_kernels pytpp_smm_f64_avx2x, pytpp_smm_f32_avx2x;
extern const pytpp_smm_kernels pytpp_smm_f64_avx512, pytpp_smm_f32_avx512;
extern const pytpp_smm_kernels pytpp_smm_f64_avx512y, pytpp_smm_f32_avx512y;

#ifdef __cplusplus
}
#endif
#endif
