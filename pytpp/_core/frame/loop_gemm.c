/* Bodies for the C loop nests (loops.h): 001 Listing 1's GEMM over blocked layouts, and a trace
 * body that records which thread visits which indices (for the tests). */
#include <stdint.h>
#include <string.h>
#include "pytpp/loops.h"
#include "pytpp/loop_gemm.h"
#include "pytpp/ew_tile.h"
#include "pytpp/partition.h"
#include "pytpp/pack.h"


/* ind = (K block, M block, N block): C[im][in] (+)= sum over k_step K blocks of A_blk @ B_blk,
 * one stride-mode BRGEMM per B panel: the panel's rows are one contiguous stream (a 64-wide
 * block of row-major B is read by a 16-wide register block as lines 256 bytes apart, which the
 * hardware prefetchers follow worse: 2048^3 fp32 on AVX2, 0.87x -> 0.92x pytpp.matmul). */
static void gemm_body(const int64_t *ind, void *ctx, int tid)
{
    const pytpp_loop_gemm *g = (const pytpp_loop_gemm *)ctx;
    (void)tid;
    const int64_t ik = ind[0], im = ind[1], in = ind[2];
    const int64_t m = imin(g->bm, g->m - im * g->bm), n = imin(g->bn, g->n - in * g->bn);
    const int64_t cnt = imin(g->k_step, g->kb - ik);
    if (m <= 0 || n <= 0 || cnt <= 0) return;
    const int64_t kp = g->kb * g->bk;
    const pytpp_batch bt = {.mode = PYTPP_BATCH_STRIDE, .count = cnt, .stride_a = g->bk,
                            .stride_b = g->bk * g->pw};
    for (int64_t j = 0; j < n; j += g->pw) {
        const pytpp_gemm_desc d = {.m = m, .n = imin(g->pw, n - j), .k = g->bk, .rsa = g->lda,
                                   .csa = 1, .ldb = g->pw, .csb = 1, .ldc = g->ldc,
                                   .dtype = g->dtype, .alpha = 1.0, .beta = ik == 0 ? 0.0 : 1.0};
        const int64_t col = in * g->bn + j;
        pytpp_brgemm(g->gk, NULL, &d, g->a + (im * g->bm * g->lda + ik * g->bk) * g->esz,
                     g->b + (col * kp + ik * g->bk * g->pw) * g->esz,
                     g->c + (im * g->bm * g->ldc + col) * g->esz, &bt, 1);
    }
}

int64_t pytpp_loop_gemm_panel(const pytpp_gemm_kernels *gk, int64_t bn)
{
    /* the width of the driver's register blocks for an n = bn product (it splits the vectors
     * of a row evenly), when they tile bn exactly; else one panel of bn */
    const int64_t nvec = (bn + gk->vl - 1) / gk->vl;
    const int64_t n_jb = (nvec + gk->nv_main - 1) / gk->nv_main;
    return bn % gk->vl == 0 && nvec % n_jb == 0 ? nvec / n_jb * gk->vl : bn;
}

void pytpp_loop_gemm_pack_b(int dtype, const void *b, int64_t rsb, int64_t csb, int64_t k,
                            int64_t n, int64_t kp, int64_t n_pad, int64_t pw, void *dst,
                            int nthreads)
{
    const int64_t panels = n_pad / pw, esz = dtype == PYTPP_F64 ? 8 : 4;
#pragma omp parallel for num_threads(nthreads) schedule(static) if (nthreads > 1)
    for (int64_t q = 0; q < panels; ++q) {
        char *d = (char *)dst + q * kp * pw * esz;
        const int64_t cols = imin(pw, n - q * pw);
        if (cols > 0) {
            pytpp_pack_b(dtype, 0, (const char *)b + q * pw * csb * esz, rsb, csb, k, cols, pw, d);
            memset(d + k * pw * esz, 0, (size_t)((kp - k) * pw * esz));
        } else {
            memset(d, 0, (size_t)(kp * pw * esz));
        }
    }
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
