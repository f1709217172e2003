/* Channel-norm drivers (norm.h): group_norm and batch_norm composed of the plane and column
 * kernels of the norm table. Statistics are summed in double across planes and row blocks;
 * threads split rows of groups, channels, planes or rows, never the same output. No ISA code. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "pytpp/norm.h"
#include "pytpp/elem_access.h"
#include "pytpp/partition.h"
#include "pytpp/tuning.h"

/* Rows per column-kernel call: the block's element-typed partial sums stay short (256 terms). */
#define COL_BLOCK 256

/* v rounded to the element type, as a kernel sees it */
static double rounded(int esz, double v)
{
    return esz == 8 ? v : (double)(float)v;
}

static int threads_for(int nthreads, int64_t elems, int64_t units)
{
    int nt = nthreads < 1 ? 1 : nthreads;
    if (elems < PYTPP_EW_PAR_MIN_ELEMS) nt = 1;
    if (nt > units) nt = (int)(units > 0 ? units : 1);
    return nt;
}

static int streaming(int64_t elems, int esz)
{
    return elems * esz >= PYTPP_EW_STREAM_MIN_BYTES;
}

/* mean and biased variance from sums of (x - shift) over cnt elements */
static void moments(double shift, double s1, double s2, double cnt, double *mean, double *var)
{
    *mean = shift + s1 / cnt;
    const double v = (s2 - s1 * s1 / cnt) / cnt;
    *var = v > 0.0 ? v : 0.0;
}

/* The shift: the mean of the first (up to 8) of n elements `stride` apart, rounded to the
 * element type (one element alone may be an outlier). */
static double lead_mean(int esz, const void *p, int64_t n, int64_t stride)
{
    const int64_t k = n < 8 ? n : 8;
    double s = 0.0;
    for (int64_t i = 0; i < k; ++i) s += pytpp_elem_get(esz, p, i * stride);
    return k > 0 ? rounded(esz, s / (double)k) : 0.0;
}

int pytpp_group_norm_forward(const pytpp_norm_kernels *kt, int64_t N, int64_t C, int64_t hw,
                             int64_t groups, const void *x, const void *w, const void *b,
                             double eps, void *y, void *mean, void *rstd, int nthreads)
{
    const int esz = kt->esz;
    const int64_t cps = C / groups, n = cps * hw, rows = N * groups;
    if (rows <= 0 || n <= 0) return 0;
    const int nt = threads_for(nthreads, rows * n, rows), stream = streaming(rows * n, esz);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int64_t r0, len;
        pytpp_thread_part(rows, &r0, &len);
        for (int64_t r = r0; r < r0 + len; ++r) {
            const char *xr = (const char *)x + r * n * esz;
            char *yr = (char *)y + r * n * esz;
            double s1, s2, mu, var, shift = lead_mean(esz, xr, n, 1);
            kt->plane_sums(n, xr, shift, &s1, &s2);
            if (pytpp_norm_shift_too_far(s1, s2, (double)n)) {
                shift = rounded(esz, shift + s1 / (double)n);
                kt->plane_sums(n, xr, shift, &s1, &s2);
            }
            moments(shift, s1, s2, (double)n, &mu, &var);
            pytpp_elem_put(esz, mean, r, mu);
            pytpp_elem_put(esz, rstd, r, 1.0 / sqrt(var + eps));
            mu = pytpp_elem_get(esz, mean, r);
            const double rs = pytpp_elem_get(esz, rstd, r);
            for (int64_t s = 0; s < cps; ++s) {
                const int64_t c = (r % groups) * cps + s;
                kt->plane_apply(hw, xr + s * hw * esz, mu, rs, w ? pytpp_elem_get(esz, w, c) : 1.0,
                                b ? pytpp_elem_get(esz, b, c) : 0.0, yr + s * hw * esz, stream,
                                r + 1 < r0 + len ? xr + (n + s * hw) * esz : NULL);
            }
        }
    }
    return 0;
}

