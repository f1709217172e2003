/* YaConv (yaconv.h, thesis 002 ch. 5) on the level's BRGEMM micro-kernels. No ISA code here. */
#include <stdlib.h>
#include <string.h>
#include "pytpp/yaconv.h"
#include "pytpp/partition.h"

/* Bytes of one register block's weight panel for a channel block (S taps x channels x nr): it
 * stays in L1 (32 KiB on Zen 3) while every (column, tile) of a task passes under it. */
#define YC_PANEL_BYTES (16 * 1024)
/* Bytes of packed image a task's columns read per channel block (all tiles, the task's columns
 * plus the S - 1 the taps reach past them): L2-resident (512 KiB on Zen 3) next to the output
 * rows the task accumulates into. */
#define YC_A_BYTES (160 * 1024)
/* Output channels per task (a multiple of nr), as the BRGEMM engine's blocks. */
#define YC_BK 64
/* Independent accumulators that hide the FMA latency (Zen 3: 2 FMA units x 4 cycles). */
#define YC_ACCUMULATORS 8


typedef struct yc_plan {
    const pytpp_gemm_kernels *gk;
    const pytpp_ew_kernels *ew;
    const pytpp_conv_shape *s;
    int64_t esz, pt, pl, th, nr;  /* th: image rows per packed tile (tile_height) */
    int64_t wp;         /* packed columns: Q + S - 1 (the padded columns the taps read) */
    int64_t ntile;      /* tiles of th image rows per image */
    int64_t tile;       /* elements of one packed tile, wp * C * th */
    int64_t cb, bkt;    /* channels per block of the reduction; output channels per task */
    int64_t bq, nqb, nkt;
    const char *x, *wpk, *bias;
    int64_t sn, sxh, sxw;
    char *pack, *out;
    int act;
} yc_plan;

/* Tile t of image n: pack[t][c'][ch][i] = x[n, t*th + i, c' - pl, ch], zero outside the image
 * (rows past H, columns in the left/right padding). The th image rows of one column become
 * adjacent, so the kernel's broadcasts of a k step read one contiguous run. */
#define PACK_TILE(T)                                                                           \
    do {                                                                                       \
        T *dst = (T *)(fp->pack + t * fp->tile * fp->esz);                                     \
        const T *img = (const T *)fp->x + n * fp->sn;                                          \
        const int64_t h0 = t * th, rows = imin(th, s->H - h0);                                 \
        for (int64_t c = 0; c < fp->wp; ++c, dst += C * th) {                                  \
            const int64_t w = c - fp->pl;                                                      \
            if (w < 0 || w >= s->W || rows < th) memset(dst, 0, (size_t)(C * th * fp->esz));   \
            if (w < 0 || w >= s->W) continue;                                                  \
            for (int64_t i = 0; i < rows; ++i) {                                               \
                const T *src = img + (h0 + i) * fp->sxh + w * fp->sxw;                         \
                for (int64_t ch = 0; ch < C; ++ch) dst[ch * th + i] = src[ch];                 \
            }                                                                                  \
        }                                                                                      \
    } while (0)

static void pack_tile(const yc_plan *fp, int64_t n, int64_t t)
{
    const pytpp_conv_shape *s = fp->s;
    const int64_t C = s->C, th = fp->th;
    if (fp->esz == 8) PACK_TILE(double); else PACK_TILE(float);
}

