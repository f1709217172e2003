/* bf16 convolution forward (conv.h, pytpp_conv2d_forward_bf16) on the bf16 table's direct
 * kernels (bf16 words of A, VNNI pairs of B; every pair of k one 32-bit lane, C even). Two ways
 * to feed them, both in (r, s, c) k order: taps (one output row per task, A the padded image's
 * rows read in place, a batch-reduce over kernel rows) and pixel rows (blocks of output pixels
 * across rows and images, their windows copied into a buffer as conv_rows.c does for float32).
 * Sums are float32 in the thread's buffer (or in a float32 output itself); bias, activation and
 * the store (bf16 rounding, NCHW transpose) run on each block while it is in cache. No ISA code
 * here. */
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "pytpp/brd_tiles.h"
#include "pytpp/conv.h"
#include "pytpp/fpmode.h"
#include "pytpp/partition.h"

/* Bytes of the weight slice one window copy meets (k run x nr columns, read from L2); the
 * float32 rows path's figure (conv_rows.c), the same bytes holding twice the k. */
#define BF16_B_SLICE_BYTES (128 * 1024)

/* Output rows of 2 * MR to this many pixels run as taps (A read in place), others as copied
 * pixel rows. Zen 5, one core, ResNet-50's 3x3 layers and stem, NHWC, GFLOP/s rows / taps at
 * N = 8: stem 210 / 258, C64 56x56 417 / 477, C128 56x56/2 449 / 475, C128 28x28 486 / 506;
 * output rows of 14 and 7 pixels (2 and 1 register blocks of 7) lost 0-3%. Longer rows
 * (conv1d) keep the pixel blocks' bounded buffers. */
#define BF16_TAPS_MAX_Q 1024

/* 1x1 layers read in place prefetch their pixels one register block ahead when the image is
 * larger than this (an L2; such an image is rarely still in cache). Zen 5, one core, N = 8,
 * caches flushed before each call, GFLOP/s without / with: C64 56x56 -> K64 211 / 253, -> K256
 * 267 / 306, C256 -> K64 273 / 341, C512 28x28 -> K128 389 / 418; in cache it moved them -3% to
 * +3%. Their NHWC output lines are prefetched for writing likewise (flushed: C64 -> K64 232 /
 * 265, -> K256 290 / 310; the others within 2%). */
#define BF16_PREFETCH_BYTES (1 << 20)

/* A task finishes each register-block row (bias, activation, store) right after computing it,
 * while its sums are in L1, when the weight slices of all its panels fit in this much of L2
 * (all are read again for every row); else each slice is read once across all rows and the
 * block finished at the end. Zen 5, one core, N = 1, L2 flushed between calls, GFLOP/s rows
 * outer / this rule: C512 14x14/2 3x3 445 / 472, C1024 14x14 -> K2048 /2 458 / 482, C512 7x7
 * 3x3 485 / 493; layers under the bound unchanged. */
#define BF16_ROWS_OUTER_BYTES (512 * 1024)

typedef struct bf16_plan {
    const pytpp_pk_kernels *bf;
    const pytpp_ew_kernels *ew;
    const pytpp_conv_shape *s;
    int64_t nr, npan, rsc, kc, nkc, lda, ldcb;
    int in_place;       /* 1x1, unit stride: a pixel's window is its own C channels */
    int prefetch;       /* in place, the image beyond L2: prefetch A a register block ahead */
    int taps;           /* one output row per task, A read from the image rows in place */
    int64_t kgroups, pan_per_task;  /* taps: column groups of panels */
    pytpp_conv_blocks b;
    const char *x, *wpk;
    const float *bias;
    char *out;
    int act, out_bf16, out_nchw;
    int via_buf;        /* sums in the thread's buffer (bf16 or NCHW out), else in out itself */
    pytpp_ew_cvt_fn to_bf16;
} bf16_plan;

int64_t pytpp_conv_bf16_packed_elems(int64_t K, int64_t C, int64_t R, int64_t S, int64_t nr)
{
    return cdiv(K, nr) * nr * R * S * (C + (C & 1));
}

/* Torch's layout (each output channel's (c, r, s) elements one contiguous run): per panel, the
 * nr runs transposed by the level's 16-bit transpose into rows (c, tap) of nr values, then each
 * tap's channel pairs interleaved into the panel's pair rows (one Zen 5 core: a 512 x 512 x 3 x 3
 * weight 1.4 -> 0.25 ms, a 1x1 one of 1024 x 256 0.45 -> 0.03 ms); the threads split the
 * panels of weights of a million elements and more. Returns 0 where it does not apply or finds
 * no memory. */