int pytpp_group_norm_backward(const pytpp_norm_kernels *kt, int64_t N, int64_t C, int64_t hw,
                              int64_t groups, const void *g, const void *x, const void *mean,
                              const void *rstd, const void *w, void *dx, void *gw, void *gb,
                              int nthreads)
{
    const int esz = kt->esz;
    const int64_t cps = C / groups, n = cps * hw, rows = N * groups;
    for (int64_t c = 0; c < C; ++c) {
        if (gw) pytpp_elem_put(esz, gw, c, 0.0);
        if (gb) pytpp_elem_put(esz, gb, c, 0.0);
    }
    if (rows <= 0 || n <= 0) return 0;
    /* per (sample, channel): sum g and sum g * xhat, for the weight gradients */
    double *sums = malloc((size_t)(N * C) * 2 * sizeof(double));
    if (!sums) return -1;
    const int nt = threads_for(nthreads, rows * n, rows), stream = streaming(rows * n, esz);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int64_t r0, len;
        pytpp_thread_part(rows, &r0, &len);
        for (int64_t r = r0; r < r0 + len; ++r) {
            const int64_t off = r * n * esz, c0 = (r % groups) * cps, s0 = (r / groups) * C;
            const double mu = pytpp_elem_get(esz, mean, r), rs = pytpp_elem_get(esz, rstd, r);
            double a = 0.0, p = 0.0;
            for (int64_t s = 0; s < cps; ++s) {
                double *sg = sums + 2 * (s0 + c0 + s);
                kt->plane_bwd_sums(hw, (const char *)g + off + s * hw * esz,
                                   (const char *)x + off + s * hw * esz, mu, rs, sg, sg + 1);
                const double wc = w ? pytpp_elem_get(esz, w, c0 + s) : 1.0;
                a += wc * sg[0];
                p += wc * sg[1];
            }
            for (int64_t s = 0; s < cps; ++s)
                kt->plane_bwd_apply(hw, (const char *)g + off + s * hw * esz,
                                    (const char *)x + off + s * hw * esz, mu, rs,
                                    w ? pytpp_elem_get(esz, w, c0 + s) : 1.0, a / (double)n,
                                    p / (double)n,
                                    (char *)dx + off + s * hw * esz, stream);
        }
    }
    for (int64_t c = 0; c < C && (gw || gb); ++c) {
        double tg = 0.0, tgh = 0.0;
        for (int64_t i = 0; i < N; ++i) {
            tg += sums[2 * (i * C + c)];
            tgh += sums[2 * (i * C + c) + 1];
        }
        if (gw) pytpp_elem_put(esz, gw, c, tgh);
        if (gb) pytpp_elem_put(esz, gb, c, tg);
    }
    free(sums);
    return 0;
}

/* Per-channel element arrays for the column kernels: 6 arrays of C. */
typedef struct col_coefs {
    char *mu, *r, *w, *b, *ma, *mp;
} col_coefs;

static char *col_coefs_alloc(col_coefs *k, int64_t C, int esz)
{
    char *base = malloc((size_t)C * 6 * esz + 64);
    if (!base) return NULL;
    k->mu = base;
    k->r = base + C * esz;
    k->w = base + 2 * C * esz;
    k->b = base + 3 * C * esz;
    k->ma = base + 4 * C * esz;
    k->mp = base + 5 * C * esz;
    return base;
}

/* NHWC column sums over rows [0, rows) of x (row stride C) into double totals t1, t2 (C each):
 * threads sum their rows in blocks, then the blocks are added. kind 0: sums of x - shift and
 * squares (shift: C elements); kind 1: backward sums of g and g * xhat. */
static int col_totals(const pytpp_norm_kernels *kt, int kind, int64_t rows, int64_t C,
                      const void *x, const void *g, const void *shift, const col_coefs *k,
                      double *t1, double *t2, int nthreads)
{
    const int esz = kt->esz;
    const int nt = threads_for(nthreads, rows * C, (rows + COL_BLOCK - 1) / COL_BLOCK);
    double *part = calloc((size_t)nt * 2 * (size_t)C, sizeof(double));
    char *acc = malloc((size_t)nt * 2 * (size_t)C * esz + 64);
    if (!part || !acc) { free(part); free(acc); return -1; }
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int64_t r0, len;
        const int t = pytpp_thread_part(rows, &r0, &len);
        double *p1 = part + (size_t)t * 2 * C, *p2 = p1 + C;
        char *a1 = acc + (size_t)t * 2 * C * esz, *a2 = a1 + C * esz;
        for (int64_t i = r0; i < r0 + len; i += COL_BLOCK) {
            const int64_t blk = r0 + len - i < COL_BLOCK ? r0 + len - i : COL_BLOCK;
            memset(a1, 0, (size_t)(2 * C * esz));
            if (kind == 0)
                kt->col_sums(blk, C, (const char *)x + i * C * esz, C, shift, a1, a2);
            else
                kt->col_bwd_sums(blk, C, (const char *)g + i * C * esz, C,
                                 (const char *)x + i * C * esz, C, k->mu, k->r, a1, a2);
            for (int64_t c = 0; c < C; ++c) {
                p1[c] += pytpp_elem_get(esz, a1, c);
                p2[c] += pytpp_elem_get(esz, a2, c);
            }
        }
    }
    for (int64_t c = 0; c < C; ++c) {
        t1[c] = t2[c] = 0.0;
        for (int t = 0; t < nt; ++t) {
            t1[c] += part[(size_t)t * 2 * C + c];
            t2[c] += part[(size_t)t * 2 * C + C + c];
        }
    }
    free(part);
    free(acc);
    return 0;
}

