/* Goto/BLIS-style packed GEMM behind pytpp.matmul: five loops around the engine's micro-kernels,
 * A and B packed into cache-sized panels, a no-packing path for small problems, pre-packed B
 * (PackedMatrix), stacks of matrices, and bfloat16 (bf16 x bf16 -> fp32 accumulation).
 *
 * Layout (row-major, numpy C order), strides in elements, any sign:
 *   A is m x k with strides (rsa, csa); B is k x n with strides (rsb, csb);
 *   C is m x n with row stride ldc and unit column stride (fp32 for bf16 inputs).
 *
 * Packed formats (also the PackedMatrix layout):
 *   A block (mc x kc): panels of MR rows; f32/f64 element (i, p) of a panel at p*MR + i;
 *                      bf16 pairs along k: element (i, p) at (p/2)*2*MR + 2*i + p%2.
 *   B block (kc x nc): panels of NR columns (zero-padded); f32/f64 element (p, j) at p*NR + j;
 *                      bf16 VNNI pairs: (p/2)*2*NR + 2*j + p%2, k padded to even with zeros.
 *   Whole packed B (PackedMatrix): kc-block t starts at t*kc*npad (npad = n rounded up to NR),
 *   its panel q at + q*NR*kcp (kcp = block depth rounded up to even for bf16).
 *   Widened bf16 kernels: panels as for f32 with each k pair swapped (row p' = 2q holds k row
 *   2q+1, p' = 2q+1 holds 2q); blocks packed per call are fp32, a PackedMatrix keeps the same
 *   layout in bf16 (half the memory) and is widened one block at a time. */
#ifndef PYTPP_GEMM_GOTO_H
#define PYTPP_GEMM_GOTO_H

#include <stdint.h>
#include <stddef.h>
#include "pytpp/gemm.h"
#include "pytpp/eltwise.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PYTPP_MM_BF16 2      /* dtype code next to PYTPP_F64 / PYTPP_F32 */
#define PYTPP_PK_NV_MAX 4
#define PYTPP_PK_MR_MAX 14

/* Packed-panel micro-kernel: C[0:mr, 0:ncols] = (accumulate ? C : 0) + A_panel B_panel.
 * f32/f64 (gemm_packed.inc): kd = k steps, A (i, p) at a[p*MR_MAIN + i], B row p at
 * b + p*NR_MAIN. bf16 (gemm_bf16.inc): kd = k pairs, A pairs at a + q*2*MR_MAIN + 2*i, B pair-rows
 * at b + q*2*NR_MAIN, C fp32; each lane is one sequential chain acc += a[odd]*b[odd];
 * acc += a[even]*b[even] per pair, rounded to nearest even, denormals in and out flushed (what
 * vdpbf16ps does). The last vector of a row is masked to n_last lanes in the _tail variants. */
typedef void (*pytpp_pk_ukr_fn)(int64_t kd, const void *a, const void *b, void *c, int64_t ldc,
                                int accumulate, int64_t n_last);

/* Direct batch-reduce micro-kernel of the low-precision engine: the operands as the caller laid
 * them out, for families whose 32-bit lane is one input word (bf16 pairs; u8 x s8 quads):
 * C[0:mr, 0:ncols] (4-byte elements) = (accumulate ? C : 0) + sum_e A_e B_e over ks k steps of
 * one word each, e < nb. A_e row i at ap[e] + a_off + i*lda, its words in k order; B_e word row s
 * (VNNI: one word per column) at bp[e] + b_off + s*ldb; offsets and strides in bytes. Per output
 * the same chain, in the same order, as the packed kernels of the family: the same bits. The last
 * vector of a row is masked to n_last lanes (loads of B included) in the _tail variants. cb: as
 * for the 8-bit packed kernels (gemm_lowp.h; NULL for bf16). */
typedef void (*pytpp_lowp_brd_fn)(int64_t ks, int64_t nb, const char *const *ap, int64_t a_off,
                                  int64_t lda, const char *const *bp, int64_t b_off, int64_t ldb,
                                  void *c, int64_t ldc, int accumulate, int64_t n_last,
                                  const int32_t *cb);

