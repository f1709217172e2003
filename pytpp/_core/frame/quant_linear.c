/* The forward pass of a dynamically quantized dense layer in one C call (gemm_lowp.h,
 * pytpp_lowp_qlinear): range of x, quantization to uint8, the exact int32 product on pre-packed
 * weights, dequantize + bias (+ relu). In Python the passes around the product cost more than the
 * product itself for a few rows (a token at a time); here they are one sweep each.
 *
 * Every float operation is numpy's float32 one of pytpp.quant.QuantizedLinear, in the same order
 * and rounding (no contraction: this file is built without FMA), so the results are the same
 * bits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "pytpp/gemm_lowp.h"

/* round half to even of a float32 whose magnitude is at most 2^22: adding 1.5 * 2^23 leaves no
 * fraction bits, the default rounding mode rounds ties to even */
static inline float round_even(float t)
{
    const float magic = 12582912.0f;
    return (t + magic) - magic;
}

/* min(x, 0), max(x, 0) over the rows; 1 if some value is NaN or +-inf */
static int x_range(const float *x, int64_t m, int64_t k, int64_t ldx, float *lo, float *hi)
{
    float mn = 0.0f, mx = 0.0f;
    int bad = 0;
    for (int64_t i = 0; i < m; ++i) {
        const float *row = x + i * ldx;
        float rmn = mn, rmx = mx, acc = 0.0f;
        for (int64_t p = 0; p < k; ++p) {
            const float v = row[p];
            rmn = v < rmn ? v : rmn;
            rmx = v > rmx ? v : rmx;
            acc += v - v;               /* NaN when v is NaN or infinite, else 0 */
        }
        bad |= acc != 0.0f;             /* NaN != 0 */
        mn = rmn;
        mx = rmx;
    }
    *lo = mn;
    *hi = mx;
    return bad;
}

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

static void epilogue_rows(const int32_t *acc, int64_t i0, int64_t i1, int64_t n, const float *s,
                          const float *bias, int relu, float *y, int64_t ldy)
{
    for (int64_t i = i0; i < i1; ++i) {
        const int32_t *a = acc + i * n;
        float *out = y + i * ldy;
        if (bias)
            for (int64_t j = 0; j < n; ++j) {
                const float p = (float)a[j] * s[j];
                out[j] = p + bias[j];
            }
        else
            for (int64_t j = 0; j < n; ++j) out[j] = (float)a[j] * s[j];
        if (relu)
            for (int64_t j = 0; j < n; ++j) out[j] = out[j] > 0.0f ? out[j] : 0.0f;
    }
}

int pytpp_lowp_qlinear(const pytpp_lowp_kernels *ks, const float *x, int64_t m, int64_t k,
                       int64_t ldx, int qmax, const void *packed_b, int64_t n,
                       const int64_t *colsum, const double *w_scale, const float *bias, int relu,
                       float *y, int64_t ldy, uint8_t *q, int32_t *acc, int nthreads,
                       double *scale_out, int *zp_out)
{
    float lo32, hi32;
    if (x_range(x, m, k, ldx, &lo32, &hi32)) return -3;
    /* the parameters in double, as Python computes them */
    const double lo = lo32, hi = hi32;
    const double scale = hi > lo ? (hi - lo) / qmax : 1.0;
    double zpd = nearbyint(-lo / scale);
    zpd = zpd < 0 ? 0 : (zpd > qmax ? qmax : zpd);
    const int zp = (int)zpd;
    *scale_out = scale;
    *zp_out = zp;
    if (m == 0 || n == 0) return 0;

    quantize_rows(x, m, k, ldx, (float)(1.0 / scale), (float)zp, (float)qmax, q);

    int32_t *comp = (int32_t *)malloc((size_t)n * (sizeof(int32_t) + sizeof(float)));
    if (!comp) return -1;
    float *s = (float *)(comp + n);
    for (int64_t j = 0; j < n; ++j) {
        comp[j] = (int32_t)(uint32_t)((uint64_t)(-(int64_t)zp) * (uint64_t)colsum[j]);
        s[j] = (float)(scale * w_scale[j]);
    }
    const pytpp_lowp_desc d = {.m = m, .n = n, .k = k, .rsa = k, .csa = 1, .g = 1, .ldc = n,
                               .a_type = PYTPP_LP_U8, .b_type = PYTPP_LP_S8,
                               .c_type = PYTPP_LP_I32, .accumulate = 0, .b_packed = 1};
    const pytpp_batch bt = {.mode = PYTPP_BATCH_STRIDE, .count = 1};
    int err = pytpp_lowp_brgemm(ks, &d, q, packed_b, acc, &bt, comp, nthreads);
    if (!err) {
        const int nt = m * n >= (1 << 16) && nthreads > 1 ? nthreads : 1;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
        for (int t = 0; t < nt; ++t)
            epilogue_rows(acc, m * t / nt, m * (t + 1) / nt, n, s, bias, relu, y, ldy);
    }
    free(comp);
    return err;
}