/* One task: output columns [q0, q0 + qn) x channels [k0, k0 + kc) of image n, all P rows. */
static void yc_task(const yc_plan *fp, int64_t n, int64_t task, const void **ap,
                    const void **bp)
{
    const pytpp_conv_shape *s = fp->s;
    const pytpp_gemm_kernels *gk = fp->gk;
    const int64_t esz = fp->esz, C = s->C, K = s->K, P = s->P, Q = s->Q, R = s->R, S = s->S;
    const int64_t th = fp->th, nr = fp->nr, vl = gk->vl, ldc = Q * K;
    const int64_t qb = task % fp->nqb, kt = task / fp->nqb;
    const int64_t q0 = qb * fp->bq, qn = imin(fp->bq, Q - q0);
    const int64_t k0 = kt * fp->bkt, kc = imin(fp->bkt, K - k0);
    char *on = fp->out + n * P * ldc * esz;
    /* The output block is a sum over (channel block, r) of micro-kernel results added in place.
     * The first pass (first channel block, r = 0) stores instead of adding: it reaches output
     * rows [pt, pt + H); only the rows outside (the padding's) are zeroed first. */
    for (int64_t p = 0; p < P; ++p) {
        if (p >= fp->pt && p < fp->pt + s->H) continue;
        for (int64_t q = q0; q < q0 + qn; ++q)
            memset(on + ((p * Q + q) * K + k0) * esz, 0, (size_t)(kc * esz));
    }
    for (int64_t c0 = 0; c0 < C; c0 += fp->cb) {
        const int64_t cc = imin(fp->cb, C - c0);
        /* the S taps of one kernel row are the batch: blocks of cc channels one packed column
         * (C*th elements) apart in the image, C*nr apart in the weight panel */
        for (int64_t v = 0; v < S; ++v) ap[v] = fp->pack + (v * C + c0) * th * esz;
        for (int64_t r = 0; r < R; ++r) {
            const double beta = c0 == 0 && r == 0 ? 0.0 : 1.0;
            for (int64_t v = 0; v < S; ++v)
                bp[v] = fp->wpk + ((r * S + v) * C + c0) * nr * esz;
            for (int64_t j0 = k0; j0 < k0 + kc; j0 += nr) {
                const int64_t ncol = imin(nr, k0 + kc - j0), nv = cdiv(ncol, vl);
                const int masked = nv * vl > ncol;
                const int64_t n_last = ncol - (nv - 1) * vl, mcap = gk->mr_max[nv];
                const int64_t b_off = j0 / nr * R * S * C * nr;
                for (int64_t q = q0; q < q0 + qn; ++q) {
                    for (int64_t t = 0; t < fp->ntile; ++t) {
                        /* image rows h = t*th + i land on output row h - r + pt: keep the
                         * rows of the image whose output row exists */
                        const int64_t h0 = t * th;
                        int64_t i = imax(0, r - fp->pt - h0);
                        const int64_t i1 = imin(imin(th, s->H - h0), P + r - fp->pt - h0);
                        /* near-equal calls of at most mcap rows: 7 rows are 4 + 3 */
                        const int64_t nch = cdiv(i1 - i, mcap), base = i1 - i;
                        for (int64_t ch = 0; ch < nch; ++ch) {
                            const int64_t m = base / nch + (ch < base % nch);
                            const int64_t p = h0 + i - r + fp->pt;
                            gk->ukr[nv - 1][m - 1][masked](
                                cc, S, ap, t * fp->tile + q * C * th + i, 1, th, bp, b_off, nr,
                                on + ((p * Q + q) * K + j0) * esz, ldc, 1.0, beta, n_last);
                            i += m;
                        }
                    }
                }
            }
        }
    }
    const char *bias = fp->bias ? fp->bias + k0 * esz : NULL;
    for (int64_t p = 0; p < P; ++p)
        pytpp_conv_epilogue(fp->ew, esz, qn, kc, on + ((p * Q + q0) * K + k0) * esz, K, bias,
                            fp->act);
}

/* The packed tile height T: the image rows of one tile sit side by side (T elements per k step,
 * at most one cache line), and per kernel row r each tile's rows that land in the output are
 * cut into near-equal calls of at most mrmax rows. A call of m rows keeps m * nv_main
 * accumulators in flight; below `need` rows the FMA latency, not the FMA units, sets its time.
 * Cost of a T: the sum over (r, tile, call) of max(m, need) plus a quarter row per call; the
 * cheapest T wins (7 rows: one tile of 7, whose r = 0 and r = 2 rows are single 6-row calls;
 * tiles of 4 + 3 made calls of 4, 2, 4, 3, 3, 3). */
static int64_t tile_height(const pytpp_conv_shape *s, int64_t pt, int64_t mrmax, int64_t tmax,
                           int64_t need)
{
    int64_t best_t = imin(mrmax, s->H);
    double best = -1.0;
    for (int64_t T = 1; T <= imin(tmax, s->H); ++T) {
        double cost = 0.0;
        for (int64_t r = 0; r < s->R; ++r)
            for (int64_t h0 = 0; h0 < s->H; h0 += T) {
                const int64_t i0 = imax(0, r - pt - h0);
                const int64_t i1 = imin(imin(T, s->H - h0), s->P + r - pt - h0);
                if (i1 <= i0) continue;
                const int64_t len = i1 - i0, nch = cdiv(len, mrmax);
                for (int64_t c = 0; c < nch; ++c)
                    cost += (double)imax(len / nch + (c < len % nch), need) + 0.25;
            }
        if (best < 0 || cost < best) best = cost, best_t = T;
    }
    return best_t;
}

