/* bf16 convolution forward on packed pixel rows (conv.h, pytpp_conv2d_forward_bf16): the
 * float32 rows path (conv_rows.c) with the bf16 table's direct kernels. A pixel block's windows
 * are copied as bf16 rows (k = (r, s, c), C even, so every pair of k is one 32-bit lane of A),
 * each column panel of the VNNI-packed weight sweeps them in register blocks, the sums are fp32
 * in the thread's buffer (or in a float32 output itself), and bias, activation and the rounding
 * to bf16 run on each block while it is in cache. No ISA code here. */
#include <stdlib.h>
#include <string.h>
#include "pytpp/brd_tiles.h"
#include "pytpp/conv.h"
#include "pytpp/partition.h"

/* Bytes of the weight slice one window copy meets (k run x nr columns, read from L2); the
 * float32 rows path's figure (conv_rows.c), the same bytes holding twice the k. */
#define BF16_B_SLICE_BYTES (128 * 1024)

typedef struct bf16_plan {
    const pytpp_pk_kernels *bf;
    const pytpp_ew_kernels *ew;
    const pytpp_conv_shape *s;
    int64_t nr, npan, rsc, kc, nkc, lda, ldcb;
    int in_place;       /* 1x1, unit stride: a pixel's window is its own C channels */
    pytpp_conv_blocks b;
    const char *x, *wpk;
    const float *bias;
    char *out;
    int act, out_bf16;
} bf16_plan;

int64_t pytpp_conv_bf16_packed_elems(int64_t K, int64_t C, int64_t R, int64_t S, int64_t nr)
{
    return cdiv(K, nr) * nr * R * S * (C + (C & 1));
}

void pytpp_conv_bf16_pack(int64_t K, int64_t C, int64_t R, int64_t S, int64_t nr,
                          const uint16_t *w, const int64_t *st, uint16_t *wpk)
{
    const int64_t Ce = C + (C & 1), npan = cdiv(K, nr);
    for (int64_t j = 0; j < npan; ++j)
        for (int64_t r = 0; r < R; ++r)
            for (int64_t u = 0; u < S; ++u)
                for (int64_t c = 0; c < Ce; ++c) {
                    /* pair row (r, u, c / 2) of panel j, lane c % 2 of each column */
                    uint16_t *d = wpk + ((j * R * S + r * S + u) * Ce + (c & ~(int64_t)1)) * nr
                                  + (c & 1);
                    for (int64_t i = 0; i < nr; ++i) {
                        const int64_t k = j * nr + i;
                        d[2 * i] = k < K && c < C
                                       ? w[k * st[0] + c * st[1] + r * st[2] + u * st[3]]
                                       : 0;
                    }
                }
}

