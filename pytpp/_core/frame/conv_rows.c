/* Forward convolution on packed pixel rows (conv.h, pytpp_conv2d_forward_rows): one GEMM whose
 * A rows are output pixels in flat (n, p, q) order, each row its window's (r, s, c) elements
 * copied from the padded input into a per-thread buffer, and whose B is the packed weight as it
 * is ([K blocks][column panels][R][S][C][nr] is k-major per panel, so any k range of a panel is
 * a contiguous block of rows). A pixel block crosses output rows and images, so every register
 * block is full height (no 5-row blocks for Q = 56, no dropped rows for Q = 7), and the kernel
 * reads A from one compact buffer instead of R*S strided streams: fp32 on Zen 3, a row block of
 * 6 x 16 ran at 98% of peak from the buffer against 94-96% from the image rows. The copy costs
 * about 1/(2K) of the work per element (each element feeds K outputs). */
#include <stdlib.h>
#include <string.h>
#include "pytpp/conv.h"
#include "pytpp/partition.h"

/* Pixels per block: 16 register blocks of 6 rows (AVX2), a multiple of the level's MR. Each
 * block streams the whole weight once, so fewer, taller blocks read it fewer times. */
#define ROWS_BLOCK_TARGET 96
/* Bytes of the B panel slice one A copy multiplies (k run x nr: 2048 rows of 16 fp32), read
 * from L2 by the block's register blocks. Zen 3 (512 KiB L2), fp32, C512 7x7 N = 8, 48-pixel
 * blocks: 16 / 36 / 64 / 128 / 300 KiB ran 79 / 72-81 / 85 / 80 / 80 GFLOP/s (longer runs store
 * C less often; shorter ones fit L1 but reload C). Zen 4 guest (1 MiB L2), one core,
 * interleaved in one process, 48 pixels and 64 KiB -> 96 and 128 KiB, GFLOP/s: C512 7x7 N = 8
 * 72.6 -> 80.7 (two threads 136.8 -> 158.1), N = 1 81.0 -> 82.6; C256 14x14 N = 8 83.7 -> 84.5,
 * N = 1 84.8 -> 86.1; C128 28x28 N = 8 80.9 -> 81.5 (blocks of 128-192 pixels and slices of
 * 96-192 KiB within 2% of it). */
#define ROWS_B_SLICE_BYTES (128 * 1024)

typedef struct rows_plan {
    const pytpp_gemm_kernels *gk;
    const pytpp_ew_kernels *ew;
    const pytpp_conv_shape *s;
    int64_t esz, nr, bk, nkb, rsc, kc, nkc, lda;
    pytpp_conv_blocks b;
    const char *x, *wpk, *bias;
    char *out;
    int act;
} rows_plan;

/* n bytes from s to d: runs up to 64 bytes as two overlapping fixed-size moves (inlined; a
 * bf16 stem's kernel row is 56 bytes, and the library call cost more than the move) */
static inline void copy_run(char *d, const char *s, int64_t n)
{
    if (n > 64) {
        memcpy(d, s, (size_t)n);
    } else if (n >= 32) {
        memcpy(d, s, 32);
        memcpy(d + n - 32, s + n - 32, 32);
    } else if (n >= 16) {
        memcpy(d, s, 16);
        memcpy(d + n - 16, s + n - 16, 16);
    } else if (n >= 8) {
        memcpy(d, s, 8);
        memcpy(d + n - 8, s + n - 8, 8);
    } else {
        for (int64_t i = 0; i < n; ++i) d[i] = s[i];
    }
}

void pytpp_conv_copy_windows(const pytpp_conv_shape *s, const char *x, int64_t esz,
                             int64_t pix0, int64_t m, int64_t k0, int64_t kn, int64_t lda,
                             char *buf)
{
    const int64_t C = s->C;
    /* (r, u, c) of k0, then advanced run by run without divisions */
    const int64_t t0 = k0 / C, c_0 = k0 % C, r_0 = t0 / s->S, u_0 = t0 % s->S;
    int64_t q = pix0 % s->Q, p = pix0 / s->Q % s->P, n = pix0 / s->Q / s->P;
    for (int64_t i = 0; i < m; ++i) {
        const char *img = x + ((n * s->H + p * s->sh) * s->W + q * s->sw) * C * esz;
        char *d = buf + i * lda * esz;
        int64_t r = r_0, u = u_0, c = c_0;
        for (int64_t k = k0; k < k0 + kn;) {
            /* at unit dilation a kernel row's taps are one run of S*C elements in the image */
            const int64_t run = s->dw == 1 ? (s->S - u) * C - c : C - c;
            const int64_t len = imin(run, k0 + kn - k);
            copy_run(d, img + ((r * s->dh * s->W + u * s->dw) * C + c) * esz, len * esz);
            d += len * esz;
            k += len;
            c = 0;
            if (s->dw == 1) u = 0, ++r;
            else if (++u == s->S) u = 0, ++r;
        }
        if (++q == s->Q) {
            q = 0;
            if (++p == s->P) p = 0, ++n;
        }
    }
}

