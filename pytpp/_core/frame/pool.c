/* Pooling forward (pool.h): portable loops the compiler vectorises; no ISA code. */
#include <math.h>
#include "pytpp/pool.h"

static inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

/* the running max takes v when strictly greater, or when v is NaN and the max is not */
#define MAX_STEP(o, v) ((v) > (o) || ((v) != (v) && (o) == (o)) ? (v) : (o))

/* Max pooling of one chunk of NC channels (from c0) of output pixel (p, q) of NHWC, its taps in
 * (r, s) order, the running max in a local array: with NC the constant POOL_CHUNK the compiler
 * keeps it in registers over the taps (loading and storing it at every tap made max pooling 20%
 * slower than torch's). The max takes `v > o ? v : o` (one max instruction; a NaN already in o
 * stays) and, only when the tap held a NaN, gives each NaN to its max where that is not NaN yet:
 * MAX_STEP's result. (Average pooling kept the tap-major loop over the pixel's whole row of
 * channels: chunked, its 7x7 global pool ran 3x slower, the taps' rows no longer read in turn.) */
#define POOL_CHUNK(T) (64 / (int64_t)sizeof(T) * 2)
#define NHWC_MAX_CHUNK(T, NC)                                                                  \
    do {                                                                                       \
        T acc[POOL_CHUNK(T)];                                                                  \
        {                                                                                      \
            const int64_t h = p * s->sh - s->ph, w = q * s->sw - s->pw;                        \
            const T *v = xn + h * xs[1] + w * xs[2] + c0;                                      \
            if (h >= 0 && h < s->H && w >= 0 && w < s->W)                                      \
                for (int64_t c = 0; c < (NC); ++c) acc[c] = v[c];                              \
            else                                                                               \
                for (int64_t c = 0; c < (NC); ++c) acc[c] = fill;                              \
        }                                                                                      \
        for (int64_t t = 1; t < s->kh * s->kw; ++t) {                                          \
            const int64_t h = p * s->sh + t / s->kw - s->ph;                                   \
            const int64_t w = q * s->sw + t % s->kw - s->pw;                                   \
            const int in = h >= 0 && h < s->H && w >= 0 && w < s->W;                           \
            const T *v = xn + h * xs[1] + w * xs[2] + c0;                                      \
            if (!in) continue;                                                                 \
            int nan = 0;                                                                       \
            for (int64_t c = 0; c < (NC); ++c) {                                               \
                acc[c] = v[c] > acc[c] ? v[c] : acc[c];                                        \
                nan |= v[c] != v[c];                                                           \
            }                                                                                  \
            if (nan)                                                                           \
                for (int64_t c = 0; c < (NC); ++c)                                             \
                    if (v[c] != v[c] && acc[c] == acc[c]) acc[c] = v[c];                       \
        }                                                                                      \
        for (int64_t c = 0; c < (NC); ++c) o[c0 + c] = acc[c];                                 \
    } while (0)

/* One output pixel row (n, p) of NHWC: Q pixels of C channels. Max: in chunks of POOL_CHUNK.
 * Average: each pixel starts from its first tap (padding +0.0) and adds the others in (r, s)
 * order, over all C channels per tap. */
#define NHWC_ROW(T)                                                                            \
    do {                                                                                       \
        const T *xn = (const T *)x + n * xs[0];                                                \
        T *yr = (T *)y + (n * s->P + p) * s->Q * C;                                            \
        const T fill = op == PYTPP_POOL_MAX ? (T)-INFINITY : (T)0;                             \
        const T inv = (T)1 / (T)(s->kh * s->kw);                                               \
        for (int64_t q = 0; q < s->Q; ++q) {                                                   \
            T *o = yr + q * C;                                                                 \
            if (op == PYTPP_POOL_MAX) {                                                        \
                int64_t c0 = 0;                                                                \
                for (; c0 + POOL_CHUNK(T) <= C; c0 += POOL_CHUNK(T))                           \
                    NHWC_MAX_CHUNK(T, POOL_CHUNK(T));                                          \
                if (c0 < C) NHWC_MAX_CHUNK(T, C - c0);                                         \
                continue;                                                                      \
            }                                                                                  \
            for (int64_t t = 0; t < s->kh * s->kw; ++t) {                                      \
                const int64_t h = p * s->sh + t / s->kw - s->ph;                               \
                const int64_t w = q * s->sw + t % s->kw - s->pw;                               \
                const int in = h >= 0 && h < s->H && w >= 0 && w < s->W;                       \
                const T *v = xn + h * xs[1] + w * xs[2];                                       \
                if (t == 0) {                                                                  \
                    if (in) for (int64_t c = 0; c < C; ++c) o[c] = v[c];                       \
                    else for (int64_t c = 0; c < C; ++c) o[c] = 0;                             \
                } else if (in) {                                                               \
                    for (int64_t c = 0; c < C; ++c) o[c] += v[c];                              \
                } else {                                                                       \
                    for (int64_t c = 0; c < C; ++c) o[c] += (T)0;                              \
                }                                                                              \
            }                                                                                  \
            for (int64_t c = 0; c < C; ++c) o[c] *= inv;                                       \
        }                                                                                      \
    } while (0)

/* One output row (n, c, p) of NCHW: Q outputs; per tap, the columns whose input column is
 * inside the image [q0, q1) read it at stride sw, the others take the padding value. */
