/* The low-precision contraction engine: bf16 x bf16 -> fp32 (or bf16) and 8-bit x 8-bit ->
 * int32 batch-reduce GEMM, C += sum_i A_i B_i, on packed panels (frame/gemm_lowp.c).
 *
 * Operands (row-major, element strides, any sign):
 *   A_i is m x k: element (r, p) at a_i[r*rsa + p*csa];
 *   B_i is k x n: element (p, j) at b_i[(p/g)*rs_g + (p%g)*rs_e + j*cs]: g = 1 for plain rows
 *   (rs_g = row stride), 2 or 4 for a VNNI layout (ceil(k/g), n, g) as pytpp.linalg.vnni_pack
 *   writes it (rs_g = g*n, rs_e = 1, cs = g);
 *   C is m x n with row stride ldc: int32 for 8-bit operands, fp32 or bf16 for bf16.
 * A_i, B_i are found by the batch (gemm.h: stride, offset or address; offsets in elements). */
#ifndef PYTPP_GEMM_LOWP_H
#define PYTPP_GEMM_LOWP_H
#include <stdint.h>
#include "pytpp/gemm.h"
#include "pytpp/gemm_goto.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element types of the operands. */
enum pytpp_lowp_type {
    PYTPP_LP_U8 = 0, PYTPP_LP_S8 = 1, PYTPP_LP_BF16 = 2, PYTPP_LP_I32 = 3, PYTPP_LP_F32 = 4
};

/* 8-bit micro-kernel: C[0:mr, 0:ncols] (int32) = (accumulate ? C : 0) + A B (+ cb) over ks k
 * steps of G values: A rows of packed lanes (row stride lda, in packed values), B one packed
 * NR-column panel; cb NULL or ncols int32 values added to every row (the zero-point
 * compensation, fused into the store), rb NULL or mr int32 values, rb[i] added to row i (a B
 * run as B - 128: 128 x A's row sums); integer families only. The last vector of a row is
 * masked to n_last lanes in the _tail variants. */
typedef void (*pytpp_i8_ukr_fn)(int64_t ks, const void *a, int64_t lda, const void *b,
                                void *c, int64_t ldc, int accumulate, int64_t n_last,
                                const int32_t *cb, const int32_t *rb);

/* 8-bit small-m kernel on B as the caller laid it out (no packing): C[0:rows, 0:cols] (int32,
 * rows <= PYTPP_I8_GEMV_MR, cols a multiple of the table's vl) = (accumulate ? C : 0) + A B
 * over k [0, kk). A: rows of packed lanes as pack_a writes them with lda >= kk rounded up to 4
 * (in packed values, zero-padded). B: vnni = 0 plain rows, element (p, j) at b[p*rs + j];
 * vnni = 1 VNNI quads, element (p, j) at b[(p/4)*rs + 4*j + p%4] with whole quads present (k
 * padded as vnni_pack pads it). b_signed: how 8-bit B values widen. B is read once, turned
 * into the kernels' lanes in registers. */
#define PYTPP_I8_GEMV_MR 4
typedef void (*pytpp_i8_gemv_fn)(int64_t rows, int64_t kk, const void *a, int64_t lda,
                                 const uint8_t *b, int64_t rs, int vnni, int b_signed,
                                 int32_t *c, int64_t ldc, int64_t cols, int accumulate);