int pytpp_batch_norm_forward(const pytpp_norm_kernels *kt, int nhwc, int training, int64_t N,
                             int64_t C, int64_t hw, const void *x, const void *w, const void *b,
                             double eps, void *y, void *mean, void *var, void *rstd,
                             int nthreads)
{
    const int esz = kt->esz;
    const int64_t cnt = N * hw, total = cnt * C;
    if (C <= 0) return 0;
    const int stream = streaming(total, esz);
    if (training && cnt > 0 && !nhwc) {
        /* per channel: sums of x - shift over its planes (one pass from memory; a second from
         * the caches where the shift was too far), then its planes normalised from the caches
         * while the next channel's first plane comes in */
        const int nt = threads_for(nthreads, total, C);
#pragma omp parallel num_threads(nt) if (nt > 1)
        {
            int64_t c0, len;
            pytpp_thread_part(C, &c0, &len);
            for (int64_t c = c0; c < c0 + len; ++c) {
                double k = lead_mean(esz, (const char *)x + c * hw * esz, hw, 1);
                double s1, s2, a, q, mu, v;
                for (int pass = 0; pass < 2; ++pass) {
                    s1 = s2 = 0.0;
                    for (int64_t i = 0; i < N; ++i) {
                        kt->plane_sums(hw, (const char *)x + (i * C + c) * hw * esz, k, &a, &q);
                        s1 += a;
                        s2 += q;
                    }
                    if (pass || !pytpp_norm_shift_too_far(s1, s2, (double)cnt)) break;
                    k = rounded(esz, k + s1 / (double)cnt);
                }
                moments(k, s1, s2, (double)cnt, &mu, &v);
                pytpp_elem_put(esz, mean, c, mu);
                pytpp_elem_put(esz, var, c, v);
                pytpp_elem_put(esz, rstd, c, 1.0 / sqrt(pytpp_elem_get(esz, var, c) + eps));
                for (int64_t i = 0; i < N; ++i) {
                    const int64_t p = i * C + c;
                    kt->plane_apply(hw, (const char *)x + p * hw * esz,
                                    pytpp_elem_get(esz, mean, c), pytpp_elem_get(esz, rstd, c),
                                    w ? pytpp_elem_get(esz, w, c) : 1.0,
                                    b ? pytpp_elem_get(esz, b, c) : 0.0,
                                    (char *)y + p * hw * esz, stream,
                                    c + 1 < c0 + len ? (const char *)x + (i * C + c + 1) * hw * esz
                                                     : NULL);
                }
            }
        }
        return 0;
    } else if (training && cnt > 0) {
        /* per-channel shifts (element-typed, for the column kernel), then the totals; again
         * around the means when a shift was too far */
        double *t = malloc((size_t)C * 2 * sizeof(double));
        char *shift = malloc((size_t)C * esz);
        int again = 0, err = !t || !shift;
        for (int64_t c = 0; c < C && !err; ++c)
            pytpp_elem_put(esz, shift, c, lead_mean(esz, (const char *)x + c * esz, cnt, C));
        for (int pass = 0; pass < 2 && !err; ++pass) {
            err = col_totals(kt, 0, cnt, C, x, NULL, shift, NULL, t, t + C, nthreads);
            for (int64_t c = 0; c < C && !err && !pass; ++c)
                again |= pytpp_norm_shift_too_far(t[c], t[C + c], (double)cnt);
            if (err || pass || !again) break;
            for (int64_t c = 0; c < C; ++c)
                pytpp_elem_put(esz, shift, c, pytpp_elem_get(esz, shift, c) + t[c] / (double)cnt);
        }
        for (int64_t c = 0; c < C && !err; ++c) {
            double mu, v;
            moments(pytpp_elem_get(esz, shift, c), t[c], t[C + c], (double)cnt, &mu, &v);
            pytpp_elem_put(esz, mean, c, mu);
            pytpp_elem_put(esz, var, c, v);
        }
        free(t);
        free(shift);
        if (err) return -1;
    }
    for (int64_t c = 0; c < C; ++c)
        pytpp_elem_put(esz, rstd, c, 1.0 / sqrt(pytpp_elem_get(esz, var, c) + eps));
    if (cnt <= 0) return 0;
    if (!nhwc) {   /* eval: planes in memory order */
        const int64_t planes = N * C;
        const int nt = threads_for(nthreads, total, planes);
#pragma omp parallel num_threads(nt) if (nt > 1)
        {
            int64_t p0, len;
            pytpp_thread_part(planes, &p0, &len);
            for (int64_t p = p0; p < p0 + len; ++p) {
                const int64_t c = p % C;
                kt->plane_apply(hw, (const char *)x + p * hw * esz,
                                pytpp_elem_get(esz, mean, c), pytpp_elem_get(esz, rstd, c),
                                w ? pytpp_elem_get(esz, w, c) : 1.0,
                                b ? pytpp_elem_get(esz, b, c) : 0.0,
                                (char *)y + p * hw * esz, stream,
                                p + 1 < p0 + len ? (const char *)x + (p + 1) * hw * esz : NULL);
            }
        }
        return 0;
    }
    col_coefs k;
    char *base = col_coefs_alloc(&k, C, esz);
    if (!base) return -1;
    for (int64_t c = 0; c < C; ++c) {
        pytpp_elem_put(esz, k.w, c, w ? pytpp_elem_get(esz, w, c) : 1.0);
        pytpp_elem_put(esz, k.b, c, b ? pytpp_elem_get(esz, b, c) : 0.0);
    }
    const int nt = threads_for(nthreads, total, cnt);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int64_t r0, len;
        pytpp_thread_part(cnt, &r0, &len);
        if (len > 0)
            kt->col_apply(len, C, (const char *)x + r0 * C * esz, C, mean, rstd, k.w, k.b,
                          (char *)y + r0 * C * esz, C, stream);
    }
    free(base);
    return 0;
}