#define NCHW_ROW(T)                                                                            \
    do {                                                                                       \
        const T *xc = (const T *)x + n * xs[0] + c * xs[1];                                    \
        T *o = (T *)y + ((n * s->C + c) * s->P + p) * s->Q;                                    \
        const int64_t Q = s->Q, sw = s->sw;                                                    \
        const T fill = op == PYTPP_POOL_MAX ? (T)-INFINITY : (T)0;                             \
        const T inv = (T)1 / (T)(s->kh * s->kw);                                               \
        for (int64_t t = 0; t < s->kh * s->kw; ++t) {                                          \
            const int64_t h = p * s->sh + t / s->kw - s->ph, u = t % s->kw - s->pw;            \
            const int hin = h >= 0 && h < s->H;                                                \
            /* columns q with 0 <= q*sw + u < W */                                             \
            const int64_t q0 = hin ? imin(Q, imax(0, (-u + sw - 1) / sw)) : Q;                 \
            const int64_t q1 = hin ? imax(q0, imin(Q, (s->W - u + sw - 1) / sw)) : Q;          \
            const T *v = xc + h * xs[2] + u;                                                   \
            if (t == 0) {                                                                      \
                for (int64_t q = 0; q < q0; ++q) o[q] = fill;                                  \
                for (int64_t q = q0; q < q1; ++q) o[q] = v[q * sw];                            \
                for (int64_t q = q1; q < Q; ++q) o[q] = fill;                                  \
            } else if (op == PYTPP_POOL_MAX) {                                                 \
                for (int64_t q = q0; q < q1; ++q) o[q] = MAX_STEP(o[q], v[q * sw]);            \
            } else {                                                                           \
                for (int64_t q = 0; q < q0; ++q) o[q] += (T)0;                                 \
                for (int64_t q = q0; q < q1; ++q) o[q] += v[q * sw];                           \
                for (int64_t q = q1; q < Q; ++q) o[q] += (T)0;                                 \
            }                                                                                  \
        }                                                                                      \
        if (op == PYTPP_POOL_AVG) for (int64_t q = 0; q < Q; ++q) o[q] *= inv;                \
    } while (0)

/* NCHW rows of few outputs (a 7x7 window over a 7x7 image): per output, its taps in (r, s)
 * order, for POOL_PLANES channels at once (independent sums: one tap's sequential chain of
 * dependent adds was the limit); the tap-major loop above would run kh*kw loops of one or two
 * iterations each. */
#define POOL_PLANES 8
#define NCHW_ROW_SHORT(T)                                                                      \
    do {                                                                                       \
        const int64_t c0 = cb * POOL_PLANES, nc = imin(POOL_PLANES, s->C - c0);                \
        const T *xc = (const T *)x + n * xs[0] + c0 * xs[1];                                   \
        T *o = (T *)y + ((n * s->C + c0) * s->P + p) * s->Q;                                   \
        const int64_t ostep = s->P * s->Q;                                                     \
        const T fill = op == PYTPP_POOL_MAX ? (T)-INFINITY : (T)0;                             \
        const T inv = (T)1 / (T)(s->kh * s->kw);                                               \
        for (int64_t q = 0; q < s->Q; ++q) {                                                   \
            T acc[POOL_PLANES];                                                                \
            for (int64_t r = 0; r < s->kh; ++r) {                                              \
                const int64_t h = p * s->sh + r - s->ph;                                       \
                const int hin = h >= 0 && h < s->H;                                            \
                for (int64_t u = 0; u < s->kw; ++u) {                                          \
                    const int64_t w = q * s->sw + u - s->pw;                                   \
                    const int in = hin && w >= 0 && w < s->W;                                  \
                    const T *xv = xc + h * xs[2] + w;                                          \
                    for (int64_t j = 0; j < nc; ++j) {                                         \
                        const T v = in ? xv[j * xs[1]] : fill;                                 \
                        if (r == 0 && u == 0) acc[j] = v;                                      \
                        else if (op == PYTPP_POOL_MAX) acc[j] = MAX_STEP(acc[j], v);           \
                        else acc[j] += v;                                                      \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
            for (int64_t j = 0; j < nc; ++j)                                                   \
                o[j * ostep + q] = op == PYTPP_POOL_AVG ? acc[j] * inv : acc[j];               \
        }                                                                                      \
    } while (0)

/* Below this many outputs per row, NCHW runs output by output (NCHW_ROW_SHORT). */
#define POOL_SHORT_ROW 8

void pytpp_pool2d_forward(int op, int64_t esz, int nhwc, const pytpp_pool_shape *s,
                          const void *x, const int64_t xs[3], void *y, int nthreads)
{
    if (s->N <= 0 || s->P <= 0 || s->Q <= 0 || s->C <= 0) return;
    const int short_rows = !nhwc && s->Q < POOL_SHORT_ROW;
    const int64_t cblocks = (s->C + POOL_PLANES - 1) / POOL_PLANES;
    const int64_t rows = nhwc ? s->N * s->P : s->N * (short_rows ? cblocks : s->C) * s->P;
    int nt = nthreads < 1 ? 1 : nthreads;
    /* a row is cheap: threads only for outputs of ~32K elements times taps and more */
    if ((double)s->N * s->C * s->P * s->Q * s->kh * s->kw < 32768.0) nt = 1;
    const int64_t C = s->C;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
        const int64_t p = row % s->P;
        if (nhwc) {
            const int64_t n = row / s->P;
            if (esz == 8) NHWC_ROW(double); else NHWC_ROW(float);
        } else if (short_rows) {
            const int64_t cb = row / s->P % cblocks, n = row / s->P / cblocks;
            if (esz == 8) NCHW_ROW_SHORT(double); else NCHW_ROW_SHORT(float);
        } else {
            const int64_t c = row / s->P % C, n = row / s->P / C;
            if (esz == 8) NCHW_ROW(double); else NCHW_ROW(float);
        }
    }
}
