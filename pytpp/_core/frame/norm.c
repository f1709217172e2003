/* Normalisation drivers (norm.h): rows split over threads; backward sums per-thread gw/gb
 * partials. No ISA code here: the kernels come from the table the caller picked. */
#include <stdlib.h>
#include <string.h>
#include "pytpp/norm.h"
#include "pytpp/eltwise.h"
#include "pytpp/partition.h"
#include "pytpp/tuning.h"

static int thread_count(int nthreads, int64_t m, int64_t n)
{
    int nt = nthreads < 1 ? 1 : nthreads;
    if (m * n < PYTPP_EW_PAR_MIN_ELEMS) nt = 1;
    if (nt > m) nt = (int)(m > 0 ? m : 1);
    return nt;
}

static inline const char *row(const void *p, int64_t r, int64_t ld, int esz)
{
    return (const char *)p + r * ld * esz;
}

/* Asks for the bytes [p, p + len) to come towards L1: the converted paths run one row at a
 * time, so without this each row's first pass waits on memory. */
static void prefetch_row(const char *p, size_t len)
{
    for (size_t o = 0; o < len; o += 64) __builtin_prefetch(p + o, 0, 3);
}

/* Storage dtype code (enum pytpp_ew_dtype) of a table's compute dtype. */
static int compute_dt(const pytpp_norm_kernels *kt)
{
    return kt->esz == 8 ? PYTPP_EW_F64 : PYTPP_EW_F32;
}

static const int STORAGE_ESZ[PYTPP_EW_NDT] = {[PYTPP_EW_F64] = 8, [PYTPP_EW_F32] = 4,
                                              [PYTPP_EW_BF16] = 2};

/* Rows [r0, r0 + len) one at a time through L1 buffers of the compute dtype: x converted in,
 * the row kernel, y converted out. buf holds 2 n compute elements. */
static void forward_converted(const pytpp_norm_kernels *kt, const pytpp_ew_kernels *ew,
                              pytpp_norm_fwd_fn fwd, int64_t r0, int64_t len, int64_t n,
                              const char *x, int x_dt, int64_t ldx, const void *w, const void *b,
                              double eps, char *y, int y_dt, int64_t ldy, char *mean, char *rstd,
                              char *buf)
{
    const int cdt = compute_dt(kt), esz = kt->esz;
    const int xe = STORAGE_ESZ[x_dt], ye = STORAGE_ESZ[y_dt];
    char *bx = buf, *by = buf + (size_t)n * esz;
    for (int64_t i = r0; i < r0 + len; ++i) {
        const char *xi = x + i * ldx * xe;
        char *yi = y + i * ldy * ye;
        if (i + 1 < r0 + len) prefetch_row(xi + ldx * xe, (size_t)n * xe);
        if (x_dt != cdt) ew->load_cvt[x_dt](n, xi, bx);
        fwd(1, n, x_dt != cdt ? bx : xi, n, w, b, eps, y_dt != cdt ? by : yi, n,
            mean ? mean + i * esz : NULL, rstd + i * esz, 0);
        if (y_dt != cdt) ew->store_cvt[y_dt](n, by, yi);
    }
}

/* A float32 table reads and writes bf16 rows itself (flags); other storage dtypes go through
 * the conversion buffers. */
static int direct_flags(const pytpp_norm_kernels *kt, int x_dt, int y_dt)
{
    const int cdt = compute_dt(kt);
    if (x_dt == cdt && y_dt == cdt) return 0;
    if (cdt != PYTPP_EW_F32 || (x_dt != cdt && x_dt != PYTPP_EW_BF16) ||
        (y_dt != cdt && y_dt != PYTPP_EW_BF16))
        return -1;
    return (x_dt == PYTPP_EW_BF16 ? PYTPP_NORM_X_BF16 : 0) |
           (y_dt == PYTPP_EW_BF16 ? PYTPP_NORM_Y_BF16 : 0);
}

int pytpp_norm_forward(const pytpp_norm_kernels *kt, const pytpp_ew_kernels *ew, int kind,
                       int64_t m, int64_t n, const void *x, int x_dt, int64_t ldx, const void *w,
                       const void *b, double eps, void *y, int y_dt, int64_t ldy, void *mean,
                       void *rstd, int nthreads)
{
    if (m <= 0 || n <= 0) return 0;
    const pytpp_norm_fwd_fn fwd = kind == PYTPP_NORM_RMS ? kt->rms_fwd : kt->layer_fwd;
    const int esz = kt->esz, nt = thread_count(nthreads, m, n);
    const int xe = STORAGE_ESZ[x_dt], ye = STORAGE_ESZ[y_dt];
    const int direct = direct_flags(kt, x_dt, y_dt), converted = direct < 0;
    /* outputs that would push the inputs of whatever runs next out of the caches */
    const int stream = m * n * ye >= PYTPP_EW_STREAM_MIN_BYTES ? PYTPP_NORM_STREAM : 0;
    const int flags = converted ? 0 : direct | stream;
    char *bufs = NULL;
    if (converted && !(bufs = malloc((size_t)nt * 2 * (size_t)n * esz))) return -1;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int64_t r0, len;
        const int t = pytpp_thread_part(m, &r0, &len);
        if (len > 0 && converted)
            forward_converted(kt, ew, fwd, r0, len, n, x, x_dt, ldx, w, b, eps, y, y_dt, ldy,
                              mean, rstd, bufs + (size_t)t * 2 * (size_t)n * esz);
        else if (len > 0)
            fwd(len, n, row(x, r0, ldx, xe), ldx, w, b, eps, (void *)row(y, r0, ldy, ye), ldy,
                mean ? (void *)row(mean, r0, 1, esz) : NULL, (void *)row(rstd, r0, 1, esz),
                flags);
    }
    free(bufs);
    return 0;
}

