/* The 2D drivers of the (De)Quantize TPPs (eltwise.h): rows cut into chunks of CHUNK elements,
 * contiguous runs of chunks per thread, the row kernels of eltwise_quant.inc on each. */
#include "pytpp/eltwise.h"
#include "pytpp/partition.h"
#include "pytpp/tuning.h"
#include <stdlib.h>

/* elements per chunk: the bfloat16 output's float32 buffer stays in L1 */
#define CHUNK 4096

/* Rows of n elements cut into chunks of CHUNK, and the threads that share them */
typedef struct chunk_plan {
    int64_t per_row, count;
    int nt;
} chunk_plan;

static chunk_plan plan_chunks(int64_t m, int64_t n, int nthreads)
{
    chunk_plan p = {.per_row = cdiv(n, CHUNK)};
    p.count = m * p.per_row;
    p.nt = nthreads < 1 || m * n < PYTPP_EW_PAR_MIN_ELEMS ? 1 : (int)imin(nthreads, p.count);
    return p;
}

/* chunk c: its row i, first column j0 and length */
static int64_t chunk_at(const chunk_plan *p, int64_t n, int64_t c, int64_t *i, int64_t *j0)
{
    *i = c / p->per_row;
    *j0 = (c % p->per_row) * CHUNK;
    return imin(CHUNK, n - *j0);
}

/* entries of s and z */
static int64_t param_count(int pmode, int64_t n, int64_t period)
{
    return pmode == PYTPP_Q_PER_COLUMN ? n : (pmode == PYTPP_Q_PER_ROW ? period : 1);
}

/* offset into s / z of element (i, j0)'s parameters */
static int64_t param_at(int pmode, int64_t period, int64_t i, int64_t j0)
{
    return pmode == PYTPP_Q_PER_COLUMN ? j0 : (pmode == PYTPP_Q_PER_ROW ? i % period : 0);
}

int pytpp_ew_quantize(const pytpp_ew_kernels *kt32, const pytpp_ew_kernels *kt64, int64_t m,
                      int64_t n, const void *x, int64_t ldx, int x_dt, uint8_t *q, int64_t ldq,
                      int q_signed, const double *s, const double *z, int pmode, int64_t period,
                      int nthreads)
{
    if (m <= 0 || n <= 0) return 0;
    const int esz = x_dt == PYTPP_EW_F64 ? 8 : (x_dt == PYTPP_EW_F32 ? 4 : 2);
    const double qmin = q_signed ? -128.0 : 0.0, qmax = q_signed ? 127.0 : 255.0;
    /* float32 / bfloat16 x: the float32 kernel, with 1 / s and z as float32, where every 1 / s
     * is a normal float32 (its error bound assumes a full mantissa) */
    const int64_t np = param_count(pmode, n, period);
    const int pv = pmode == PYTPP_Q_PER_COLUMN;     /* parameters vary along a row */
    int fast = x_dt != PYTPP_EW_F64;
    for (int64_t k = 0; fast && k < np; ++k) fast = s[k] >= 0x1p-100 && s[k] <= 0x1p100;
    float *pf = fast ? (float *)malloc((size_t)(2 * np) * sizeof(float)) : NULL;
    if (fast && !pf) return -1;
    for (int64_t k = 0; fast && k < np; ++k) {
        pf[k] = (float)(1.0 / s[k]);
        pf[np + k] = (float)z[k];
    }
    const chunk_plan cp = plan_chunks(m, n, nthreads);
    int nan = 0;
#pragma omp parallel num_threads(cp.nt) if (cp.nt > 1) reduction(| : nan)
    {
        int64_t c0, nc, i, j0;
        pytpp_thread_part(cp.count, &c0, &nc);
        for (int64_t c = c0; c < c0 + nc; ++c) {
            const int64_t len = chunk_at(&cp, n, c, &i, &j0);
            const int64_t p = param_at(pmode, period, i, j0);
            const char *xp = (const char *)x + (i * ldx + j0) * esz;
            uint8_t *qp = q + i * ldq + j0;
            if (fast)
                nan |= kt32->quantize_f32(len, xp, x_dt, qp, pf + p, pf + np + p, s + p, z + p,
                                          pv, qmin, qmax, kt64->quantize);
            else
                nan |= kt64->quantize(len, xp, x_dt, qp, s + p, z + p, pv, qmin, qmax);
        }
    }
    free(pf);
    return nan ? 1 : 0;
}

int pytpp_ew_dequantize(const pytpp_ew_kernels *kt, int64_t m, int64_t n, const void *q,
                        int64_t ldq, int q_dt, void *y, int64_t ldy, int y_dt, const double *s,
                        const double *z, int pmode, int64_t period, int nthreads)
{
    if (m <= 0 || n <= 0) return 0;
    const int qsz = q_dt == PYTPP_Q_I32 ? 4 : 1;
    const int f32 = kt->dtype == PYTPP_EW_F32;
    const int csz = f32 ? 4 : 8, ysz = y_dt == PYTPP_EW_BF16 ? 2 : csz;
    /* the parameters in the compute dtype, as numpy's scale.astype(dtype) */
    const int64_t np = param_count(pmode, n, period);
    const int pv = pmode == PYTPP_Q_PER_COLUMN;     /* parameters vary along a row */
    char *pc = (char *)malloc((size_t)(2 * np * csz));
    if (!pc) return -1;
    char *sc = pc, *zc = pc + np * csz;
    for (int64_t k = 0; k < np; ++k) {
        if (f32) {
            ((float *)sc)[k] = (float)s[k];
            ((float *)zc)[k] = (float)z[k];
        } else {
            ((double *)sc)[k] = s[k];
            ((double *)zc)[k] = z[k];
        }
    }
    const chunk_plan cp = plan_chunks(m, n, nthreads);
    int err = 0;
#pragma omp parallel num_threads(cp.nt) if (cp.nt > 1) reduction(| : err)
    {
        int64_t c0, nc, i, j0;
        pytpp_thread_part(cp.count, &c0, &nc);
        float *buf = y_dt == PYTPP_EW_BF16 ? (float *)malloc(CHUNK * sizeof(float)) : NULL;
        if (y_dt == PYTPP_EW_BF16 && !buf) err = 1;
        for (int64_t c = c0; c < c0 + nc && !err; ++c) {
            const int64_t len = chunk_at(&cp, n, c, &i, &j0);
            const int64_t p = param_at(pmode, period, i, j0);
            const char *qp = (const char *)q + (i * ldq + j0) * qsz;
            char *yp = (char *)y + (i * ldy + j0) * ysz;
            kt->dequantize(len, qp, q_dt, buf ? (void *)buf : yp, sc + p * csz, zc + p * csz,
                           z + p, pv);
            if (buf) kt->store_cvt[PYTPP_EW_BF16](len, buf, yp);
        }
        free(buf);
    }
    free(pc);
    return err ? -1 : 0;
}