/* A lane kernel table (gemm_lane.inc): the micro-kernels and the packers of their operands. */
typedef struct pytpp_i8_kernels {
    const char *name;
    pytpp_table_info info;
    int vl;                     /* int32 lanes per vector */
    int nv_main, mr_main;       /* main register block: mr_main x nv_main vectors */
    pytpp_i8_ukr_fn ukr[PYTPP_PK_NV_MAX][PYTPP_PK_MR_MAX][2]; /* [nv-1][mr-1][masked] */
    /* direct kernels on the caller's A rows and VNNI quads (raw-byte lanes only; else NULL) */
    pytpp_lowp_brd_fn brd[PYTPP_PK_NV_MAX][PYTPP_PK_MR_MAX][2];
    int group;                  /* k values per 32-bit lane: 2 (int16 pairs), 4 (u8/s8 quads) or
                                 * 1 (fp32: widened bf16) */
    int k_pad;                  /* k is padded to a multiple of this */
    int packed_size;            /* bytes of one packed value: 2, 1 or 4 */
    int in_size;                /* bytes of one input element: 1 (8-bit) or 2 (bf16) */
    int ftz;                    /* run under MXCSR DAZ+FTZ (widened bf16: the vdpbf16ps rule) */
    /* A rows [0, rows) x k [0, kk) as rows of lda packed values, zero from kk to pad (kk <=
     * pad <= lda; the values past pad are left alone: the k range of another batch element);
     * sgn: A is s8, which raw-byte lanes (group 4) store as A + 128 */
    void (*pack_a)(const uint8_t *a, int64_t rsa, int64_t csa, int64_t rows, int64_t kk,
                   int64_t lda, int64_t pad, int sgn, void *dst);
    /* sgn: B is s8; an unsigned B on raw-byte lanes (group 4) is stored as B - 128 */
    void (*pack_b)(const uint8_t *b, int g, int64_t rs_g, int64_t rs_e, int64_t cs, int64_t kk,
                   int64_t cols, int sgn, void *dst);
    /* integer families (else NULL): B (plain rows, vnni 0, row stride rs; or VNNI quad rows,
     * vnni 1, quad-row stride rs), columns [0, cols) into ceil(cols / NR) panels `panel` bytes
     * apart as pack_b writes each, a step of k at a time across all the panels (each row read
     * once front to end); flip: B unsigned, stored as B - 128 (raw quads); sgn: B signed (int16
     * pairs) */
    void (*pack_b_across)(const uint8_t *b, int64_t rs, int vnni, int64_t kk, int64_t cols,
                          void *dst, int64_t panel, int flip, int sgn);
    /* integer families (else NULL): the column sums of one packed panel over ks steps,
     * out[0:cols] (+)= them */
    void (*colsum)(int64_t ks, const void *panel, int32_t *out, int64_t cols, int accumulate);
    pytpp_i8_gemv_fn gemv;      /* small m on unpacked B (NULL: the family has none) */
    /* the float32 passes of a quantized layer (quant_rows.inc, pytpp_lowp_qlinear): x's range
     * (min(x, 0), max(x, 0); returns 1 on NaN / inf) and x quantized to uint8 rows of k bytes */
    int (*x_range)(const float *x, int64_t m, int64_t k, int64_t ldx, float *lo, float *hi);
    void (*quantize_rows)(const float *x, int64_t m, int64_t k, int64_t ldx, float inv,
                          float zp, float qmax, uint8_t *q);
    /* the epilogue, in place over rows x cols of int32 C (row stride ldc): float32
     * relu?((float)(C + comp[j]) * s[j] + bias[j]) (bias may be NULL) */
    void (*dequantize_rows)(void *c, int64_t ldc, int64_t rows, int64_t cols,
                            const int32_t *comp, const float *s, const float *bias, int relu);
} pytpp_i8_kernels;

extern const pytpp_i8_kernels pytpp_mm_i8_ref, pytpp_mm_i8_avx2, pytpp_mm_i8_avx512,
    pytpp_mm_i8_avx512_vnni, pytpp_mm_i8_avx2_u7, pytpp_mm_i8_avx_vnni;
/* bf16 widened to fp32 on the lane template (AVX2): A read by rows, no A panels to form. */
extern const pytpp_i8_kernels pytpp_mm_bf16w_avx2;

/* Called once on every finished block of C (all k and batch summed, before comp is added):
 * rows [i0, i0 + rows) x columns [j0, j0 + cols), c at its first element, row stride ldc (4-byte
 * elements), while the block is in cache (L2). The blocks of a call are disjoint; threads call it
 * on their own blocks. */
typedef void (*pytpp_lowp_epilogue_fn)(const void *ctx, void *c, int64_t ldc, int64_t i0,
                                       int64_t rows, int64_t j0, int64_t cols);

typedef struct pytpp_lowp_desc {
    int64_t m, n, k;
    int64_t rsa, csa;
    int g;                      /* B's layout: 1 plain, 2 or 4 VNNI */
    int64_t rs_g, rs_e, cs;
    int64_t ldc;
    int a_type, b_type, c_type; /* enum pytpp_lowp_type */
    int accumulate;             /* beta = 1: C += ...; 0: C = ... (C not read) */
    int b_packed;               /* B_i are whole pre-packed buffers (pytpp_lowp_pack_b), found
                                 * by the batch in bytes; B layout fields unused */
    int32_t colsum_scale;       /* 8-bit, B not pre-packed: 0, or s to add s * (the column sums
                                 * of the B_i) to every row of C with comp (s = -a_zero_point: the
                                 * compensation of a per-tensor zero point, the sums taken from
                                 * the packed panels in L1 instead of a pass over B) */
    const int32_t *b_colsum;    /* a pre-packed B (batch of one) multiplied by an s8 A on quad
                                 * kernels: its n column sums from pytpp_lowp_packed_colsums, or
                                 * NULL (taken from the packed bytes in every call) */
    pytpp_lowp_epilogue_fn epilogue;    /* NULL: none */
    const void *epi_ctx;
} pytpp_lowp_desc;

/* The kernels of one call: a lane table (8-bit, or widened bf16), or a bf16 packed-panel table
 * (gemm_bf16.inc, or the fp32 widening kernels when kt->bf16_widened). */