typedef struct pytpp_pk_kernels {
    const char *name;              /* e.g. "avx512", "avx512_bf16" (native bf16) */
    pytpp_table_info info;
    int vl;                        /* C (fp32/fp64) lanes per vector */
    int nv_main, mr_main;          /* main register block: mr_main x nv_main vectors */
    pytpp_pk_ukr_fn ukr[PYTPP_PK_NV_MAX][PYTPP_PK_MR_MAX][2]; /* [nv-1][mr-1][masked] */
    int c_first;                   /* accumulating calls start their FMA chains from C */
    int ftz;                       /* run under MXCSR DAZ+FTZ (the driver sets it per thread) */
    int bf16_widened;              /* bf16 operands packed as fp32 in vdpbf16ps order (below) */
    int kc_l1_x8, nc_l2_x8;        /* cache blocks: A micro-panel (MR x kc) and B block (kc x nc)
                                    * in eighths of L1 / L2 (0: the Zen 4 defaults, 12 and 16) */
    int nopack_l2_x8;              /* no packing while A + B take at most this many eighths of L2
                                    * (0: the Zen 4 default, all of L2) */
    int nc_max_kib;                /* the B block at most this many KiB (0: no cap) */
    /* Widened bf16 (else NULL; the native table has dot_bt alone, rows_raw), for B^T = w in torch's
     * layout (n rows of k, row stride ldb). pack_bt: dst[p * ldd + j] = B[p ^ 1][j] widened, p <
     * kcb rounded up to even (zero past an odd kcb), j < ncb: a panel of this table's layout for
     * ldd = NR. dot_bt: products of rows, C (m x n, row stride ldc) (+)= X B for X (m x k) widened
     * as the A panels are (fp32 rows of ldx, pairs odd first, k padded to even), the packed
     * kernels' bits under DAZ+FTZ; flags PYTPP_DOT_ACCUMULATE. dot_bn: the same for B (k x n) with
     * unit column stride in groups of 16 columns (row i of the group of column j at b + i * ldrow +
     * (j / 16) * ldgroup), its rows in k order (W as given) or, `swapped`, in the widened order
     * with k padded to even (a PackedMatrix block: ldrow 16, ldgroup 16 x its depth). rows_raw:
     * this table's dot_bt takes X as it lies instead (bf16 rows of ldx, nothing read past k; the
     * native AVX512_BF16 table, bf16_rows_avx512.h). */
    void (*pack_bt)(const void *bt, int64_t ldb, int64_t kcb, int64_t ncb, void *dst,
                    int64_t ldd);
    void (*dot_bt)(int64_t m, int64_t n, int64_t k, const void *x, int64_t ldx, const void *bt,
                   int64_t ldb, float *c, int64_t ldc, int flags);
    void (*dot_bn)(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx, const void *b,
                   int64_t ldrow, int64_t ldgroup, int swapped, float *c, int64_t ldc, int flags);
    int rows_raw;
    pytpp_lowp_brd_fn brd[PYTPP_PK_NV_MAX][PYTPP_PK_MR_MAX][2]; /* bf16: direct kernels */
    /* bf16 tables with a native conversion (else NULL: the element-wise table's store_cvt):
     * n float32 values to bf16, RNE, a denormal input flushed to a signed zero (values made
     * under DAZ + FTZ never are one, and then both conversions give the same bits) */
    void (*to_bf16)(int64_t n, const void *x, void *y);
} pytpp_pk_kernels;

/* Widened bf16 (AVX2): fp32 kernels on bf16 operands widened (exactly) while packing, k padded to
 * even and each k pair stored odd element first. A C-first FMA chain over that order under
 * DAZ+FTZ is, per output, the sequence vdpbf16ps performs: the same bits as the native and the
 * emulated kernels, at the fp32 kernels' speed. */

extern const pytpp_pk_kernels pytpp_mm_f32_ref, pytpp_mm_f32_avx2, pytpp_mm_f32_avx512;
extern const pytpp_pk_kernels pytpp_mm_f64_ref, pytpp_mm_f64_avx2, pytpp_mm_f64_avx512;
extern const pytpp_pk_kernels pytpp_mm_bf16_ref, pytpp_mm_bf16_avx2, pytpp_mm_bf16_avx512,
    pytpp_mm_bf16_avx512_bf16;
extern const pytpp_pk_kernels pytpp_mm_f32_bf16w_avx2;

typedef struct pytpp_mm_desc {
    int64_t m, n, k;
    int64_t rsa, csa, rsb, csb, ldc;
    int dtype;                     /* PYTPP_F64, PYTPP_F32 or PYTPP_MM_BF16 */
} pytpp_mm_desc;

/* Register and cache blocking of one (kernel table, dtype). */
typedef struct pytpp_mm_blocking {
    int64_t mr, nr, vl;            /* register block */
    int64_t kc, mc, nc;            /* cache blocks: kc x mc A block (L1 panel), kc x nc B (L2) */
    int64_t nopack_bytes;          /* A + B at most this big: no packing (f32/f64) */
    int bf16_widened;              /* bf16 on widening kernels (PackedMatrix layout differs) */
    int dot_flags;                 /* the products of rows' stream choices (PYTPP_DOT_*) for this
                                    * machine's L2 (tuning.h PYTPP_MM_DOT_BIG_L2) */
} pytpp_mm_blocking;

/* Kernels for one call: packed-panel kernels (every dtype) and, for f32/f64, the engine's
 * strided BRGEMM kernels for the small no-packing path (NULL for bf16). */
