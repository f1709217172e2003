/* Convolutions on BRGEMM micro-kernels (conv.h). No ISA code here: every inner product is one
 * micro-kernel call from the level's table, every row operation an element-wise kernel. */
#include <stdlib.h>
#include <string.h>
#include "pytpp/conv.h"
#include "pytpp/fpmode.h"
#include "pytpp/partition.h"

/* Output channels per task (a multiple of the panel width nr): four AVX2 register blocks. */
#define CONV_BK 64
/* Bytes of the weight panel one register block's columns sweep per channel block (bc = 85
 * channels for a 3x3 kernel: C = 64 takes one block, its taps folded into k). Sized for L2, not
 * L1: fewer channel blocks mean fewer passes over the C tile and longer k runs, which beat an
 * L1-resident panel (interleaved in one process on Zen 3, 1 thread, N = 8 3x3 layers: 20 KiB
 * 61-75 GFLOP/s, 48 KiB 62-82 GFLOP/s by median; C512 7x7 N = 1 49 -> 54). */
#define CONV_PANEL_BYTES (48 * 1024)
/* Tile rows (output pixels) a task aims at: enough rows for the register blocks to amortise the
 * weight panel loads, few enough for the tile to stay in L1/L2. */
#define CONV_TILE_ROWS 56
/* One group with at least this many input and output channels runs on packed pixel rows
 * (conv_rows.c): Zen 3, 1 thread, fp32, ResNet-50's 3x3 layers at N = 1 and 8 gained 0-30%
 * (most on strided and 7x7/14x14 layers); C64 -> K64 lost 6% (the window copy feeds only 64
 * outputs per element) and the C3 stem 60%. */
#define ROWS_MIN_C 32
#define ROWS_MIN_K 128
/* Rows longer than this (conv1d) are split into blocks of 4 * CONV_TILE_ROWS pixels. */
#define CONV_LONG_ROW 1024


void pytpp_conv_blocking(const pytpp_gemm_kernels *gk, int64_t kg, int64_t *nr, int64_t *bk)
{
    const int64_t w = (int64_t)gk->vl * gk->nv_main;
    const int64_t full = w * imax(1, CONV_BK / w);
    *nr = w;
    *bk = imin(full, imax(1, cdiv(kg, w)) * w);
}

/* ---------------------------------------------------------------- forward, BRGEMM path */

typedef struct fwd_plan {
    const pytpp_gemm_kernels *gk;
    const pytpp_ew_kernels *ew;
    const pytpp_conv_shape *s;
    int64_t esz, cg, kg, nr, bk, nkb, bc, ldt;
    int64_t panel;      /* elements of one packed (R, S, C/groups, nr) column panel */
    int64_t prow;       /* output rows per task */
    int64_t npb;        /* row blocks per image */
    int virt;           /* stride 1: the tile's rows run over whole padded input rows */
    int64_t tw;         /* tile rows per output row: W (virt) or bq */
    int64_t bq, nqb;    /* output columns per task (long rows are split) */
    const char *x, *wpk, *bias;
    char *out;
    int act, out_nchw;
    int fold;           /* one group, all of C in one block and dw == 1: the S taps of a kernel
                         * row are one k = S*C/groups reduction (contiguous in the input row and
                         * in the packed panel), the batch runs over R only */
    int direct;         /* NHWC out and tile rows that map onto output rows at stride K: the
                         * register blocks store into the output itself */
    int out_bf16;       /* the store rounds the float32 rows to a bf16 output (widened bf16) */
} fwd_plan;

/* bias, activation and the store of tile rows [0, qn) (output row p, columns q0..q0+qn); a bf16
 * output takes each row rounded (through tb, qn x kc, on the way to NCHW planes) */
