/* The 2D drivers of the (De)Quantize TPPs (eltwise.h): rows cut into chunks of CHUNK elements,
 * contiguous runs of chunks per thread, the row kernels of eltwise_quant.inc on each. */
#include "pytpp/eltwise.h"
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* elements per chunk: the bfloat16 output's float32 buffer stays in L1 */
#define CHUNK 4096
/* below this many elements a call runs on one thread (a parallel region costs ~2 us) */
#define PAR_MIN 65536

static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

static int team_size(int64_t m, int64_t n, int64_t chunks, int nthreads)
{
    if (nthreads < 1 || m * n < PAR_MIN) return 1;
    return (int)imin(nthreads, chunks);
}

/* this thread's contiguous run [c0, c1) of `count` chunks (inside a parallel region) */
static void thread_chunks(int64_t count, int64_t *c0, int64_t *c1)
{
    const int t = omp_get_thread_num(), T = omp_get_num_threads();
    *c0 = count * t / T;
    *c1 = count * (t + 1) / T;
}

/* entries of s and z */
static int64_t param_count(int pmode, int64_t n, int64_t period)
{
    return pmode == 1 ? n : (pmode == 2 ? period : 1);
}

/* offset into s / z of element (i, j0)'s parameters */
static int64_t param_at(int pmode, int64_t period, int64_t i, int64_t j0)
{
    return pmode == 1 ? j0 : (pmode == 2 ? i % period : 0);
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
    int fast = x_dt != PYTPP_EW_F64;
    for (int64_t k = 0; fast && k < np; ++k) fast = s[k] >= 0x1p-100 && s[k] <= 0x1p100;
    float *pf = fast ? (float *)malloc((size_t)(2 * np) * sizeof(float)) : NULL;
    if (fast && !pf) return -1;
    for (int64_t k = 0; fast && k < np; ++k) {
        pf[k] = (float)(1.0 / s[k]);
        pf[np + k] = (float)z[k];
    }
    const int64_t per_row = (n + CHUNK - 1) / CHUNK, chunks = m * per_row;
    const int nt = team_size(m, n, chunks, nthreads);
    int nan = 0;
#pragma omp parallel num_threads(nt) if (nt > 1) reduction(| : nan)
    {
        int64_t c0, c1;
        thread_chunks(chunks, &c0, &c1);
        for (int64_t c = c0; c < c1; ++c) {
            const int64_t i = c / per_row, j0 = (c % per_row) * CHUNK;
            const int64_t p = param_at(pmode, period, i, j0), len = imin(CHUNK, n - j0);
            const char *xp = (const char *)x + (i * ldx + j0) * esz;
            uint8_t *qp = q + i * ldq + j0;
            if (fast)
                nan |= kt32->quantize_f32(len, xp, x_dt, qp, pf + p, pf + np + p, s + p, z + p,
                                          pmode == 1, qmin, qmax, kt64->quantize);
            else
                nan |= kt64->quantize(len, xp, x_dt, qp, s + p, z + p, pmode == 1, qmin, qmax);
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
    const int64_t per_row = (n + CHUNK - 1) / CHUNK, chunks = m * per_row;
    const int nt = team_size(m, n, chunks, nthreads);
    int err = 0;
#pragma omp parallel num_threads(nt) if (nt > 1) reduction(| : err)
    {
        int64_t c0, c1;
        thread_chunks(chunks, &c0, &c1);
        float *buf = y_dt == PYTPP_EW_BF16 ? (float *)malloc(CHUNK * sizeof(float)) : NULL;
        if (y_dt == PYTPP_EW_BF16 && !buf) err = 1;
        for (int64_t c = c0; c < c1 && !err; ++c) {
            const int64_t i = c / per_row, j0 = (c % per_row) * CHUNK;
            const int64_t len = imin(CHUNK, n - j0), p = param_at(pmode, period, i, j0);
            char *yp = (char *)y + (i * ldy + j0) * ysz;
            kt->dequantize(len, (const char *)q + (i * ldq + j0) * qsz, q_dt, buf ? (void *)buf : yp,
                           sc + p * csz, zc + p * csz, z + p, pmode == 1);
            if (buf) kt->store_cvt[PYTPP_EW_BF16](len, buf, yp);
        }
        free(buf);
    }
    free(pc);
    return err ? -1 : 0;
}
