/* Bodies for the C loop nests (loops.h): 001 Listing 1's GEMM over blocked layouts, and a trace
 * body that records which thread visits which indices (for the tests). */
#include <stdint.h>
#include "pytpp/loops.h"
#include "pytpp/loop_gemm.h"
#include "pytpp/ew_tile.h"
#include "pytpp/partition.h"


/* ind = (K block, M block, N block): C[im][in] (+)= sum over k_step K blocks of A_blk @ B_blk */
static void gemm_body(const int64_t *ind, void *ctx, int tid)
{
    const pytpp_loop_gemm *g = (const pytpp_loop_gemm *)ctx;
    (void)tid;
    const int64_t ik = ind[0], im = ind[1], in = ind[2];
    const int64_t m = imin(g->bm, g->m - im * g->bm), n = imin(g->bn, g->n - in * g->bn);
    const int64_t cnt = imin(g->k_step, g->kb - ik);
    if (m <= 0 || n <= 0 || cnt <= 0) return;
    const int64_t sa = g->bm * g->bk, sb = g->bk * g->bn;
    const pytpp_gemm_desc d = {.m = m, .n = n, .k = g->bk, .rsa = g->bk, .csa = 1,
                               .ldb = g->bn, .csb = 1, .ldc = g->ldc, .dtype = g->dtype,
                               .alpha = 1.0, .beta = ik == 0 ? 0.0 : 1.0};
    const pytpp_batch bt = {.mode = PYTPP_BATCH_STRIDE, .count = cnt, .stride_a = sa,
                            .stride_b = sb};
    pytpp_brgemm(g->gk, NULL, &d, g->a + (im * g->kb + ik) * sa * g->esz,
                 g->b + (in * g->kb + ik) * sb * g->esz,
                 g->c + (im * g->bm * g->ldc + in * g->bn) * g->esz, &bt, 1);
}

int pytpp_loop_gemm_run(const pytpp_loop_nest *n, int nthreads, const pytpp_loop_gemm *g)
{
    return pytpp_loop_run(n, nthreads, gemm_body, (void *)g);
}


static void eqn_body(const int64_t *ind, void *ctx, int tid)
{
    pytpp_loop_eqn *e = (pytpp_loop_eqn *)ctx;
    (void)tid;
    const int64_t i0 = ind[e->row_loop], j0 = ind[e->col_loop];
    const int64_t rows = imin(e->bm, e->m - i0), cols = imin(e->bn, e->n - j0);
    if (rows <= 0 || cols <= 0 || e->p->ninputs > 64) return;
    pytpp_ew_operand in[64];
    for (int q = 0; q < e->p->ninputs; ++q) in[q] = pytpp_ew_at_tile(&e->in[q], i0, j0);
    const pytpp_ew_operand out = pytpp_ew_at_tile(e->out, i0, j0);
    if (pytpp_eqn_run(e->isa, e->p, rows, cols, in, &out, e->strategy, 1)) {
#pragma omp atomic write
        e->err = 1;
    }
}

int pytpp_loop_eqn_run(const pytpp_loop_nest *n, int nthreads, pytpp_loop_eqn *e)
{
    e->err = 0;
    const int r = pytpp_loop_run(n, nthreads, eqn_body, e);
    return r ? r : (e->err ? -1 : 0);
}

static void trace_body(const int64_t *ind, void *ctx, int tid)
{
    pytpp_loop_trace *t = (pytpp_loop_trace *)ctx;
    int64_t pos;
#pragma omp atomic capture
    pos = t->count++;
    if (pos >= t->cap) return;
    int64_t *row = t->rows + pos * (t->nloops + 1);
    row[0] = tid;
    for (int i = 0; i < t->nloops; ++i) row[i + 1] = ind[i];
}

int pytpp_loop_trace_run(const pytpp_loop_nest *n, int nthreads, pytpp_loop_trace *t)
{
    return pytpp_loop_run(n, nthreads, trace_body, t);
}