static void epilogue_row(const fwd_plan *fp, int64_t n, int64_t g, int64_t k0, int64_t kc,
                         int64_t p, int64_t q0, int64_t qn, char *rows, char *tb)
{
    const pytpp_conv_shape *s = fp->s;
    const pytpp_ew_kernels *ew = fp->ew;
    const int64_t esz = fp->esz, kabs = g * fp->kg + k0, oesz = fp->out_bf16 ? 2 : esz;
    pytpp_conv_epilogue(ew, esz, qn, kc, rows, fp->ldt, fp->bias ? fp->bias + kabs * esz : NULL,
                        fp->act);
    char *plane = fp->out + ((n * s->K + kabs) * s->P * s->Q + p * s->Q + q0) * oesz;
    if (fp->out_bf16) {
        const pytpp_ew_cvt_fn to_bf16 = ew->store_cvt[PYTPP_EW_BF16];
        for (int64_t q = 0; q < qn; ++q)
            to_bf16(kc, rows + q * fp->ldt * esz,
                    fp->out_nchw ? tb + q * kc * 2
                                 : fp->out + (((n * s->P + p) * s->Q + q0 + q) * s->K + kabs) * 2);
        if (fp->out_nchw) pytpp_conv_transpose(ew, 2, qn, kc, tb, kc, plane, s->P * s->Q);
        return;
    }
    if (!fp->out_nchw)
        for (int64_t q = 0; q < qn; ++q)
            memcpy(fp->out + (((n * s->P + p) * s->Q + q0 + q) * s->K + kabs) * esz,
                   rows + q * fp->ldt * esz, (size_t)(kc * esz));
    else
        ew->transpose(qn, kc, rows, fp->ldt, plane, s->P * s->Q);
}

static void fwd_task(const fwd_plan *fp, int64_t t, char *tile, const void **ap, const void **bp,
                     char *tb)
{
    const pytpp_conv_shape *s = fp->s;
    const int64_t esz = fp->esz, RS = s->R * s->S, C = s->C, W = s->W;
    int64_t u = t;
    const int64_t qb = u % fp->nqb; u /= fp->nqb;
    const int64_t pb = u % fp->npb; u /= fp->npb;
    const int64_t kb = u % fp->nkb; u /= fp->nkb;
    const int64_t g = u % s->groups, n = u / s->groups;
    const int64_t p0 = pb * fp->prow, np = imin(fp->prow, s->P - p0);
    const int64_t q0 = qb * fp->bq, qn = imin(fp->bq, s->Q - q0);
    const int64_t k0 = kb * fp->bk, kc = imin(fp->bk, fp->kg - k0);
    const char *img = fp->x + n * s->H * W * C * esz;
    const char *wblk = fp->wpk + (g * fp->nkb + kb) * fp->bk * RS * fp->cg * esz;
    /* where row i of segment sg goes: the thread's tile, or the output (direct) */
    char *dst = tile;
    int64_t ldd = fp->ldt, seg_rows = fp->tw;
    if (fp->direct) {
        dst = fp->out + (((n * s->P + p0) * s->Q + q0) * s->K + g * fp->kg + k0) * esz;
        ldd = s->K;
        seg_rows = s->Q;
    }
    const int64_t nbat = fp->fold ? s->R : RS;
    /* into the tile in whole vectors: the packed panels are zero past K, and full-width
     * register blocks skip the masked loads of B (ATACworks conv1d, K = 15: 64.5 -> 74.8
     * GFLOP/s); the epilogue reads the kc columns */
    const int64_t ncol = fp->direct ? kc : imin(fp->bk, cdiv(kc, fp->gk->vl) * fp->gk->vl);
    for (int64_t c0 = 0; c0 < fp->cg; c0 += fp->bc) {
        const int64_t cc = imin(fp->bc, fp->cg - c0);
        const double beta = c0 ? 1.0 : 0.0;
        if (fp->fold)
            for (int64_t r = 0; r < s->R; ++r) bp[r] = wblk + r * s->S * fp->cg * fp->nr * esz;
        else
            for (int64_t rs = 0; rs < RS; ++rs)
                bp[rs] = wblk + (rs * fp->cg + c0) * fp->nr * esz;
        /* virt: one sweep over rows p0.. as a (np - 1) * W + Q row matrix of stride C (the
         * W - Q rows between output rows are computed and dropped); else one sweep per row */
        const int64_t nseg = fp->virt ? 1 : np;
        for (int64_t sg = 0; sg < nseg; ++sg) {
            const int64_t p = p0 + sg;
            const char *base = img + ((p * s->sh * W + q0 * s->sw) * C + g * fp->cg + c0) * esz;
            if (fp->fold)
                for (int64_t r = 0; r < s->R; ++r) ap[r] = base + r * s->dh * W * C * esz;
            else
                for (int64_t r = 0, i = 0; r < s->R; ++r)
                    for (int64_t v = 0; v < s->S; ++v, ++i)
                        ap[i] = base + ((r * s->dh * W + v * s->dw) * C) * esz;
            const int64_t m = fp->virt ? (np - 1) * W + qn : qn;
            pytpp_conv_sweep(fp->gk, esz, m, ncol, fp->fold ? s->S * cc : cc, nbat, ap,
                             s->sw * C, 1, bp, fp->nr, fp->panel,
                             dst + sg * seg_rows * ldd * esz, ldd, beta);
        }
    }
    if (fp->direct) {   /* bias and activation in place, each output pixel's kc channels */
        const char *bias = fp->bias ? fp->bias + (g * fp->kg + k0) * esz : NULL;
        for (int64_t i = 0; i < np; ++i)
            pytpp_conv_epilogue(fp->ew, esz, qn, kc, dst + i * s->Q * s->K * esz, s->K, bias,
                                fp->act);
        return;
    }
    for (int64_t i = 0; i < np; ++i)
        epilogue_row(fp, n, g, k0, kc, p0 + i, q0, qn, tile + i * fp->tw * fp->ldt * esz, tb);
}