/* dst[j] += src[j] over n elements of the table's dtype */
static void add_into(int esz, int64_t n, void *dst, const void *src)
{
    if (esz == 8) {
        double *d = dst;
        const double *s = src;
        for (int64_t j = 0; j < n; ++j) d[j] += s[j];
    } else {
        float *d = dst;
        const float *s = src;
        for (int64_t j = 0; j < n; ++j) d[j] += s[j];
    }
}

/* Backward rows [r0, r0 + len) one at a time through L1 buffers (3 n compute elements). */
static void backward_converted(const pytpp_norm_kernels *kt, const pytpp_ew_kernels *ew,
                               pytpp_norm_bwd_fn bwd, int64_t r0, int64_t len, int64_t n,
                               const char *g, int g_dt, int64_t ldg, const char *x, int x_dt,
                               int64_t ldx, const char *mean, const char *rstd, const void *w,
                               char *dx, int dx_dt, int64_t lddx, void *gw, void *gb, char *buf)
{
    const int cdt = compute_dt(kt), esz = kt->esz;
    const int ge = STORAGE_ESZ[g_dt], xe = STORAGE_ESZ[x_dt], de = STORAGE_ESZ[dx_dt];
    char *bg = buf, *bx = buf + (size_t)n * esz, *bd = buf + 2 * (size_t)n * esz;
    for (int64_t i = r0; i < r0 + len; ++i) {
        const char *gi = g + i * ldg * ge, *xi = x + i * ldx * xe;
        char *di = dx + i * lddx * de;
        if (i + 1 < r0 + len) {
            prefetch_row(gi + ldg * ge, (size_t)n * ge);
            prefetch_row(xi + ldx * xe, (size_t)n * xe);
        }
        if (g_dt != cdt) ew->load_cvt[g_dt](n, gi, bg);
        if (x_dt != cdt) ew->load_cvt[x_dt](n, xi, bx);
        bwd(1, n, g_dt != cdt ? bg : gi, n, x_dt != cdt ? bx : xi, n,
            mean ? mean + i * esz : NULL, rstd + i * esz, w, dx_dt != cdt ? bd : di, n, gw, gb, 0);
        if (dx_dt != cdt) ew->store_cvt[dx_dt](n, bd, di);
    }
}

int pytpp_norm_backward(const pytpp_norm_kernels *kt, const pytpp_ew_kernels *ew, int kind,
                        int64_t m, int64_t n, const void *g, int g_dt, int64_t ldg,
                        const void *x, int x_dt, int64_t ldx, const void *mean, const void *rstd,
                        const void *w, void *dx, int dx_dt, int64_t lddx, void *gw, void *gb,
                        int nthreads)
{
    const int esz = kt->esz, cdt = compute_dt(kt);
    if (gw) memset(gw, 0, (size_t)(n > 0 ? n : 0) * esz);
    if (gb) memset(gb, 0, (size_t)(n > 0 ? n : 0) * esz);
    if (m <= 0 || n <= 0) return 0;
    const pytpp_norm_bwd_fn bwd = kind == PYTPP_NORM_RMS ? kt->rms_bwd : kt->layer_bwd;
    const int nt = thread_count(nthreads, m, n);
    const int converted = g_dt != cdt || x_dt != cdt || dx_dt != cdt;
    const int stream = m * n * esz >= PYTPP_EW_STREAM_MIN_BYTES;
    /* threads after the first accumulate into their own zeroed partials; then the conversion
     * buffers, 3 rows per thread */
    const size_t nparts = (size_t)((gw != NULL) + (gb != NULL));
    const size_t part_bytes = (size_t)(nt - 1) * nparts * (size_t)n * esz;
    const size_t buf_bytes = converted ? (size_t)nt * 3 * (size_t)n * esz : 0;
    char *part = NULL;
    if (part_bytes + buf_bytes && !(part = calloc(1, part_bytes + buf_bytes))) return -1;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int64_t r0, len;
        const int t = pytpp_thread_part(m, &r0, &len);
        char *mine = t == 0 ? NULL : part + (size_t)(t - 1) * nparts * (size_t)n * esz;
        void *tgw = !gw ? NULL : t == 0 ? gw : mine;
        void *tgb = !gb ? NULL : t == 0 ? gb : mine + (gw ? (size_t)n * esz : 0);
        if (len > 0 && converted)
            backward_converted(kt, ew, bwd, r0, len, n, g, g_dt, ldg, x, x_dt, ldx, mean, rstd,
                               w, dx, dx_dt, lddx, tgw, tgb,
                               part + part_bytes + (size_t)t * 3 * (size_t)n * esz);
        else if (len > 0)
            bwd(len, n, row(g, r0, ldg, esz), ldg, row(x, r0, ldx, esz), ldx,
                mean ? row(mean, r0, 1, esz) : NULL, row(rstd, r0, 1, esz), w,
                (void *)row(dx, r0, lddx, esz), lddx, tgw, tgb, stream);
    }
    for (int t = 1; t < nt && nparts; ++t) {
        char *mine = part + (size_t)(t - 1) * nparts * (size_t)n * esz;
        if (gw) add_into(esz, n, gw, mine);
        if (gb) add_into(esz, n, gb, mine + (gw ? (size_t)n * esz : 0));
    }
    free(part);
    return 0;
}