typedef struct pytpp_lowp_kernels {
    const pytpp_i8_kernels *i8;     /* lane kernels (the name is the family's first member) */
    const pytpp_pk_kernels *bf16;
    int64_t l1;                     /* bytes of L1d the blocking plans for (0: 32 KiB); a
                                     * pre-packed B is laid out for it: pack and run with one */
} pytpp_lowp_kernels;

/* One low-precision BRGEMM (see the top of this file). comp (n int32 values, or NULL) is added
 * to every row of an int32 C at the end: the zero-point compensation of asymmetric
 * quantization. The quad kernels (vpdpbusd multiplies u8 A by s8 B) take the other types
 * flipped: an s8 A runs as A' = A + 128 and a u8 B as B' = B - 128, packed so, and
 * A B = A' B' - 128 colsum(B') [A flipped] + 128 rowsum(A) [B flipped] (modulo 2^32): the
 * column term joins comp (sums taken from the packed panels), the row term (A's row sums, from
 * a pass of their own) is added by the kernels at the same store (the small-m path: in a pass
 * at the end; no epilogue then). Returns 0, -1 if buffers
 * could not be allocated, -2 for operands the kernels cannot take (a flipped B with an
 * epilogue). */
int pytpp_lowp_brgemm(const pytpp_lowp_kernels *ks, const pytpp_lowp_desc *d, const void *a,
                      const void *b, void *c, const pytpp_batch *batch, const int32_t *comp,
                      int nthreads);

/* Constant B (weights) packed once for the kernels `ks` (their panel order and blocking):
 * the buffer's size in bytes for a k x n B, and the packing of d's B (its layout fields and b_type
 * describe it) into `dst`. A product then passes dst with d->b_packed = 1 and skips packing. */
int64_t pytpp_lowp_packed_bytes(const pytpp_lowp_kernels *ks, int64_t k, int64_t n);
void pytpp_lowp_pack_b(const pytpp_lowp_kernels *ks, const pytpp_lowp_desc *d, const void *b,
                       void *dst);
/* The column sums (int32, modulo 2^32) of a k x n B packed by pytpp_lowp_pack_b for the 8-bit
 * kernels `ks` into out[0:n], for desc.b_colsum. Returns 0, or -2 for kernels without them. */
int pytpp_lowp_packed_colsums(const pytpp_lowp_kernels *ks, int64_t k, int64_t n,
                              const void *packed, int32_t *out);

/* A quantized dense layer's forward pass on float32 x (m x k, row stride ldx), dynamic
 * per-tensor uint8 quantization of x onto [0, qmax] (qmax 255, or 127 for 7-bit kernels):
 *   scale = (max(x, 0) - min(x, 0)) / qmax (1 when x is all 0), zp = round_half_even(-min(x, 0)
 *   / scale) in [0, qmax]; q = clip(round_half_even(x * (float)(1/scale)) + zp, 0, qmax);
 *   acc = q @ W (int32, exact: B pre-packed for ks by pytpp_lowp_pack_b, k x n) - zp * colsum;
 *   y = (float)acc * (float)(scale * w_scale[j]) + bias[j] (bias may be NULL), then relu when
 *   `relu`; y has row stride ldy. The int32 sums are kept in y's own memory and turned into y
 *   block by block as the kernels finish them (the epilogue hook above).
 * Scratch: q (m*k bytes). The arithmetic is numpy's float32 one, op by op
 * (pytpp.quant.QuantizedLinear's reference). Returns 0, -1 (no memory), -2 (kernel/type),
 * -3 if x holds NaN or inf (nothing computed). *scale_out / *zp_out receive the parameters. */
int pytpp_lowp_qlinear(const pytpp_lowp_kernels *ks, const float *x, int64_t m, int64_t k,
                       int64_t ldx, int qmax, const void *packed_b, int64_t n,
                       const int64_t *colsum, const double *w_scale, const float *bias, int relu,
                       float *y, int64_t ldy, uint8_t *q, int nthreads, double *scale_out,
                       int *zp_out);
/* The same layer on an x already quantized to uint8 (static quantization: rows of k bytes, row
 * stride ldq, with its scale and zero point): the product and the epilogue above. Returns 0,
 * -1 (no memory) or -2 (kernel/type). */
int pytpp_lowp_qlinear_u8(const pytpp_lowp_kernels *ks, const uint8_t *q, int64_t m, int64_t k,
                          int64_t ldq, double scale, int zp, const void *packed_b, int64_t n,
                          const int64_t *colsum, const double *w_scale, const float *bias,
                          int relu, float *y, int64_t ldy, int nthreads);

#ifdef __cplusplus
}
#endif
#endif