int pytpp_batch_norm_backward(const pytpp_norm_kernels *kt, int nhwc, int64_t N, int64_t C,
                              int64_t hw, const void *g, const void *x, const void *mean,
                              const void *rstd, const void *w, void *dx, void *gw, void *gb,
                              int nthreads)
{
    const int esz = kt->esz;
    const int64_t cnt = N * hw, total = cnt * C;
    if (C <= 0) return 0;
    double *t = calloc((size_t)C * 2, sizeof(double));   /* sum g, sum g * xhat per channel */
    col_coefs k;
    char *base = col_coefs_alloc(&k, C, esz);
    if (!t || !base) { free(t); free(base); return -1; }
    for (int64_t c = 0; c < C; ++c) {
        pytpp_elem_put(esz, k.mu, c, pytpp_elem_get(esz, mean, c));
        pytpp_elem_put(esz, k.r, c, pytpp_elem_get(esz, rstd, c));
        pytpp_elem_put(esz, k.w, c, w ? pytpp_elem_get(esz, w, c) : 1.0);
    }
    const int stream = streaming(total, esz);
    int err = 0;
    if (cnt > 0 && !nhwc) {
        /* per channel: the sums over its planes, then its planes' dx from the caches */
        const int nt = threads_for(nthreads, total, C);
#pragma omp parallel num_threads(nt) if (nt > 1)
        {
            int64_t c0, len;
            pytpp_thread_part(C, &c0, &len);
            for (int64_t c = c0; c < c0 + len; ++c) {
                const double mu = pytpp_elem_get(esz, mean, c), rs = pytpp_elem_get(esz, rstd, c);
                const double wc = w ? pytpp_elem_get(esz, w, c) : 1.0;
                double a, q;
                for (int64_t i = 0; i < N; ++i) {
                    const int64_t off = (i * C + c) * hw * esz;
                    kt->plane_bwd_sums(hw, (const char *)g + off, (const char *)x + off, mu, rs,
                                       &a, &q);
                    t[c] += a;
                    t[C + c] += q;
                }
                for (int64_t i = 0; i < N; ++i) {
                    const int64_t off = (i * C + c) * hw * esz;
                    kt->plane_bwd_apply(hw, (const char *)g + off, (const char *)x + off, mu, rs,
                                        wc, wc * t[c] / (double)cnt, wc * t[C + c] / (double)cnt,
                                        (char *)dx + off, stream);
                }
            }
        }
    } else if (cnt > 0) {
        err = col_totals(kt, 1, cnt, C, x, g, NULL, &k, t, t + C, nthreads);
        if (!err) {
            for (int64_t c = 0; c < C; ++c) {
                const double wc = pytpp_elem_get(esz, k.w, c);
                pytpp_elem_put(esz, k.ma, c, wc * t[c] / (double)cnt);
                pytpp_elem_put(esz, k.mp, c, wc * t[C + c] / (double)cnt);
            }
            const int nt = threads_for(nthreads, total, cnt);
#pragma omp parallel num_threads(nt) if (nt > 1)
            {
                int64_t r0, len;
                pytpp_thread_part(cnt, &r0, &len);
                if (len > 0)
                    kt->col_bwd_apply(len, C, (const char *)g + r0 * C * esz, C,
                                      (const char *)x + r0 * C * esz, C, k.mu, k.r, k.w, k.ma,
                                      k.mp, (char *)dx + r0 * C * esz, C, stream);
            }
        }
    }
    for (int64_t c = 0; c < C && !err; ++c) {
        if (gw) pytpp_elem_put(esz, gw, c, t[C + c]);
        if (gb) pytpp_elem_put(esz, gb, c, t[c]);
    }
    free(t);
    free(base);
    return err;
}