static int pack_runs(const pytpp_ew_kernels *ew32, int64_t K, int64_t C, int64_t R, int64_t S,
                     int64_t nr, const uint16_t *w, const int64_t *st, uint16_t *wpk,
                     int nthreads)
{
    const int64_t RS = R * S, Ce = C + (C & 1), tap = Ce * nr, run = C * RS;
    if (!ew32 || !ew32->transpose16 || st[3] != 1 || (R > 1 && st[2] != S) ||
        (C > 1 && st[1] != RS) || st[0] <= 0)
        return 0;
    const int64_t npan = cdiv(K, nr);
    const int nt = (double)K * run >= 1e6 && nthreads > 1 ? (int)imin(nthreads, npan) : 1;
    uint16_t *rows_all = (uint16_t *)malloc((size_t)(nt * run * nr) * sizeof(uint16_t));
    if (!rows_all) return 0;
    _Pragma("omp parallel for num_threads(nt) if (nt > 1) schedule(static)")
    for (int64_t j = 0; j < npan; ++j) {
#ifdef _OPENMP
        uint16_t *rows = rows_all + omp_get_thread_num() * run * nr;
#else
        uint16_t *rows = rows_all;
#endif
        const int64_t nk = imin(nr, K - j * nr);
        uint16_t *pan = wpk + j * RS * tap;
        ew32->transpose16(nk, run, w + j * nr * st[0], st[0], rows, nr);
        for (int64_t t = 0; t < RS; ++t)
            for (int64_t c = 0; c < Ce; c += 2) {
                uint32_t *d = (uint32_t *)(pan + t * tap + c * nr);
                const uint16_t *r0 = rows + (c * RS + t) * nr;
                if (c + 1 < C) {
                    const uint16_t *r1 = r0 + RS * nr;
                    for (int64_t i = 0; i < nk; ++i) d[i] = r0[i] | (uint32_t)r1[i] << 16;
                } else {    /* the zero channel of an odd C */
                    for (int64_t i = 0; i < nk; ++i) d[i] = r0[i];
                }
                for (int64_t i = nk; i < nr; ++i) d[i] = 0;
            }
    }
    free(rows_all);
    return 1;
}

void pytpp_conv_bf16_pack(const pytpp_ew_kernels *ew32, int64_t K, int64_t C, int64_t R,
                          int64_t S, int64_t nr, const uint16_t *w, const int64_t *st,
                          uint16_t *wpk, int nthreads)
{
    if (pack_runs(ew32, K, C, R, S, nr, w, st, wpk, nthreads)) return;
    const int64_t Ce = C + (C & 1), cb = 16, tap = Ce * nr;
    /* per panel and block of 16 channels: each output channel's (c, r, s) elements in source
     * order (a run of taps for torch's layout and for the backward's flipped view) to their pair
     * slots, which for the block lie within R*S*cb/2 rows of the panel (in L1); the slot of tap
     * (r, s) is `tap` elements after that of the tap before */
    for (int64_t j = 0; j < cdiv(K, nr); ++j)
        for (int64_t c0 = 0; c0 < Ce; c0 += cb)
            for (int64_t i = 0; i < nr; ++i) {
                const int64_t k = j * nr + i;
                uint16_t *pan = wpk + j * R * S * tap + 2 * i;
                for (int64_t c = c0; c < imin(Ce, c0 + cb); ++c) {
                    uint16_t *d = pan + (c & ~(int64_t)1) * nr + (c & 1);
                    if (k >= K || c >= C) {
                        for (int64_t t = 0; t < R * S; ++t) d[t * tap] = 0;
                        continue;
                    }
                    const uint16_t *src = w + k * st[0] + c * st[1];
                    for (int64_t r = 0; r < R; ++r, src += st[2])
                        for (int64_t u = 0; u < S; ++u, d += tap) *d = src[u * st[3]];
                }
            }
}

/* bias, activation and the store of m finished pixels' columns [c0, c0 + nk) (pixels pix0..,
 * sums c with row stride ldc): in place in a float32 NHWC output, else from the thread's sums
 * into bf16 and/or transposed into NCHW planes (tb: the bf16 rows on the way) */