/* Depthwise (one channel per group): per output pixel, a sum over (r, s) of input pixels times
 * weights, vectorised over channels by the compiler (NHWC keeps the channels contiguous). */
#define DW_ROW(T)                                                                              \
    do {                                                                                       \
        const T *xi = (const T *)fp->x + n * s->H * s->W * C;                                  \
        const T *wd = (const T *)fp->wpk;                                                      \
        T *acc = (T *)tile;                                                                    \
        for (int64_t q = 0; q < s->Q; ++q) {                                                   \
            T *a = acc + q * C;                                                                \
            for (int64_t c = 0; c < C; ++c) a[c] = 0;                                          \
            for (int64_t r = 0; r < s->R; ++r)                                                 \
                for (int64_t u = 0; u < s->S; ++u) {                                           \
                    const T *xp = xi + ((p * s->sh + r * s->dh) * s->W + q * s->sw +           \
                                        u * s->dw) * C;                                        \
                    const T *wp = wd + (r * s->S + u) * C;                                     \
                    for (int64_t c = 0; c < C; ++c) a[c] += xp[c] * wp[c];                     \
                }                                                                              \
        }                                                                                      \
    } while (0)

static void dw_task(const fwd_plan *fp, int64_t t, char *tile, char *tb)
{
    const pytpp_conv_shape *s = fp->s;
    const int64_t C = s->C, n = t / s->P, p = t % s->P;
    if (fp->esz == 8) DW_ROW(double); else DW_ROW(float);
    fwd_plan one = *fp;        /* the epilogue sees the row as one block of all C channels */
    one.kg = C, one.ldt = C;
    epilogue_row(&one, n, 0, 0, C, p, 0, s->Q, tile, tb);
}

/* chain: every output one batch-reduce over all of its k in (r, s, c) order from zero (every
 * channel in one block, no pixel rows, whose k chunks end one kernel call's sum and start
 * another), under DAZ + FTZ with the epilogue: the widened bf16 forward, whose output may be
 * bf16 (out_bf16: each finished tile row rounded into it, no float32 result in memory) */
