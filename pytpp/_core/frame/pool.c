/* Pooling drivers (pool.h): output rows (forward) or planes and channel chunks (backward)
 * split over threads; the kernels come from the
 * table the caller picked. No ISA code here. */
#include "pytpp/pool.h"
#include "pytpp/partition.h"

int pytpp_pool2d_forward(const pytpp_pool_kernels *kt, int op, int nhwc,
                         const pytpp_pool_shape *s, const void *x, const int64_t xs[3], void *y,
                         int64_t *idx, int nthreads)
{
    if (s->N <= 0 || s->P <= 0 || s->Q <= 0 || s->C <= 0) return 0;
    const int64_t cblocks = (s->C + PYTPP_POOL_PLANES - 1) / PYTPP_POOL_PLANES;
    /* with indices, NCHW rows are never blocks of short rows */
    const int short_rows = !idx && pytpp_pool_short_rows(nhwc, s);
    const int64_t rows = nhwc ? s->N * s->P : s->N * (short_rows ? cblocks : s->C) * s->P;
    int nt = nthreads < 1 ? 1 : nthreads;
    /* a row is cheap: threads only for outputs of ~32K elements times taps and more */
    if ((double)s->N * s->C * s->P * s->Q * s->kh * s->kw < 32768.0) nt = 1;
    if (nt > rows) nt = (int)rows;
    int err = 0;
#pragma omp parallel num_threads(nt) if (nt > 1) reduction(| : err)
    {
        int64_t r0, len;
        pytpp_thread_part(rows, &r0, &len);
        if (len > 0 && idx) err |= kt->argmax_rows(nhwc, s, x, xs, y, idx, r0, r0 + len) != 0;
        else if (len > 0) kt->rows(op, nhwc, s, x, xs, y, r0, r0 + len);
    }
    return err ? -1 : 0;
}

int pytpp_pool2d_backward(const pytpp_pool_kernels *kt, int op, int nhwc,
                          const pytpp_pool_shape *s, const void *g, const void *x,
                          const int64_t *idx, void *gx, int nthreads)
{
    if (s->N <= 0 || s->C <= 0 || s->H <= 0 || s->W <= 0) return 0;
    const int64_t chunks = (s->C + PYTPP_POOL_BWD_CHUNK - 1) / PYTPP_POOL_BWD_CHUNK;
    const int64_t items = !idx && pytpp_pool_bwd_disjoint(nhwc, s) ? s->N * s->P
                        : nhwc ? s->N * chunks : s->N * s->C;
    /* from indices: one add per output, no taps */
    const double work = (double)s->N * s->C *
                        (s->H * s->W + s->P * s->Q * (idx ? 1 : s->kh * s->kw));
    int nt = nthreads < 1 ? 1 : nthreads;
    if (work < 32768.0) nt = 1;
    if (nt > items) nt = (int)items;
    int err = 0, bad = 0;
#pragma omp parallel num_threads(nt) if (nt > 1) reduction(| : err, bad)
    {
        int64_t i0, len;
        pytpp_thread_part(items, &i0, &len);
        if (len > 0 && idx) bad |= kt->scatter(nhwc, s, g, idx, gx, i0, i0 + len) != 0;
        else if (len > 0) err |= kt->backward(op, nhwc, s, g, x, gx, i0, i0 + len) != 0;
    }
    return bad ? PYTPP_POOL_BAD_INDEX : err ? -1 : 0;
}
