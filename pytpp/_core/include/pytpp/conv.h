/* 2D convolutions as BRGEMM calls on the level's micro-kernels (paper 000 5.1.4, 001 III-B).
 *
 * Activations are NHWC inside the engine: one output row block (pixels x output channels) is a
 * sum over (channel block, r, s) of input pixel rows times weight panels, one address-mode BRGEMM
 * whose A blocks are the (r, s)-shifted pixel rows of one padded input image and whose B blocks
 * are the packed weight panels. The input is padded once per call (the driver never tests a
 * border); NCHW is converted to padded NHWC on the way in (pytpp_conv_nchw_to_nhwc_pad) and the
 * output block is transposed back while in cache. Bias and activation are applied to the output
 * block before it leaves the thread's tile.
 *
 * Weights are packed once into [groups][K blocks of bk][column panels of nr][R][S][C/groups][nr]
 * (zero-filled past K/groups), nr the width of the level's register block (16 fp32 on AVX2): a
 * register block's weights for one (r, s, channel block) are contiguous rows of nr, so they fill
 * every L1 set (rows of a 64-wide block at 256-byte stride used a quarter of them and thrashed).
 * Depthwise weights (one input and one output channel per group) pack as [R][S][C]. */
#ifndef PYTPP_CONV_H
#define PYTPP_CONV_H
#include <stdint.h>
#include "pytpp/gemm.h"
#include "pytpp/eltwise.h"
#include "pytpp/gemm_goto.h"

