/* The forward pass of a dynamically quantized dense layer in one C call (gemm_lowp.h,
 * pytpp_lowp_qlinear): range of x, quantization to uint8, the exact int32 product on pre-packed
 * weights, dequantize + bias (+ relu) on each block of C as the driver finishes it. In Python the
 * passes around the product cost more than the product itself for a few rows (a token at a
 * time); here they are one sweep each. (Measured in one process against a separate epilogue pass
 * over an int32 C: the same time; this way no m x n int32 buffer is needed.)
 *
 * Every float operation is numpy's float32 one of pytpp.quant.QuantizedLinear, in the same order
 * and rounding (no contraction: this file is built without FMA), so the results are the same
 * bits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "pytpp/gemm_lowp.h"

/* The selects below (clamps, min / max) may then become vector blends: no float exception
 * state is read anywhere in pytpp, and the values are the same. */
#pragma GCC optimize("no-trapping-math")

/* round half to even of a float32 whose magnitude is at most 2^22: adding 1.5 * 2^23 leaves no
 * fraction bits, the default rounding mode rounds ties to even */
static inline float round_even(float t)
{
    const float magic = 12582912.0f;
    return (t + magic) - magic;
}

/* min(x, 0), max(x, 0) over the rows; 1 if some value is NaN or +-inf (exponent all ones).
 * Vectorized as min / max reductions, which GCC does only when it may ignore NaN and the sign of
 * zero: NaN / inf are caught by the integer test (and x is then rejected), and a -0 minimum
 * gives the same scale and zero point as +0. */
#pragma GCC push_options
#pragma GCC optimize("finite-math-only", "no-signed-zeros")
static int x_range(const float *x, int64_t m, int64_t k, int64_t ldx, float *lo, float *hi)
{
    float mn = 0.0f, mx = 0.0f;
    uint32_t bad = 0;
    for (int64_t i = 0; i < m; ++i) {
        const float *row = x + i * ldx;
        float rmn = mn, rmx = mx;
        for (int64_t p = 0; p < k; ++p) {
            const float v = row[p];
            uint32_t u;
            memcpy(&u, &v, 4);
            rmn = v < rmn ? v : rmn;
            rmx = v > rmx ? v : rmx;
            bad |= (u & 0x7f800000u) == 0x7f800000u;
        }
        mn = rmn;
        mx = rmx;
    }
    *lo = mn;
    *hi = mx;
    return bad != 0;
}
#pragma GCC pop_options

static void quantize_rows(const float *x, int64_t m, int64_t k, int64_t ldx, float inv, float zp,
                          float qmax, uint8_t *q)
{
    const float big = 4194304.0f;       /* 2^22: beyond it the clip below decides alone */
    for (int64_t i = 0; i < m; ++i) {
        const float *row = x + i * ldx;
        uint8_t *out = q + i * k;
        for (int64_t p = 0; p < k; ++p) {
            float t = row[p] * inv;
            t = t < -big ? -big : (t > big ? big : t);
            t = round_even(t) + zp;
            t = t < 0.0f ? 0.0f : (t > qmax ? qmax : t);
            out[p] = (uint8_t)(int)t;
        }
    }
}

/* The epilogue on a finished block of C whose int32 sums live in y's memory: y = the above, in
 * place (memcpy reads and writes the 4 bytes without type punning). */
typedef struct ql_ctx {
    const int32_t *comp;
    const float *s, *bias;
    int relu;
} ql_ctx;

