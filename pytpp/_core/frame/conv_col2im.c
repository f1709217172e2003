/* The column-to-image sum of a backward by data computed as one GEMM (conv.h): for layers whose
 * input has too few channels to fill a register tile's columns. */
#include "pytpp/conv.h"

#define COL2IM_LOOP(T)                                                                          \
    do {                                                                                        \
        const T *cl = (const T *)cols;                                                          \
        T *dx = (T *)x;                                                                         \
        _Pragma("omp parallel for num_threads(nthreads) if (nthreads > 1) schedule(static)")   \
        for (int64_t nh = 0; nh < N * nrows; ++nh) {                                            \
            const int64_t n = nh / nrows, h = h0 + nh % nrows;                                  \
            T *row = dx + (n * H + h) * W * C;                                                  \
            for (int64_t r = 0; r < R; ++r) {                                                   \
                const int64_t hp = h + pt - r * dh - p0 * sh;   /* = (p - p0) * sh */          \
                if (hp < 0 || hp % sh != 0 || hp / sh >= P) continue;                           \
                const T *cp = cl + ((n * P + hp / sh) * Q * R + r) * S * C;                     \
                for (int64_t q = 0; q < Q; ++q, cp += R * S * C) {                              \
                    for (int64_t s = 0; s < S; ++s) {                                           \
                        const int64_t w = q * sw + s * dw - pl;                                 \
                        if (w < 0 || w >= W) continue;                                          \
                        T *d = row + w * C;                                                     \
                        const T *v = cp + s * C;                                                \
                        for (int64_t c = 0; c < C; ++c) d[c] += v[c];                           \
                    }                                                                           \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
    } while (0)

void pytpp_conv_col2im_nhwc(int64_t esz, int64_t N, int64_t H, int64_t W, int64_t C, int64_t p0,
                            int64_t P, int64_t Q, int64_t R, int64_t S, int64_t sh, int64_t sw,
                            int64_t dh, int64_t dw, int64_t pt, int64_t pl, const void *cols,
                            void *x, int nthreads)
{
    /* the input rows output rows [p0, p0 + P) reach */
    int64_t h0 = p0 * sh - pt, h1 = (p0 + P - 1) * sh + (R - 1) * dh - pt + 1;
    if (h0 < 0) h0 = 0;
    if (h1 > H) h1 = H;
    const int64_t nrows = h1 - h0;
    if (nrows <= 0 || P <= 0) return;
    if (esz == 8) COL2IM_LOOP(double); else COL2IM_LOOP(float);
}
