/* Normalisation drivers (norm.h): rows split over threads; backward sums per-thread gw/gb
 * partials. No ISA code here: the kernels come from the table the caller picked. */
#include <stdlib.h>
#include <string.h>
#include "pytpp/norm.h"
#include "pytpp/partition.h"
#include "pytpp/tuning.h"
#ifdef _OPENMP
#include <omp.h>
#endif

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

int pytpp_norm_forward(const pytpp_norm_kernels *kt, int kind, int64_t m, int64_t n,
                       const void *x, int64_t ldx, const void *w, const void *b, double eps,
                       void *y, int64_t ldy, void *mean, void *rstd, int nthreads)
{
    if (m <= 0 || n <= 0) return 0;
    const pytpp_norm_fwd_fn fwd = kind == PYTPP_NORM_RMS ? kt->rms_fwd : kt->layer_fwd;
    const int esz = kt->esz, nt = thread_count(nthreads, m, n);
    /* outputs that would push the inputs of whatever runs next out of the caches */
    const int stream = m * n * esz >= PYTPP_EW_STREAM_MIN_BYTES;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int t = 0, T = 1;
#ifdef _OPENMP
        t = omp_get_thread_num();
        T = omp_get_num_threads();
#endif
        int64_t r0, len;
        pytpp_split(m, T, t, &r0, &len);
        if (len > 0)
            fwd(len, n, row(x, r0, ldx, esz), ldx, w, b, eps, (void *)row(y, r0, ldy, esz), ldy,
                mean ? (void *)row(mean, r0, 1, esz) : NULL, (void *)row(rstd, r0, 1, esz),
                stream);
    }
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

int pytpp_norm_backward(const pytpp_norm_kernels *kt, int kind, int64_t m, int64_t n,
                        const void *g, int64_t ldg, const void *x, int64_t ldx, const void *mean,
                        const void *rstd, const void *w, void *dx, int64_t lddx, void *gw,
                        void *gb, int nthreads)
{
    const int esz = kt->esz;
    if (gw) memset(gw, 0, (size_t)(n > 0 ? n : 0) * esz);
    if (gb) memset(gb, 0, (size_t)(n > 0 ? n : 0) * esz);
    if (m <= 0 || n <= 0) return 0;
    const pytpp_norm_bwd_fn bwd = kind == PYTPP_NORM_RMS ? kt->rms_bwd : kt->layer_bwd;
    const int nt = thread_count(nthreads, m, n);
    const int stream = m * n * esz >= PYTPP_EW_STREAM_MIN_BYTES;
    /* threads after the first accumulate into their own zeroed partials */
    const int64_t nparts = (gw != NULL) + (gb != NULL);
    char *part = NULL;
    if (nt > 1 && nparts) {
        part = calloc((size_t)(nt - 1) * (size_t)nparts * (size_t)n, (size_t)esz);
        if (!part) return -1;
    }
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int t = 0, T = 1;
#ifdef _OPENMP
        t = omp_get_thread_num();
        T = omp_get_num_threads();
#endif
        int64_t r0, len;
        pytpp_split(m, T, t, &r0, &len);
        char *mine = t == 0 ? NULL : part + (size_t)(t - 1) * (size_t)nparts * (size_t)n * esz;
        void *tgw = !gw ? NULL : t == 0 ? gw : mine;
        void *tgb = !gb ? NULL : t == 0 ? gb : mine + (gw ? (size_t)n * esz : 0);
        if (len > 0)
            bwd(len, n, row(g, r0, ldg, esz), ldg, row(x, r0, ldx, esz), ldx,
                mean ? row(mean, r0, 1, esz) : NULL, row(rstd, r0, 1, esz), w,
                (void *)row(dx, r0, lddx, esz), lddx, tgw, tgb, stream);
    }
    for (int t = 1; t < nt && part; ++t) {
        char *mine = part + (size_t)(t - 1) * (size_t)nparts * (size_t)n * esz;
        if (gw) add_into(esz, n, gw, mine);
        if (gb) add_into(esz, n, gb, mine + (gw ? (size_t)n * esz : 0));
    }
    free(part);
    return 0;
}