typedef struct pytpp_mm_kernels {
    const pytpp_pk_kernels *kp;
    const pytpp_gemm_kernels *kt;
    /* the level's element-wise table of the compute dtype, float32's for bf16 (NULL: none):
     * its transpose kernel packs a transposed B (x @ w.T; bf16 pairs as 32-bit words) */
    const struct pytpp_ew_kernels *ew;
    /* bf16: the tables whose products of rows run a few rows of x against w (rows_bt->dot_bt)
     * and W as given (rows_bn->dot_bn), NULL: none (pytpp_bf16_rows_select) */
    const pytpp_pk_kernels *rows_bt, *rows_bn;
} pytpp_mm_kernels;

void pytpp_mm_blocking_init(const pytpp_mm_kernels *ks, const pytpp_cache_info *ci, int dtype,
                            pytpp_mm_blocking *bk);

/* C = A B. Returns 0, or -1 if a packing buffer could not be allocated. */
int pytpp_matmul(const pytpp_mm_kernels *ks, const pytpp_cache_info *ci, const pytpp_mm_desc *d,
                 const void *a, const void *b, void *c, int nthreads);

/* The same with explicit blocking and an optional workspace of ws_bytes (at least what
 * pytpp_matmul_workspace says, else it is ignored and buffers are allocated per call): packing
 * buffers reused across calls skip the page faults fresh memory costs. */
int pytpp_matmul_blocked(const pytpp_mm_kernels *ks, const pytpp_mm_blocking *bk,
                         const pytpp_mm_desc *d, const void *a, const void *b, void *c,
                         int nthreads, void *ws, size_t ws_bytes);
size_t pytpp_matmul_workspace(const pytpp_mm_kernels *ks, const pytpp_mm_blocking *bk,
                              const pytpp_mm_desc *d, int prepacked, int nthreads);

/* `count` products: A_l = a + off_a[l], B_l = b + off_b[l], C_l = c + off_c[l] (elements).
 * Small products run in parallel over the stack, large ones one after another on all threads. */
int pytpp_matmul_batch(const pytpp_mm_kernels *ks, const pytpp_cache_info *ci,
                       const pytpp_mm_desc *d, const void *a, const void *b, void *c,
                       int64_t count, const int64_t *off_a, const int64_t *off_b,
                       const int64_t *off_c, int nthreads);

/* Pre-packed B: size in elements of the packed layout, packing (ew: an element-wise table
 * whose transpose kernel packs a transposed B, of 32-bit words for f32 and bf16, 64-bit for
 * f64; NULL: the portable packer), and C = A Bpacked. */
int64_t pytpp_mm_packed_size(const pytpp_mm_blocking *bk, int dtype, int64_t k, int64_t n);
void pytpp_mm_pack_b_full(const pytpp_mm_blocking *bk, const struct pytpp_ew_kernels *ew,
                          int dtype, int64_t k, int64_t n, const void *b, int64_t rsb,
                          int64_t csb, void *packed, int nthreads);
int pytpp_matmul_prepacked(const pytpp_mm_kernels *ks, const pytpp_mm_blocking *bk,
                           const pytpp_mm_desc *d, const void *a, const void *packed_b, void *c,
                           int64_t count, const int64_t *off_a, const int64_t *off_c,
                           int nthreads, void *ws, size_t ws_bytes);

/* A fused epilogue: each row segment of C, as soon as it holds its final sums (while it is in
 * the caches), becomes act(c + bias[col]) + res[row, col], by the element-wise row kernels of
 * C's dtype. Rows and columns are C's; res is C-typed with row stride ldr. */
typedef struct pytpp_mm_epilogue {
    const void *bias;              /* n elements, or NULL */
    const void *res;               /* residual rows, or NULL */
    int64_t ldr;
    pytpp_ew_binary_fn add;        /* the ADD row kernel (bias and residual) */
    pytpp_ew_unary_fn act;         /* in place, or NULL */
} pytpp_mm_epilogue;

/* pytpp_matmul_blocked with an epilogue (NULL: none). */
int pytpp_matmul_fused(const pytpp_mm_kernels *ks, const pytpp_mm_blocking *bk,
                       const pytpp_mm_desc *d, const void *a, const void *b, void *c,
                       int nthreads, void *ws, size_t ws_bytes, const pytpp_mm_epilogue *ep);
/* One product with a pre-packed B and an epilogue. */
int pytpp_matmul_prepacked_fused(const pytpp_mm_kernels *ks, const pytpp_mm_blocking *bk,
                                 const pytpp_mm_desc *d, const void *a, const void *packed_b,
                                 void *c, int nthreads, void *ws, size_t ws_bytes,
                                 const pytpp_mm_epilogue *ep);

/* float32 -> bfloat16, round to nearest even, NaN stays NaN (quiet). Any strides (elements). */
void pytpp_cvt_f32_bf16(const float *src, uint16_t *dst, int64_t rows, int64_t cols,
                        int64_t src_rs, int64_t dst_rs, int64_t dst_cs);

#ifdef __cplusplus
}
#endif
#endif
