/* The forward pass of a dynamically quantized dense layer in one C call (gemm_lowp.h,
 * pytpp_lowp_qlinear): range of x, quantization to uint8, the exact int32 product on pre-packed
 * weights, dequantize + bias (+ relu) on each block of C as the driver finishes it. In Python the
 * passes around the product cost more than the product itself for a few rows (a token at a
 * time); here they are one sweep each. (Measured in one process against a separate epilogue pass
 * over an int32 C: the same time; this way no m x n int32 buffer is needed.)
 *
 * Every float operation is numpy's float32 one of pytpp.quant.QuantizedLinear, in the same order
 * and rounding (no contraction: this file is built without FMA; the passes over x and the
 * epilogue come from the kernel table, quant_rows.inc, compiled for its level without
 * contraction), so the results are the same bits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "pytpp/gemm_lowp.h"

/* The epilogue on a finished block of C whose int32 sums live in y's memory: y = the above, in
 * place, by the kernel table's rows pass (quant_rows.inc, built for its level). */
typedef struct ql_ctx {
    const pytpp_i8_kernels *i8;
    const int32_t *comp;
    const float *s, *bias;
    int relu;
} ql_ctx;

static void ql_block(const void *ctx, void *c, int64_t ldc, int64_t i0, int64_t rows, int64_t j0,
                     int64_t cols)
{
    const ql_ctx *e = (const ql_ctx *)ctx;
    (void)i0;
    e->i8->dequantize_rows(c, ldc, rows, cols, e->comp + j0, e->s + j0,
                           e->bias ? e->bias + j0 : NULL, e->relu);
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
        bad |= ks->i8->x_range(x + i0 * ldx, i1 - i0, k, ldx, &l, &h);
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
        ks->i8->quantize_rows(x + i0 * ldx, i1 - i0, k, ldx, inv, (float)zp, (float)qmax,
                              q + i0 * k);
    }

    return pytpp_lowp_qlinear_u8(ks, q, m, k, k, scale, zp, packed_b, n, colsum, w_scale, bias,
                                 relu, y, ldy, nthreads);
}

int pytpp_lowp_qlinear_u8(const pytpp_lowp_kernels *ks, const uint8_t *q, int64_t m, int64_t k,
                          int64_t ldq, double scale, int zp, const void *packed_b, int64_t n,
                          const int64_t *colsum, const double *w_scale, const float *bias,
                          int relu, float *y, int64_t ldy, int nthreads)
{
    if (m == 0 || n == 0) return 0;
    int32_t *comp = (int32_t *)malloc((size_t)n * (sizeof(int32_t) + sizeof(float)));
    if (!comp) return -1;
    float *s = (float *)(comp + n);
    for (int64_t j = 0; j < n; ++j) {
        comp[j] = (int32_t)(uint32_t)((uint64_t)(-(int64_t)zp) * (uint64_t)colsum[j]);
        s[j] = (float)(scale * w_scale[j]);
    }
    /* C is y's memory: the kernels write the int32 sums there and the epilogue turns each
     * finished block into y while it is in cache (no m x n int32 buffer written, read back) */
    const ql_ctx ctx = {.i8 = ks->i8, .comp = comp, .s = s, .bias = bias, .relu = relu};
    const pytpp_lowp_desc d = {.m = m, .n = n, .k = k, .rsa = ldq, .csa = 1, .g = 1, .ldc = ldy,
                               .a_type = PYTPP_LP_U8, .b_type = PYTPP_LP_S8,
                               .c_type = PYTPP_LP_I32, .accumulate = 0, .b_packed = 1,
                               .epilogue = ql_block, .epi_ctx = &ctx};
    const pytpp_batch bt = {.mode = PYTPP_BATCH_STRIDE, .count = 1};
    const int err = pytpp_lowp_brgemm(ks, &d, q, packed_b, y, &bt, NULL, nthreads);
    free(comp);
    return err;
}