static void finish(const bf16_plan *fp, char *c, int64_t ldc, int64_t pix0, int64_t m, int64_t c0,
                   int64_t nk, char *tb)
{
    const pytpp_conv_shape *s = fp->s;
    pytpp_conv_epilogue(fp->ew, 4, m, nk, c, ldc, fp->bias ? (const char *)(fp->bias + c0) : NULL,
                        fp->act);
    if (fp->out_nchw) {
        /* the block's pixels image by image, transposed into their channel planes (from the
         * bf16 rows in tb for a bf16 out) */
        const char *src = c;
        int64_t lds = ldc, esz = 4;
        if (fp->out_bf16) {
            for (int64_t i = 0; i < m; ++i) fp->to_bf16(nk, c + i * ldc * 4, tb + i * nk * 2);
            src = tb, lds = nk, esz = 2;
        }
        const int64_t PQ = s->P * s->Q;
        for (int64_t i = 0; i < m;) {
            const int64_t pix = pix0 + i, n = pix / PQ, off = pix % PQ;
            const int64_t len = imin(m - i, PQ - off);
            pytpp_conv_transpose(fp->ew, esz, len, nk, src + i * lds * esz, lds,
                                 fp->out + ((n * s->K + c0) * PQ + off) * esz, PQ);
            i += len;
        }
        return;
    }
    if (!fp->out_bf16) return;
    char *o = fp->out + (pix0 * s->K + c0) * 2;
    if (ldc == nk && nk == s->K)    /* all channels: one run (a call per pixel cost 4%) */
        fp->to_bf16(m * nk, c, o);
    else
        for (int64_t i = 0; i < m; ++i) fp->to_bf16(nk, c + i * ldc * 4, o + i * s->K * 2);
}

/* finish() on register-block row rb of `blocks` over m rows (pytpp_brd_panel's split), while
 * its sums are in L1 */
static void finish_block(const bf16_plan *fp, char *c, int64_t ldc, int64_t pix0, int64_t m,
                         int64_t rb, int64_t blocks, int64_t c0, int64_t nk, char *tb)
{
    /* NCHW: the task's whole block at its last row (channel rows of 12 pixels, 24 bytes
     * scattered a plane apart, made the transposed store the slowest part) */
    if (fp->out_nchw) {
        if (rb == blocks - 1) finish(fp, c, ldc, pix0, m, c0, nk, tb);
        return;
    }
    const int64_t i0 = pytpp_brd_first_row(m, blocks, rb);
    finish(fp, c + i0 * ldc * 4, ldc, pix0 + i0, pytpp_brd_first_row(m, blocks, rb + 1) - i0,
           c0, nk, tb);
}

/* The panels [j0, j1) over m rows of A: nb batch entries ap (rows lda bytes apart), each of ks
 * pair steps from pair row k0 / 2 of the panels, summed into c (row stride ldc; onto it when
 * accumulating). After the last k chunk (`last`) the rows are finished: register-block row by
 * row while in L1 when the weight slices of the panels fit BF16_ROWS_OUTER_BYTES (all are read
 * again per row), else once at the end with each slice read once across all rows. bp: nb
 * pointers of scratch. */
static void sweep_panels(const bf16_plan *fp, int64_t m, const char *const *ap, int64_t nb,
                         int64_t lda, int64_t k0, int64_t ks, int64_t j0, int64_t j1,
                         const char **bp, char *c, int64_t ldc, int accumulate, int last,
                         int64_t pix0, char *tb)
{
    const pytpp_pk_kernels *bf = fp->bf;
    const int64_t K = fp->s->K, nr = fp->nr, c0 = j0 * nr, nk = imin(K, j1 * nr) - c0;
    const int64_t blocks = pytpp_brd_blocks(m, bf->mr_main);
    const int rows_outer = nb * ks * nr * 4 * (j1 - j0) <= BF16_ROWS_OUTER_BYTES;
    for (int64_t rb = 0; rb < blocks; ++rb) {
        if (fp->prefetch) {   /* the next register-block row's pixels and NHWC output */
            const int64_t i0 = pytpp_brd_first_row(m, blocks, rb);
            const int64_t i1 = pytpp_brd_first_row(m, blocks, rb + 1);
            const char *next = ap[0] + i1 * lda;
            for (int64_t o = 0; o < (i1 - i0) * lda; o += 64) __builtin_prefetch(next + o, 0, 3);
            const int64_t osz = fp->out_bf16 ? 2 : 4;
            char *onext = fp->out + ((pix0 + i1) * K + c0) * osz;
            for (int64_t o = 0; !fp->out_nchw && o < (i1 - i0) * K * osz; o += 64)
                __builtin_prefetch(onext + o, 1, 3);
        }
        for (int64_t j = j0; j < j1; ++j) {
            for (int64_t e = 0; e < nb; ++e)
                bp[e] = fp->wpk + (j * fp->rsc + k0 + e * ks * 2) * nr * 2;
            pytpp_brd_panel(&bf->brd, bf->mr_main, nr, bf->vl, m, imin(nr, K - j * nr), 0,
                            rows_outer ? rb : 0, rows_outer ? rb + 1 : blocks, ks, nb, ap, lda,
                            bp, 4, nr * 4, c + (j - j0) * nr * 4, ldc, accumulate, NULL);
        }
        if (!rows_outer) break;
        if (last) finish_block(fp, c, ldc, pix0, m, rb, blocks, c0, nk, tb);
    }
    if (!rows_outer && last) finish(fp, c, ldc, pix0, m, c0, nk, tb);
}