static int forward_impl(const pytpp_gemm_kernels *gk, const pytpp_ew_kernels *ew,
                        const pytpp_conv_shape *s, const void *x, const void *wpk, int64_t nr,
                        int64_t bk, const void *bias, int act, void *out, int out_nchw,
                        int nthreads, int chain, int out_bf16)
{
    if (s->N <= 0 || s->P <= 0 || s->Q <= 0 || s->K <= 0) return 0;
    const int64_t esz = ew->dtype == PYTPP_EW_F64 ? 8 : 4;
    fwd_plan fp = {.gk = gk, .ew = ew, .s = s, .esz = esz, .cg = s->C / s->groups,
                   .kg = s->K / s->groups, .x = x, .wpk = wpk, .bias = bias, .out = out,
                   .act = act, .out_nchw = out_nchw, .out_bf16 = out_bf16};
    const int dw = pytpp_conv_is_depthwise(s->K, fp.cg, s->groups);
    if (!chain && !dw && s->groups == 1 && s->C >= ROWS_MIN_C && s->K >= ROWS_MIN_K) {
        if (!out_nchw)
            return pytpp_conv2d_forward_rows(gk, ew, s, x, wpk, nr, bk, bias, act, out, nthreads);
        /* NCHW out: the NHWC result, then one transpose (~1% of such a layer's time) */
        void *tmp = malloc((size_t)(s->N * s->P * s->Q * s->K * esz));
        int err = tmp ? pytpp_conv2d_forward_rows(gk, ew, s, x, wpk, nr, bk, bias, act, tmp,
                                                  nthreads) : -1;
        if (!err) pytpp_conv_nhwc_to_nchw(ew, esz, s->N, s->K, s->P, s->Q, tmp, out, nthreads);
        free(tmp);
        return err;
    }
    int64_t tasks;
    size_t tile_bytes;
    if (dw) {
        tasks = s->N * s->P;
        tile_bytes = (size_t)(s->Q * s->C * esz);
    } else {
        fp.nr = nr, fp.bk = bk;
        fp.nkb = cdiv(fp.kg, fp.bk);
        fp.ldt = fp.bk;
        fp.panel = s->R * s->S * fp.cg * fp.nr;
        /* channel block: one register block's weight panel (R*S*bc rows of nr columns) in L1 */
        fp.bc = imax(1, CONV_PANEL_BYTES / (s->R * s->S * fp.nr * esz));
        if (fp.bc >= fp.cg || chain) fp.bc = fp.cg;
        else fp.bc = imax(imin(fp.cg, 32), fp.bc / 8 * 8);   /* k below 32 runs the kernel short */
        fp.bq = s->Q > CONV_LONG_ROW ? CONV_TILE_ROWS * 4 : s->Q;
        fp.nqb = cdiv(s->Q, fp.bq);
        fp.fold = fp.bc == fp.cg && s->dw == 1 && s->groups == 1;
        /* the virtual matrix over whole input rows needs unit strides; with W > Q its extra
         * rows cannot land in the output, so a direct NHWC store runs row by row instead */
        fp.virt = s->sh == 1 && s->sw == 1 && fp.nqb == 1;
        fp.direct = !out_nchw && !out_bf16 && (!fp.virt || s->W == s->Q);
        if (!out_nchw && !out_bf16 && fp.virt && s->W != s->Q && s->Q >= CONV_TILE_ROWS / 2)
            fp.virt = 0, fp.direct = 1;   /* long rows: per-row sweeps lose little */
        fp.tw = fp.virt ? s->W : fp.bq;
        fp.prow = imax(1, imin(s->P, CONV_TILE_ROWS / fp.tw));
        while (fp.prow > 1 && s->N * s->groups * fp.nkb * cdiv(s->P, fp.prow) < 2 * nthreads)
            fp.prow = cdiv(fp.prow, 2);
        fp.npb = cdiv(s->P, fp.prow);
        fp.prow = cdiv(s->P, fp.npb);    /* 7 rows in blocks of 6 are 4 + 3, not 6 + 1 */
        tasks = s->N * s->groups * fp.nkb * fp.npb * fp.nqb;
        tile_bytes = (size_t)(fp.prow * fp.tw * fp.ldt * esz);
    }
    int nt = nthreads < 1 ? 1 : nthreads;
    if (nt > tasks) nt = (int)tasks;
    if ((double)s->N * s->P * s->Q * s->K * s->R * s->S * fp.cg < 65536.0) nt = 1;
    int err = 0;
#pragma omp parallel num_threads(nt) if (nt > 1) reduction(| : err)
    {
        int64_t t0, len;
        pytpp_thread_part(tasks, &t0, &len);
        const unsigned csr = chain ? pytpp_ftz_enter() : 0;
        char *tile = malloc(tile_bytes + 64);
        const void **ptrs = malloc(2 * (size_t)(s->R * s->S + 1) * sizeof(void *));
        /* a bf16 NCHW output: one tile row block's rounded rows before their transpose */
        char *tb = out_bf16 && out_nchw ? malloc(tile_bytes / 2 + 64) : NULL;
        if (!tile || !ptrs || (out_bf16 && out_nchw && !tb)) {
            err |= 1;
        } else {
            for (int64_t t = t0; t < t0 + len; ++t) {
                if (dw) dw_task(&fp, t, tile, tb);
                else fwd_task(&fp, t, tile, ptrs, ptrs + s->R * s->S + 1, tb);
            }
        }
        free(tile);
        free(ptrs);
        free(tb);
        if (chain) pytpp_ftz_leave(csr);
    }
    return err ? -1 : 0;
}