int pytpp_yaconv_forward(const pytpp_gemm_kernels *gk, const pytpp_ew_kernels *ew,
                         const pytpp_conv_shape *s, int64_t pt, int64_t pl, const void *x,
                         int64_t sn, int64_t sxh, int64_t sxw, const void *wpk, int64_t nr,
                         const void *bias, int act, void *out, int nthreads)
{
    if (s->N <= 0 || s->P <= 0 || s->Q <= 0 || s->K <= 0 || s->C <= 0) return 0;
    const int64_t esz = ew->dtype == PYTPP_EW_F64 ? 8 : 4;
    yc_plan fp = {.gk = gk, .ew = ew, .s = s, .esz = esz, .pt = pt, .pl = pl, .nr = nr,
                  .x = x, .wpk = wpk, .bias = bias, .out = out, .act = act,
                  .sn = sn, .sxh = sxh, .sxw = sxw};
    /* tiles of near-equal height (7 rows: 4 + 3, not 6 + 1, whose one-row calls are load-bound) */
    fp.th = tile_height(s, pt, gk->mr_max[gk->nv_main], imax(gk->mr_max[gk->nv_main], 64 / esz),
                        cdiv(YC_ACCUMULATORS, gk->nv_main));
    fp.ntile = cdiv(s->H, fp.th);
    fp.wp = s->Q + s->S - 1;
    fp.tile = fp.wp * s->C * fp.th;
    /* channel blocks: one register block's panel in L1, near-equal blocks of >= 8 channels */
    int64_t cb = imax(8, YC_PANEL_BYTES / (s->S * nr * esz));
    if (cb >= s->C) cb = s->C;
    else cb = cdiv(s->C, cdiv(s->C, cb));
    fp.cb = cb;
    fp.bkt = imin(nr * imax(1, YC_BK / nr), cdiv(s->K, nr) * nr);
    fp.nkt = cdiv(s->K, fp.bkt);
    /* columns per task: the packed image they read per channel block stays in L2 */
    fp.bq = imax(1, imin(s->Q, YC_A_BYTES / imax(1, fp.ntile * fp.th * cb * esz) - s->S + 1));
    int nt = nthreads < 1 ? 1 : nthreads;
    if ((double)s->N * s->P * s->Q * s->K * s->R * s->S * s->C < 65536.0) nt = 1;
    /* Whole images per thread when they divide evenly enough: each thread packs into its own
     * buffer and never waits for the others (the shared image costs two barriers per sample,
     * which a core busy with something else turns into stalls). */
    const int by_image = nt > 1 && (s->N % nt == 0 || s->N >= 2 * nt);
    const int split = by_image ? 1 : nt;     /* threads sharing one image */
    while (split > 1 && fp.bq > 1 && fp.nkt * cdiv(s->Q, fp.bq) < 2 * split)
        fp.bq = cdiv(fp.bq, 2);
    fp.nqb = cdiv(s->Q, fp.bq);
    /* a task count the sharing threads divide evenly (7 tasks on 2 threads idled one an eighth) */
    for (int64_t nq = fp.nqb; split > 1 && nq <= s->Q; ++nq)
        if (fp.nkt * cdiv(s->Q, cdiv(s->Q, nq)) % split == 0) {
            fp.nqb = nq;
            break;
        }
    fp.bq = cdiv(s->Q, fp.nqb);         /* near-equal column blocks */
    fp.nqb = cdiv(s->Q, fp.bq);
    const int64_t tasks = fp.nkt * fp.nqb;
    /* the packed image (thesis: the L3-resident buffer), one per thread that owns images */
    const size_t pack_bytes = (size_t)(fp.ntile * fp.tile * esz + 64) / 64 * 64;
    char *packs = malloc(pack_bytes * (size_t)(by_image ? nt : 1) + 64);
    if (!packs) return -1;
    fp.pack = packs;
    int err = 0;
#pragma omp parallel num_threads(nt) if (nt > 1) reduction(| : err)
    {
        const void **ptrs = malloc(2 * (size_t)s->S * sizeof(void *));
        if (!ptrs) err |= 1;
        if (by_image) {
            int64_t n0, nn;
            const int me = pytpp_thread_part(s->N, &n0, &nn);
            yc_plan mine = fp;
            mine.pack = packs + (size_t)me * pack_bytes;
            for (int64_t n = n0; n < n0 + nn && ptrs; ++n) {
                for (int64_t t = 0; t < fp.ntile; ++t) pack_tile(&mine, n, t);
                for (int64_t t = 0; t < tasks; ++t) yc_task(&mine, n, t, ptrs, ptrs + s->S);
            }
        } else {
            for (int64_t n = 0; n < s->N; ++n) {
#pragma omp for schedule(static)
                for (int64_t t = 0; t < fp.ntile; ++t) pack_tile(&fp, n, t);
#pragma omp for schedule(static)
                for (int64_t t = 0; t < tasks; ++t)
                    if (ptrs) yc_task(&fp, n, t, ptrs, ptrs + s->S);
            }
        }
        free(ptrs);
    }
    free(packs);
    return err ? -1 : 0;
}