void pytpp_conv_pixel_blocks(int64_t M, int64_t mr, int64_t nkb, int nt,
                             pytpp_conv_blocks *b)
{
    /* near-equal blocks of whole mr-pixel runs, as many per thread (C512 7x7 at N = 8, 392
     * pixels, in 9 blocks of 48 ran 5 + 4 on two threads: 1.68x one thread) */
    b->mr = mr;
    b->units = cdiv(M, mr);
    b->nblk = imax(1, (b->units * mr + ROWS_BLOCK_TARGET / 2) / ROWS_BLOCK_TARGET);
    if (b->nblk >= nt) b->nblk = cdiv(b->nblk, nt) * nt;
    b->nblk = imin(b->nblk, b->units);
    b->mc = cdiv(b->units, b->nblk) * mr;
    /* all K blocks in one task (one copy of the pixels' windows) unless there are fewer
     * blocks than threads: then as few K groups as give each thread a task (each group copies
     * the windows again: C512 7x7 at N = 1 in 8 groups spent 17% of its time copying) */
    b->kgroups = b->nblk >= nt ? 1 : imin(nkb, cdiv(nt, b->nblk));
    b->kb_per_task = cdiv(nkb, b->kgroups);
    b->kgroups = cdiv(nkb, b->kb_per_task);
}

void pytpp_conv_task_range(const pytpp_conv_blocks *b, int64_t M, int64_t nkb, int64_t t,
                           int64_t *pix0, int64_t *m, int64_t *kb0, int64_t *kb1)
{
    const int64_t blk = t / b->kgroups, kg = t % b->kgroups;
    const int64_t u0 = blk * b->units / b->nblk, u1 = (blk + 1) * b->units / b->nblk;
    *pix0 = u0 * b->mr;
    *m = imin(u1 * b->mr, M) - *pix0;
    *kb0 = kg * b->kb_per_task;
    *kb1 = imin(nkb, *kb0 + b->kb_per_task);
}

static void rows_task(const rows_plan *rp, int64_t t, char *buf)
{
    const pytpp_conv_shape *s = rp->s;
    const int64_t esz = rp->esz, K = s->K;
    int64_t pix0, m, kb0, kb1;
    pytpp_conv_task_range(&rp->b, s->N * s->P * s->Q, rp->nkb, t, &pix0, &m, &kb0, &kb1);
    char *c0 = rp->out + pix0 * K * esz;
    for (int64_t kk = 0; kk < rp->nkc; ++kk) {
        const int64_t k0 = kk * rp->kc, kn = imin(rp->kc, rp->rsc - k0);
        pytpp_conv_copy_windows(s, rp->x, esz, pix0, m, k0, kn, rp->lda, buf);
        const void *ap = buf;
        for (int64_t kb = kb0; kb < kb1; ++kb) {
            const int64_t j0 = kb * rp->bk, ncol = imin(rp->bk, K - j0);
            const void *bp = rp->wpk + (kb * rp->bk * rp->rsc + k0 * rp->nr) * esz;
            pytpp_conv_sweep(rp->gk, esz, m, ncol, kn, 1, &ap, rp->lda, 1, &bp, rp->nr,
                             rp->rsc * rp->nr, c0 + j0 * esz, K, kk ? 1.0 : 0.0);
        }
    }
    const int64_t j0 = kb0 * rp->bk, nk = imin(K, kb1 * rp->bk) - j0;
    pytpp_conv_epilogue(rp->ew, esz, m, nk, c0 + j0 * esz, K,
                        rp->bias ? rp->bias + j0 * esz : NULL, rp->act);
}

int pytpp_conv2d_forward_rows(const pytpp_gemm_kernels *gk, const pytpp_ew_kernels *ew,
                              const pytpp_conv_shape *s, const void *x, const void *wpk,
                              int64_t nr, int64_t bk, const void *bias, int act, void *out,
                              int nthreads)
{
    const int64_t M = s->N * s->P * s->Q;
    if (M <= 0 || s->K <= 0) return 0;
    rows_plan rp = {.gk = gk, .ew = ew, .s = s, .esz = ew->dtype == PYTPP_EW_F64 ? 8 : 4,
                    .nr = nr, .bk = bk, .x = x, .wpk = wpk, .bias = bias, .out = out,
                    .act = act};
    const int64_t mr = gk->mr_max[gk->nv_main];
    rp.rsc = s->R * s->S * s->C;
    rp.nkb = cdiv(s->K, bk);
    rp.nkc = cdiv(rp.rsc, imax(1, ROWS_B_SLICE_BYTES / (nr * rp.esz)));
    rp.kc = cdiv(rp.rsc, rp.nkc);
    rp.lda = cdiv(rp.kc, 64 / rp.esz) * (64 / rp.esz);
    int nt = nthreads < 1 ? 1 : nthreads;
    pytpp_conv_pixel_blocks(M, mr, rp.nkb, nt, &rp.b);
    const int64_t tasks = rp.b.nblk * rp.b.kgroups;
    if (nt > tasks) nt = (int)tasks;
    if ((double)M * s->K * rp.rsc < 65536.0) nt = 1;
    int err = 0;
#pragma omp parallel num_threads(nt) if (nt > 1) reduction(| : err)
    {
        int64_t t0, len;
        pytpp_thread_part(tasks, &t0, &len);
        char *buf = malloc((size_t)(rp.b.mc * rp.lda * rp.esz) + 64);
        if (!buf) err |= 1;
        else
            for (int64_t t = t0; t < t0 + len; ++t) rows_task(&rp, t, buf);
        free(buf);
    }
    return err ? -1 : 0;
}