int pytpp_conv2d_forward(const pytpp_gemm_kernels *gk, const pytpp_ew_kernels *ew,
                         const pytpp_conv_shape *s, const void *x, const void *wpk, int64_t nr,
                         int64_t bk, const void *bias, int act, void *out, int out_nchw,
                         int nthreads)
{
    return forward_impl(gk, ew, s, x, wpk, nr, bk, bias, act, out, out_nchw, nthreads, 0, 0);
}

int pytpp_conv2d_forward_widened(const pytpp_gemm_kernels *gk32, const pytpp_ew_kernels *ew32,
                                 const pytpp_conv_shape *s, const float *x, const float *wpk,
                                 int64_t nr, int64_t bk, const float *bias, int act, void *out,
                                 int out_bf16, int out_nchw, int nthreads)
{
    /* a bf16 output is stored by the epilogue, under the sums' DAZ + FTZ, which left no
     * denormal for the emulated rounding to meet: the native store's bits */
    return forward_impl(gk32, ew32, s, x, wpk, nr, bk, bias, act, out, out_nchw, nthreads, 1,
                        out_bf16);
}

/* ---------------------------------------------------------------- backward by weights */

/* Bytes of input and gradient rows one pass over the register blocks reads: L2-resident. */
#define BWW_CHUNK_BYTES (192 * 1024)

/* gw (K, C/groups, R, S) from wt (groups, R, S, C/groups, row stride ldk >= K/groups): per 16
 * output channels and input channel, the 16-wide source rows of every (r, s) are read once and
 * each output channel's R*S run is written in order (numpy's transposing copy took half the
 * time of a 7x7 512-channel layer's backward). */
static void weight_grad_layout(int64_t esz, int64_t groups, int64_t RS, int64_t cg, int64_t kg,
                               int64_t ldk, const char *wt, char *gw, int nthreads)
{
    const int64_t kb = 16, nkb = cdiv(kg, kb), items = groups * nkb;
    int nt = nthreads < 1 ? 1 : nthreads;
    if (items < 2) nt = 1;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t it = 0; it < items; ++it) {
        const int64_t g = it / nkb, k0 = (it % nkb) * kb, nk = imin(kb, kg - k0);
        for (int64_t c = 0; c < cg; ++c)
            for (int64_t rs = 0; rs < RS; ++rs) {
                const char *src = wt + (((g * RS + rs) * cg + c) * ldk + k0) * esz;
                char *dst = gw + (((g * kg + k0) * cg + c) * RS + rs) * esz;
                if (esz == 8)
                    for (int64_t k = 0; k < nk; ++k)
                        ((double *)dst)[k * cg * RS] = ((const double *)src)[k];
                else
                    for (int64_t k = 0; k < nk; ++k)
                        ((float *)dst)[k * cg * RS] = ((const float *)src)[k];
            }
    }
}