#ifdef __cplusplus
extern "C" {
#endif

enum pytpp_conv_act { PYTPP_CONV_ACT_NONE = 0, PYTPP_CONV_ACT_RELU = 1, PYTPP_CONV_ACT_GELU = 2 };

/* Geometry of one convolution as the engine sees it: H and W are the PADDED input sizes, P and Q
 * the output sizes (the caller computed them), C and K the total channels. */
typedef struct pytpp_conv_shape {
    int64_t N, C, H, W, K, R, S, P, Q;
    int64_t sh, sw, dh, dw, groups;
} pytpp_conv_shape;

/* One input and one output channel per group: weights pack as [R][S][C]. */
static inline int pytpp_conv_is_depthwise(int64_t K, int64_t cg, int64_t groups)
{
    return cg == 1 && K == groups && groups > 1;
}

/* The packed layout's column panel width nr (one register block: nv_main vectors of the level)
 * and output channels per block bk (a multiple of nr) for K/groups output channels per group. */
void pytpp_conv_blocking(const pytpp_gemm_kernels *gk, int64_t kg, int64_t *nr, int64_t *bk);
/* Elements of the packed weight of (K, C/groups, R, S) with `groups`. */
int64_t pytpp_conv_packed_elems(int64_t K, int64_t cg, int64_t R, int64_t S, int64_t groups,
                                int64_t nr, int64_t bk);
/* w -> the packed layout above (conv_pack.c); esz 4 or 8. Weight (g, k, c, r, s) (k < K/groups,
 * c < cg) is read at w + g*st[0] + k*st[1] + c*st[2] + r*st[3] + s*st[4] elements (any signs: the
 * backward by data packs a flipped, channel-swapped view of the forward weight without a copy).
 * ew: the level's element-wise table of w's dtype, whose transpose kernel moves the common
 * views (NULL: scalar loads only). */
void pytpp_conv_pack_weight(const pytpp_ew_kernels *ew, int64_t K, int64_t cg, int64_t R,
                            int64_t S, int64_t groups, int64_t nr, int64_t bk, int64_t esz,
                            const void *w, const int64_t st[5], void *wpk, int nthreads);

/* out = act(conv(x, w) + bias). x: padded NHWC, C-contiguous (N, H, W, C); wpk: packed weight;
 * bias: K elements or NULL; out: (N, P, Q, K) or, with out_nchw, (N, K, P, Q), C-contiguous.
 * Returns 0, or -1 when a thread's tile cannot be allocated. */
int pytpp_conv2d_forward(const pytpp_gemm_kernels *gk, const pytpp_ew_kernels *ew,
                         const pytpp_conv_shape *s, const void *x, const void *wpk, int64_t nr,
                         int64_t bk, const void *bias, int act, void *out, int out_nchw,
                         int nthreads);

/* The same for one group and an NHWC out, as one GEMM over packed pixel rows (conv_rows.c). */
int pytpp_conv2d_forward_rows(const pytpp_gemm_kernels *gk, const pytpp_ew_kernels *ew,
                              const pytpp_conv_shape *s, const void *x, const void *wpk,
                              int64_t nr, int64_t bk, const void *bias, int act, void *out,
                              int nthreads);
/* The pixel rows' shared parts (conv_rows.c). A forward pass on packed pixel rows splits the
 * N*P*Q output pixels into nblk near-equal blocks of whole mr-pixel runs (at most mc pixels) and,
 * when there are fewer blocks than threads, its nkb column blocks into kgroups groups of
 * kb_per_task: task t is pixel block t / kgroups, column group t % kgroups. */
typedef struct pytpp_conv_blocks {
    int64_t mr, units, nblk, mc, kgroups, kb_per_task;
} pytpp_conv_blocks;
void pytpp_conv_pixel_blocks(int64_t M, int64_t mr, int64_t nkb, int nt, pytpp_conv_blocks *b);
/* task t: its pixel block (first pixel, pixel count) and its column blocks [kb0, kb1) of nkb */
void pytpp_conv_task_range(const pytpp_conv_blocks *b, int64_t M, int64_t nkb, int64_t t,
                           int64_t *pix0, int64_t *m, int64_t *kb0, int64_t *kb1);
/* buf row i (lda elements apart) = the elements [k0, k0 + kn) of output pixel pix0 + i's window
 * in (r, s, c) order, from padded NHWC x of esz-byte elements */
void pytpp_conv_copy_windows(const pytpp_conv_shape *s, const char *x, int64_t esz,
                             int64_t pix0, int64_t m, int64_t k0, int64_t kn, int64_t lda,
                             char *buf);

/* bf16 forward on packed pixel rows (conv_bf16.c): out = act(conv(x, w) + bias), one group.
 * x: padded NHWC bf16 with C even (an odd C is padded with a zero channel); wpk: the weight as
 * ceil(K / nr) panels of nr = bf->vl * bf->nv_main columns, each (R, S, C/2, nr, 2) (VNNI pairs
 * of channels, zero past K; pytpp_conv_bf16_pack); bias: K float32 or NULL; out: (N, P, Q, K)
 * or with out_nchw (N, K, P, Q) (each block transposed as it is finished), float32 or, with
 * out_bf16, bf16 rounded to nearest even. Every output is one vdpbf16ps chain
 * over its window in (r, s, c) order (the bits of pytpp.matmul on the im2col matrix) on every
 * level whose bf16 table has direct kernels (bf->brd). Returns 0, or -1 without memory. */
int pytpp_conv2d_forward_bf16(const pytpp_pk_kernels *bf, const pytpp_ew_kernels *ew32,
                              const pytpp_conv_shape *s, const void *x, const void *wpk,
                              const float *bias, int act, void *out, int out_bf16,
                              int out_nchw, int nthreads);
/* The same bits where the level's bf16 table widens (AVX2: no direct kernels on bf16 pairs):
 * the float32 engine on x (padded NHWC) and a weight packed by pytpp_conv_pack_weight, both
 * widened from bf16 with C padded to even and each channel pair stored odd first, each output
 * one float32 FMA chain over its k in the pairs' order from zero, under DAZ + FTZ (vdpbf16ps's
 * sequence), bias (float32) and activation likewise. out as pytpp_conv2d_forward_bf16's.
 * Returns 0, or -1 without memory. */
int pytpp_conv2d_forward_widened(const pytpp_gemm_kernels *gk32, const pytpp_ew_kernels *ew32,
                                 const pytpp_conv_shape *s, const float *x, const float *wpk,
                                 int64_t nr, int64_t bk, const float *bias, int act, void *out,
                                 int out_bf16, int out_nchw, int nthreads);
/* w (K, C, R, S) bf16 with element strides st (C may be odd: the pack's C is even) -> wpk of
 * pytpp_conv_bf16_packed_elems(K, C, R, S, nr) bf16 words; ew32: the level's float32 table (its
 * 16-bit transpose moves torch's layout; NULL: element by element); up to nthreads threads. */
int64_t pytpp_conv_bf16_packed_elems(int64_t K, int64_t C, int64_t R, int64_t S, int64_t nr);
void pytpp_conv_bf16_pack(const pytpp_ew_kernels *ew32, int64_t K, int64_t C, int64_t R,
                          int64_t S, int64_t nr, const uint16_t *w, const int64_t *st,
                          uint16_t *wpk, int nthreads);

/* c (m x ncol, ldc) = sum over the nb blocks of A_i (m x k, strides rsa, csa) B_i (k x ncol)
 * (+ beta * c), in register blocks; ap, bp name the blocks' first elements. B's columns come in
 * chunks of one register block's width (nv_main vectors), chunk j at bp[i] + j * bstep with row
 * stride ldb: bstep = that width for a plain matrix, one packed panel for the conv weights. */
void pytpp_conv_sweep(const pytpp_gemm_kernels *gk, int64_t esz, int64_t m, int64_t ncol,
                      int64_t k, int64_t nb, const void *const *ap, int64_t rsa, int64_t csa,
                      const void *const *bp, int64_t ldb, int64_t bstep, char *c, int64_t ldc,
                      double beta);

/* rows[i][0:n] = act(rows[i][0:n] + bias[0:n]) for the m rows at a stride of ld elements (esz
 * bytes each); bias may be NULL, act an enum pytpp_conv_act. */
void pytpp_conv_epilogue(const pytpp_ew_kernels *ew, int64_t esz, int64_t m, int64_t n,
                         char *rows, int64_t ld, const char *bias, int act);
/* y (n x m, row stride ldy) = x (m x n, row stride ldx)^T, elements of esz bytes: 8 or 4 on
 * ew's own transpose, 2 (bf16) on the 16-bit network of a float32 table (a loop where the level
 * has none). */
void pytpp_conv_transpose(const pytpp_ew_kernels *ew, int64_t esz, int64_t m, int64_t n,
                          const void *x, int64_t ldx, void *y, int64_t ldy);

/* gw (K, C/groups, R, S) = the weight gradient: sum over n, p, q of
 * x[n, p*sh + r*dh, q*sw + s*dw, c] * go[n, p, q, k]; x padded NHWC, go (N, P, go_w, K) with
 * go_w = Q, or (stride 1 only) go_w = W with zero columns past Q: then each image is one
 * reduction over its pixels. */
int pytpp_conv2d_backward_weight(const pytpp_gemm_kernels *gk, int64_t esz,
                                 const pytpp_conv_shape *s, const void *x, const void *go,
                                 int64_t go_w, void *gw, int nthreads);

/* Layout transforms (threads over images and rows, the level's transpose kernel per row; esz:
 * bytes per element, 2 for bf16 on the float32 table ew). The padded forms have Cd >= C
 * channels, those past C zero (whole bf16 channel pairs):
 * x (N, C, H, W) -> y (N, H + pt + pb, W + pl + pr, Cd), the border zero. */
void pytpp_conv_nchw_to_nhwc_pad(const pytpp_ew_kernels *ew, int64_t esz, int64_t N, int64_t C,
                                 int64_t Cd, int64_t H, int64_t W, int64_t pt, int64_t pb,
                                 int64_t pl, int64_t pr, const void *x, void *y, int nthreads);
/* x (N, H, W, C) with element strides (sn, sh, sw, 1) -> y (N, H + pt + pb, W + pl + pr, Cd),
 * the border zero. */
void pytpp_conv_nhwc_pad(int64_t esz, int64_t N, int64_t C, int64_t Cd, int64_t H, int64_t W,
                         int64_t sn, int64_t sh, int64_t sw, int64_t pt, int64_t pb, int64_t pl,
                         int64_t pr, const void *x, void *y, int nthreads);
/* bf16 pairs (n 32-bit words, each two bf16 values, the first in the low half) -> 2n float32
 * values with each pair swapped (the widened bf16 engine's operand: its float32 chains then
 * take each pair's second element first, as vdpbf16ps). */
void pytpp_conv_bf16_pairs_swapped(const uint32_t *x, float *y, int64_t n, int nthreads);
/* The backward by data as GEMMs into columns: x (N, H, W, C), C-contiguous, += cols (N, P, Q,
 * R, S, C), C-contiguous, the columns of output rows [p0, p0 + P): tap (r, s) of output pixel
 * (p, q) into input pixel (p * sh + r * dh - pt, q * sw + s * dw - pl) (taps outside the input
 * dropped). Threads own input rows: every element takes its taps in the same order (r, then q,
 * then s) whatever the thread count. */
void pytpp_conv_col2im_nhwc(int64_t esz, int64_t N, int64_t H, int64_t W, int64_t C, int64_t p0,
                            int64_t P, int64_t Q, int64_t R, int64_t S, int64_t sh, int64_t sw,
                            int64_t dh, int64_t dw, int64_t pt, int64_t pl, const void *cols,
                            void *x, int nthreads);
/* x (N, H, W, C) -> y (N, C, H, W), both C-contiguous. */
void pytpp_conv_nhwc_to_nchw(const pytpp_ew_kernels *ew, int64_t esz, int64_t N, int64_t C,
                             int64_t H, int64_t W, const void *x, void *y, int nthreads);

#ifdef __cplusplus
}
#endif
#endif