static void ql_block(const void *ctx, void *c, int64_t ldc, int64_t i0, int64_t rows, int64_t j0,
                     int64_t cols)
{
    const ql_ctx *e = (const ql_ctx *)ctx;
    const int32_t *comp = e->comp + j0;
    const float *s = e->s + j0, *bias = e->bias ? e->bias + j0 : NULL;
    (void)i0;
    for (int64_t i = 0; i < rows; ++i) {
        char *row = (char *)c + i * ldc * 4;
        for (int64_t j = 0; j < cols; ++j) {
            int32_t v;
            memcpy(&v, row + 4 * j, 4);
            const float p = (float)(int32_t)((uint32_t)v + (uint32_t)comp[j]) * s[j];
            memcpy(row + 4 * j, &p, 4);
        }
        float *out = (float *)row;      /* float from here on */
        if (bias)
            for (int64_t j = 0; j < cols; ++j) out[j] = out[j] + bias[j];
        if (e->relu)
            for (int64_t j = 0; j < cols; ++j) out[j] = out[j] > 0.0f ? out[j] : 0.0f;
    }
}

int pytpp_lowp_qlinear(const pytpp_lowp_kernels *ks, const float *x, int64_t m, int64_t k,
                       int64_t ldx, int qmax, const void *packed_b, int64_t n,
                       const int64_t *colsum, const double *w_scale, const float *bias, int relu,
                       float *y, int64_t ldy, uint8_t *q, int nthreads, double *scale_out,
                       int *zp_out)
{
    /* the passes over x and y split the rows between threads when they are long enough to pay
     * for a team (a few hundred microseconds) */
    const int nt = (double)m * (double)(k > n ? k : n) >= 524288.0 && nthreads > 1 && m > 1
                       ? (nthreads < m ? nthreads : (int)m) : 1;
    float lo32 = 0.0f, hi32 = 0.0f;
    int bad = 0;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1) \
    reduction(min : lo32) reduction(max : hi32) reduction(| : bad)
#endif
    for (int t = 0; t < nt; ++t) {
        const int64_t i0 = m * t / nt, i1 = m * (t + 1) / nt;
        float l, h;
        bad |= x_range(x + i0 * ldx, i1 - i0, k, ldx, &l, &h);
        lo32 = l < lo32 ? l : lo32;
        hi32 = h > hi32 ? h : hi32;
    }
    if (bad) return -3;
    /* the parameters in double, as Python computes them */
    const double lo = lo32, hi = hi32;
    const double scale = hi > lo ? (hi - lo) / qmax : 1.0;
    double zpd = nearbyint(-lo / scale);
    zpd = zpd < 0 ? 0 : (zpd > qmax ? qmax : zpd);
    const int zp = (int)zpd;
    *scale_out = scale;
    *zp_out = zp;
    if (m == 0 || n == 0) return 0;

    const float inv = (float)(1.0 / scale);
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (int t = 0; t < nt; ++t) {
        const int64_t i0 = m * t / nt, i1 = m * (t + 1) / nt;
        quantize_rows(x + i0 * ldx, i1 - i0, k, ldx, inv, (float)zp, (float)qmax, q + i0 * k);
    }

    int32_t *comp = (int32_t *)malloc((size_t)n * (sizeof(int32_t) + sizeof(float)));
    if (!comp) return -1;
    float *s = (float *)(comp + n);
    for (int64_t j = 0; j < n; ++j) {
        comp[j] = (int32_t)(uint32_t)((uint64_t)(-(int64_t)zp) * (uint64_t)colsum[j]);
        s[j] = (float)(scale * w_scale[j]);
    }
    /* C is y's memory: the kernels write the int32 sums there and the epilogue turns each
     * finished block into y while it is in cache (no m x n int32 buffer written, read back) */
    const ql_ctx ctx = {.comp = comp, .s = s, .bias = bias, .relu = relu};
    const pytpp_lowp_desc d = {.m = m, .n = n, .k = k, .rsa = k, .csa = 1, .g = 1, .ldc = ldy,
                               .a_type = PYTPP_LP_U8, .b_type = PYTPP_LP_S8,
                               .c_type = PYTPP_LP_I32, .accumulate = 0, .b_packed = 1,
                               .epilogue = ql_block, .epi_ctx = &ctx};
    const pytpp_batch bt = {.mode = PYTPP_BATCH_STRIDE, .count = 1};
    const int err = pytpp_lowp_brgemm(ks, &d, q, packed_b, y, &bt, NULL, nthreads);
    free(comp);
    return err;
}