int pytpp_conv2d_backward_weight(const pytpp_gemm_kernels *gk, int64_t esz,
                                 const pytpp_conv_shape *s, const void *x, const void *go,
                                 int64_t go_w, void *gw_out, int nthreads)
{
    const int64_t cg = s->C / s->groups, kg = s->K / s->groups, RS = s->R * s->S;
    if (cg <= 0 || kg <= 0 || RS <= 0) return 0;
    if (s->N * s->P <= 0 || s->Q <= 0) {     /* no output pixels: a zero gradient */
        memset(gw_out, 0, (size_t)(s->groups * RS * cg * kg * esz));
        return 0;
    }
    /* whole images: stride 1 and go rows as wide as the padded input (zero past Q), so an image's
     * pixels are one reduction of (P - 1) * W + Q steps (the zero columns add nothing); else one
     * batch entry per output row of Q steps (7 on a 7x7 layer: the kernel's loop overhead won) */
    const int whole = s->sh == 1 && s->sw == 1 && go_w == s->W;
    /* long rows (conv1d) are cut into blocks of CONV_LONG_ROW / 2 pixels, each its own batch
     * entry (the last one zero-padded in both packs): one 60400-pixel entry made every task pack
     * and stream the whole row */
    const int64_t bq = whole ? (s->P - 1) * s->W + s->Q
                             : (s->Q > CONV_LONG_ROW ? CONV_LONG_ROW / 2 : s->Q);
    const int64_t nqb = whole ? 1 : cdiv(s->Q, bq);
    const int64_t E = (whole ? s->N : s->N * s->P) * nqb;  /* batch entries */
    const int64_t klen = bq;
    const int64_t nr = (int64_t)gk->vl * gk->nv_main, nch = cdiv(kg, nr);
    int nt = nthreads < 1 ? 1 : nthreads;
    /* Both operands are packed so that the kernel's rows are contiguous: go into
     * [group][nr-column chunk][entry][klen][nr] once per call, each task's shifted input rows
     * into [entry][klen][channel block]. Read in place, their pixel strides (C or K elements,
     * 2 KiB at 512 channels) put every row of a reduction into the same few L1 sets. */
    const size_t gop_elems = (size_t)(s->groups * nch * E * klen * nr);
    char *gop = malloc(gop_elems * (size_t)esz + 64);
    /* (groups, R, S, C/groups, K/groups padded to whole vectors) as the kernels produce it:
     * full-width register blocks (gop is zero past K/groups), no masked loads of B (ATACworks
     * conv1d, K = 15: 45 -> 49 GFLOP/s) */
    const int64_t kgp = imin(nch * nr, cdiv(kg, gk->vl) * gk->vl);
    char *gw = malloc((size_t)(s->groups * RS * cg * kgp * esz) + 64);
    if (!gop || !gw) {
        free(gop);
        free(gw);
        return -1;
    }
    {
        const int64_t items = s->groups * nch * E;
#pragma omp parallel for num_threads(nt) if (nt > 1 && items > 1) schedule(static)
        for (int64_t it = 0; it < items; ++it) {
            const int64_t e = it % E, j = (it / E) % nch, g = it / E / nch;
            const int64_t re = e / nqb, q0 = e % nqb * bq, qn = whole ? klen : imin(bq, s->Q - q0);
            const int64_t n = whole ? re : re / s->P, p = whole ? 0 : re % s->P;
            const int64_t k0 = j * nr, nk = imin(nr, kg - k0);
            const char *src = (const char *)go +
                              (((n * s->P + p) * go_w + q0) * s->K + g * kg + k0) * esz;
            char *dst = gop + (size_t)it * (size_t)(klen * nr * esz);
            for (int64_t q = 0; q < qn; ++q) {
                memcpy(dst + q * nr * esz, src + q * s->K * esz, (size_t)(nk * esz));
                if (nk < nr) memset(dst + (q * nr + nk) * esz, 0, (size_t)((nr - nk) * esz));
            }
            if (qn < klen) memset(dst + qn * nr * esz, 0, (size_t)((klen - qn) * nr * esz));
        }
    }
    const int64_t bcw = imin(cg, 64);
    const int64_t ncb = cdiv(cg, bcw), tasks = s->groups * RS * ncb;
    /* entries per pass over the output channels: the packed input chunk and the gradient rows
     * it meets stay in L2 */
    const int64_t chunk = imax(1, imin(E, BWW_CHUNK_BYTES / imax(1, klen * (bcw + nr) * esz)));
    if (nt > tasks) nt = (int)tasks;
    const char *xb = x;
    char *wb = gw;
    int err = 0;
#pragma omp parallel num_threads(nt) if (nt > 1) reduction(| : err)
    {
        int64_t t0, len;
        pytpp_thread_part(tasks, &t0, &len);
        const void **ptrs = malloc(2 * (size_t)chunk * sizeof(void *));
        char *ap = malloc((size_t)(chunk * klen * bcw * esz) + 64);
        if (!ptrs || !ap) {
            err |= 1;
        } else {
            for (int64_t t = t0; t < t0 + len; ++t) {
                const int64_t cb = t % ncb, rs = (t / ncb) % RS, g = t / ncb / RS;
                const int64_t r = rs / s->S, u = rs % s->S;
                const int64_t c0 = cb * bcw, cc = imin(bcw, cg - c0);
                char *c = wb + (((g * RS + rs) * cg + c0) * kgp) * esz;
                for (int64_t j0 = 0; j0 < E; j0 += chunk) {
                    const int64_t nb = imin(chunk, E - j0);
                    for (int64_t i = 0; i < nb; ++i) {
                        const int64_t e = j0 + i, re = e / nqb, q0 = e % nqb * bq;
                        const int64_t qn = whole ? klen : imin(bq, s->Q - q0);
                        const int64_t n = whole ? re : re / s->P, p = whole ? 0 : re % s->P;
                        const char *src = xb + (((n * s->H + p * s->sh + r * s->dh) * s->W +
                                                 q0 * s->sw + u * s->dw) * s->C + g * cg + c0)
                                                   * esz;
                        char *dst = ap + i * klen * cc * esz;
                        ptrs[i] = dst;
                        if (s->sw * s->C == cc && qn == klen) {
                            ptrs[i] = src;   /* the entry's pixels are one run: read in place */
                        } else if (s->sw * s->C == cc) {
                            memcpy(dst, src, (size_t)(qn * cc * esz));
                        } else {
                            for (int64_t q = 0; q < qn; ++q)
                                memcpy(dst + q * cc * esz, src + q * s->sw * s->C * esz,
                                       (size_t)(cc * esz));
                        }
                        if (qn < klen)
                            memset(dst + qn * cc * esz, 0, (size_t)((klen - qn) * cc * esz));
                        ptrs[chunk + i] = gop + ((g * nch * E + e) * klen * nr) * esz;
                    }
                    /* all output channels: chunk j of B sits E*klen*nr elements further */
                    pytpp_conv_sweep(gk, esz, cc, kgp, klen, nb, ptrs, 1, cc, ptrs + chunk, nr,
                                     E * klen * nr, c, kgp, j0 ? 1.0 : 0.0);
                }
            }
        }
        free(ptrs);
        free(ap);
    }
    free(gop);
    if (!err) weight_grad_layout(esz, s->groups, RS, cg, kg, kgp, gw, gw_out, nthreads);
    free(gw);
    return err ? -1 : 0;
}