static void bf16_task(const bf16_plan *fp, int64_t t, char *abuf, float *cbuf, char *tb)
{
    const pytpp_conv_shape *s = fp->s;
    const int64_t K = s->K, nr = fp->nr;
    int64_t pix0, m, j0, j1;
    pytpp_conv_task_range(&fp->b, s->N * s->P * s->Q, fp->npan, t, &pix0, &m, &j0, &j1);
    /* the sums: a float32 output's own rows, else the thread's buffer */
    char *c = fp->via_buf ? (char *)cbuf : fp->out + (pix0 * K + j0 * nr) * 4;
    const int64_t ldc = fp->via_buf ? fp->ldcb : K;
    for (int64_t kk = 0; kk < fp->nkc; ++kk) {
        const int64_t k0 = kk * fp->kc, kn = imin(fp->kc, fp->rsc - k0);
        const char *a = abuf, *b;
        int64_t lda = fp->lda * 2;
        if (fp->in_place) {
            a = fp->x + (pix0 * s->C + k0) * 2;
            lda = s->C * 2;
        } else {
            pytpp_conv_copy_windows(s, fp->x, 2, pix0, m, k0, kn, fp->lda, abuf);
        }
        sweep_panels(fp, m, &a, 1, lda, k0, kn / 2, j0, j1, &b, c, ldc, kk > 0,
                     kk == fp->nkc - 1, pix0, tb);
    }
}

/* One output row (n, p) for the panels of column group kg: per panel, a batch-reduce over the
 * kernel rows (unit dilation: a row's S taps are one k run of S*C in the image and in the
 * panel) or over every tap, A the image rows themselves at the stride's pixel step. */
static void taps_task(const bf16_plan *fp, int64_t t, const char **ap, const char **bp,
                      float *cbuf, char *tb)
{
    const pytpp_conv_shape *s = fp->s;
    const int64_t K = s->K, C = s->C, Q = s->Q;
    const int64_t kg = t % fp->kgroups, row = t / fp->kgroups, n = row / s->P, p = row % s->P;
    const int64_t j0 = kg * fp->pan_per_task, j1 = imin(fp->npan, j0 + fp->pan_per_task);
    const int64_t pix0 = row * Q;
    char *c = fp->via_buf ? (char *)cbuf : fp->out + (pix0 * K + j0 * fp->nr) * 4;
    const int64_t ldc = fp->via_buf ? fp->ldcb : K;
    const int fold = s->dw == 1;
    const int64_t nb = fold ? s->R : s->R * s->S, ks = fold ? s->S * C / 2 : C / 2;
    const char *img = fp->x + ((n * s->H + p * s->sh) * s->W) * C * 2;
    for (int64_t e = 0; e < nb; ++e) {
        const int64_t r = fold ? e : e / s->S, u = fold ? 0 : e % s->S;
        ap[e] = img + (r * s->dh * s->W + u * s->dw) * C * 2;
    }
    sweep_panels(fp, Q, ap, nb, s->sw * C * 2, 0, ks, j0, j1, bp, c, ldc, 0, 1, pix0, tb);
}