static void bf16_task(const bf16_plan *fp, int64_t t, char *abuf, float *cbuf)
{
    const pytpp_conv_shape *s = fp->s;
    const pytpp_pk_kernels *bf = fp->bf;
    const int64_t K = s->K, nr = fp->nr, vl = bf->vl;
    const int64_t blk = t / fp->b.kgroups, kg = t % fp->b.kgroups;
    int64_t pix0, m;
    pytpp_conv_block_pixels(&fp->b, s->N * s->P * s->Q, blk, &pix0, &m);
    const int64_t j0 = kg * fp->b.kb_per_task, j1 = imin(fp->npan, j0 + fp->b.kb_per_task);
    const int64_t c0 = j0 * nr, nk = imin(K, j1 * nr) - c0;
    /* the sums: a float32 output's own rows, else the thread's buffer */
    char *c = fp->out_bf16 ? (char *)cbuf : fp->out + (pix0 * K + c0) * 4;
    const int64_t ldc = fp->out_bf16 ? fp->ldcb : K;
    const int64_t blocks = pytpp_brd_blocks(m, bf->mr_main);
    for (int64_t kk = 0; kk < fp->nkc; ++kk) {
        const int64_t k0 = kk * fp->kc, kn = imin(fp->kc, fp->rsc - k0);
        const char *a = abuf;
        int64_t lda = fp->lda * 2;
        if (fp->in_place) {
            a = fp->x + (pix0 * s->C + k0) * 2;
            lda = s->C * 2;
        } else {
            pytpp_conv_copy_windows(s, fp->x, 2, pix0, m, k0, kn, fp->lda, abuf);
        }
        for (int64_t rb = 0; rb < blocks; ++rb)
            for (int64_t j = j0; j < j1; ++j) {
                const char *b = fp->wpk + (j * fp->rsc + k0) * nr * 2;
                pytpp_brd_panel(&bf->brd, bf->mr_main, nr, vl, m, imin(nr, K - j * nr), 0, rb,
                                rb + 1, kn / 2, 1, &a, lda, &b, 4, nr * 4,
                                c + (j - j0) * nr * 4, ldc, kk > 0, NULL);
            }
    }
    pytpp_conv_epilogue(fp->ew, 4, m, nk, c, ldc, fp->bias ? (const char *)(fp->bias + c0) : NULL,
                        fp->act);
    if (fp->out_bf16)
        for (int64_t i = 0; i < m; ++i)
            fp->ew->store_cvt[PYTPP_EW_BF16](nk, c + i * ldc * 4,
                                             fp->out + ((pix0 + i) * K + c0) * 2);
}

int pytpp_conv2d_forward_bf16(const pytpp_pk_kernels *bf, const pytpp_ew_kernels *ew32,
                              const pytpp_conv_shape *s, const void *x, const void *wpk,
                              const float *bias, int act, void *out, int out_bf16,
                              int nthreads)
{
    const int64_t M = s->N * s->P * s->Q;
    if (M <= 0 || s->K <= 0) return 0;
    bf16_plan fp = {.bf = bf, .ew = ew32, .s = s, .x = x, .wpk = wpk, .bias = bias,
                    .out = out, .act = act, .out_bf16 = out_bf16};
    fp.nr = (int64_t)bf->vl * bf->nv_main;
    fp.npan = cdiv(s->K, fp.nr);
    fp.rsc = s->R * s->S * s->C;
    fp.in_place = s->R == 1 && s->S == 1 && s->sh == 1 && s->sw == 1 && s->H == s->P &&
                  s->W == s->Q;
    /* k chunks of whole pairs */
    fp.nkc = cdiv(fp.rsc, imax(2, BF16_B_SLICE_BYTES / (fp.nr * 2)));
    fp.kc = cdiv(cdiv(fp.rsc, fp.nkc), 2) * 2;
    fp.nkc = cdiv(fp.rsc, fp.kc);
    fp.lda = cdiv(fp.kc, 32) * 32;
    int nt = nthreads < 1 ? 1 : nthreads;
    pytpp_conv_pixel_blocks(M, bf->mr_main, fp.npan, nt, &fp.b);
    fp.ldcb = imin(s->K, fp.b.kb_per_task * fp.nr);
    const int64_t tasks = fp.b.nblk * fp.b.kgroups;
    if (nt > tasks) nt = (int)tasks;
    if ((double)M * s->K * fp.rsc < 65536.0) nt = 1;
    int err = 0;
#pragma omp parallel num_threads(nt) if (nt > 1) reduction(| : err)
    {
        int64_t t0, len;
        pytpp_thread_part(tasks, &t0, &len);
        char *abuf = fp.in_place ? NULL : malloc((size_t)(fp.b.mc * fp.lda * 2) + 64);
        float *cbuf = out_bf16 ? malloc((size_t)(fp.b.mc * fp.ldcb * 4) + 64) : NULL;
        if ((!fp.in_place && !abuf) || (out_bf16 && !cbuf))
            err |= 1;
        else
            for (int64_t t = t0; t < t0 + len; ++t) bf16_task(&fp, t, abuf, cbuf);
        free(abuf);
        free(cbuf);
    }
    return err ? -1 : 0;
}