/* ---------------------------------------------------------------- layout transforms */

/* One row of a padded NHWC image (Wp = pl + W + pr pixels of Cd channels): image row h outside
 * [0, H) is all zeros (returns 0); else its left and right padding and the channels [C, Cd) of
 * its W pixels are zeroed and the caller fills the C channels of those pixels (returns 1). */
static int padded_row(char *dst, int64_t h, int64_t H, int64_t W, int64_t C, int64_t Cd,
                      int64_t pl, int64_t pr, int64_t esz)
{
    if (h < 0 || h >= H) {
        memset(dst, 0, (size_t)((pl + W + pr) * Cd * esz));
        return 0;
    }
    memset(dst, 0, (size_t)(pl * Cd * esz));
    memset(dst + (pl + W) * Cd * esz, 0, (size_t)(pr * Cd * esz));
    /* a channel per pixel: stores, not a call each */
    if (Cd == C + 1 && esz == 2)
        for (int64_t w = pl; w < pl + W; ++w) ((uint16_t *)dst)[w * Cd + C] = 0;
    else
        for (int64_t w = pl; Cd > C && w < pl + W; ++w)
            for (int64_t b = C * esz; b < Cd * esz; ++b) dst[w * Cd * esz + b] = 0;
    return 1;
}

void pytpp_conv_nchw_to_nhwc_pad(const pytpp_ew_kernels *ew, int64_t esz, int64_t N, int64_t C,
                                 int64_t Cd, int64_t H, int64_t W, int64_t pt, int64_t pb,
                                 int64_t pl, int64_t pr, const void *x, void *y, int nthreads)
{
    const int64_t Hp = H + pt + pb, Wp = W + pl + pr, rows = N * Hp;
    int nt = nthreads < 1 ? 1 : nthreads;
    if ((double)N * C * H * W < 32768.0) nt = 1;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t t = 0; t < rows; ++t) {
        const int64_t n = t / Hp, h = t % Hp - pt;
        char *dst = (char *)y + t * Wp * Cd * esz;
        if (!padded_row(dst, h, H, W, C, Cd, pl, pr, esz)) continue;
        /* the C x W slab of row h (row stride H*W) transposed into W pixels of Cd channels */
        pytpp_conv_transpose(ew, esz, C, W, (const char *)x + (n * C * H + h) * W * esz, H * W,
                             dst + pl * Cd * esz, Cd);
    }
}