int pytpp_conv2d_forward_bf16(const pytpp_pk_kernels *bf, const pytpp_ew_kernels *ew32,
                              const pytpp_conv_shape *s, const void *x, const void *wpk,
                              const float *bias, int act, void *out, int out_bf16,
                              int out_nchw, int nthreads)
{
    const int64_t M = s->N * s->P * s->Q;
    if (M <= 0 || s->K <= 0) return 0;
    bf16_plan fp = {.bf = bf, .ew = ew32, .s = s, .x = x, .wpk = wpk, .bias = bias,
                    .out = out, .act = act, .out_bf16 = out_bf16, .out_nchw = out_nchw,
                    .via_buf = out_bf16 || out_nchw};
    fp.to_bf16 = bf->to_bf16 ? bf->to_bf16 : ew32->store_cvt[PYTPP_EW_BF16];
    fp.nr = (int64_t)bf->vl * bf->nv_main;
    fp.npan = cdiv(s->K, fp.nr);
    fp.rsc = s->R * s->S * s->C;
    fp.in_place = s->R == 1 && s->S == 1 && s->sh == 1 && s->sw == 1 && s->H == s->P &&
                  s->W == s->Q;
    fp.prefetch = fp.in_place && (double)M * s->C * 2 > BF16_PREFETCH_BYTES;
    /* k chunks of whole pairs */
    fp.nkc = cdiv(fp.rsc, imax(2, BF16_B_SLICE_BYTES / (fp.nr * 2)));
    fp.kc = cdiv(cdiv(fp.rsc, fp.nkc), 2) * 2;
    fp.nkc = cdiv(fp.rsc, fp.kc);
    fp.lda = cdiv(fp.kc, 32) * 32;
    int nt = nthreads < 1 ? 1 : nthreads;
    fp.taps = !fp.in_place && s->Q >= 2 * bf->mr_main && s->Q <= BF16_TAPS_MAX_Q;
    int64_t tasks, rows;
    if (fp.taps) {
        /* whole rows per task; as few column groups as give each thread a task */
        fp.kgroups = s->N * s->P >= nt ? 1 : imin(fp.npan, cdiv(nt, s->N * s->P));
        fp.pan_per_task = cdiv(fp.npan, fp.kgroups);
        fp.kgroups = cdiv(fp.npan, fp.pan_per_task);
        fp.ldcb = imin(s->K, fp.pan_per_task * fp.nr);
        tasks = s->N * s->P * fp.kgroups;
        rows = s->Q;
    } else {
        pytpp_conv_pixel_blocks(M, bf->mr_main, fp.npan, nt, &fp.b);
        fp.ldcb = imin(s->K, fp.b.kb_per_task * fp.nr);
        tasks = fp.b.nblk * fp.b.kgroups;
        rows = fp.b.mc;
    }
    if (nt > tasks) nt = (int)tasks;
    if ((double)M * s->K * fp.rsc < 65536.0) nt = 1;
    const int64_t nptr = s->R * s->S;
    int err = 0;
#pragma omp parallel num_threads(nt) if (nt > 1) reduction(| : err)
    {
        int64_t t0, len;
        pytpp_thread_part(tasks, &t0, &len);
        /* the epilogue too under DAZ + FTZ, as the sums: no denormal reaches the bf16 store,
         * where the native conversion would flush it and the emulated one round it */
        const unsigned csr = pytpp_ftz_enter();
        const int copies = !fp.in_place && !fp.taps;
        char *abuf = copies ? malloc((size_t)(fp.b.mc * fp.lda * 2) + 64) : NULL;
        float *cbuf = fp.via_buf ? malloc((size_t)(rows * fp.ldcb * 4) + 64) : NULL;
        char *tb = out_bf16 && out_nchw ? malloc((size_t)(rows * fp.ldcb * 2) + 64) : NULL;
        const char **ptrs = fp.taps ? malloc(2 * (size_t)nptr * sizeof(char *)) : NULL;
        if ((copies && !abuf) || (fp.via_buf && !cbuf) || (out_bf16 && out_nchw && !tb) ||
            (fp.taps && !ptrs))
            err |= 1;
        else if (fp.taps)
            for (int64_t t = t0; t < t0 + len; ++t)
                taps_task(&fp, t, ptrs, ptrs + nptr, cbuf, tb);
        else
            for (int64_t t = t0; t < t0 + len; ++t) bf16_task(&fp, t, abuf, cbuf, tb);
        free(abuf);
        free(cbuf);
        free(tb);
        free(ptrs);
        pytpp_ftz_leave(csr);
    }
    return err ? -1 : 0;
}