void pytpp_conv_nhwc_pad(int64_t esz, int64_t N, int64_t C, int64_t Cd, int64_t H, int64_t W,
                         int64_t sn, int64_t sh, int64_t sw, int64_t pt, int64_t pb, int64_t pl,
                         int64_t pr, const void *x, void *y, int nthreads)
{
    const int64_t Hp = H + pt + pb, Wp = W + pl + pr, rows = N * Hp;
    int nt = nthreads < 1 ? 1 : nthreads;
    if ((double)N * C * H * W < 32768.0) nt = 1;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t t = 0; t < rows; ++t) {
        const int64_t n = t / Hp, h = t % Hp - pt;
        char *dst = (char *)y + t * Wp * Cd * esz;
        if (!padded_row(dst, h, H, W, C, Cd, pl, pr, esz)) continue;
        const char *src = (const char *)x + (n * sn + h * sh) * esz;
        if (sw == C && Cd == C)
            memcpy(dst + pl * C * esz, src, (size_t)(W * C * esz));
        else if (C <= 4 && esz == 2)   /* a bf16 stem's channels: typed stores, not a call per
                                        * pixel (byte loops took 2.4x as long, calls longer) */
            for (int64_t w = 0; w < W; ++w)
                for (int64_t c = 0; c < C; ++c)
                    ((uint16_t *)dst)[(pl + w) * Cd + c] = ((const uint16_t *)src)[w * sw + c];
        else
            for (int64_t w = 0; w < W; ++w)
                memcpy(dst + (pl + w) * Cd * esz, src + w * sw * esz, (size_t)(C * esz));
    }
}

void pytpp_conv_bf16_pairs_swapped(const uint32_t *x, float *y, int64_t n, int nthreads)
{
    /* the second value already stands as the high half of its word: a mask makes it a float32;
     * the first one is shifted up (both exact). Plain C the compiler vectorises: the numpy form
     * of it made three passes and took 0.6 ms of a 2 ms 1x1 layer (803k values, Zen 3). */
    uint32_t *yw = (uint32_t *)y;
    const int64_t chunk = 1 << 14;
    int nt = nthreads < 1 ? 1 : nthreads;
    if (n < 4 * chunk) nt = 1;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t c0 = 0; c0 < n; c0 += chunk) {
        const int64_t c1 = c0 + chunk < n ? c0 + chunk : n;
        for (int64_t i = c0; i < c1; ++i) {
            const uint32_t v = x[i];
            yw[2 * i] = v & 0xFFFF0000u;
            yw[2 * i + 1] = v << 16;
        }
    }
}

void pytpp_conv_nhwc_to_nchw(const pytpp_ew_kernels *ew, int64_t esz, int64_t N, int64_t C,
                             int64_t H, int64_t W, const void *x, void *y, int nthreads)
{
    const int64_t rows = N * H;
    int nt = nthreads < 1 ? 1 : nthreads;
    if ((double)N * C * H * W < 32768.0) nt = 1;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t t = 0; t < rows; ++t) {
        const int64_t n = t / H, h = t % H;
        pytpp_conv_transpose(ew, esz, W, C, (const char *)x + t * W * C * esz, C,
                             (char *)y + (n * C * H + h) * W * esz, H * W);
    }
}
