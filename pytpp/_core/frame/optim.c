/* Optimizer-step driver (optim.h): the elements split over threads in chunks of whole cache
 * lines, each chunk one kernel call. No ISA code here. */
#include <stddef.h>
#include "pytpp/optim.h"
#include "pytpp/partition.h"
#include "pytpp/tuning.h"

/* Elements [j0, j0 + len) of the step. */
static void run_chunk(const pytpp_optim_kernels *kt, const pytpp_optim_step *s, int64_t j0,
                      int64_t len, int stream)
{
    const int64_t off = j0 * kt->esz;
    switch (s->kind) {
    case PYTPP_OPTIM_SGD:
        kt->sgd(len, (char *)s->p + off, (const char *)s->g + off,
                s->buf ? (char *)s->buf + off : NULL, s->lr, s->momentum, s->wd, stream);
        break;
    case PYTPP_OPTIM_ADAMW:
        kt->adamw(len, (char *)s->p + off, (const char *)s->g + off, (char *)s->m + off,
                  (char *)s->v + off, s->lr, s->b1, s->b2, s->eps, s->wd, s->bc1, s->bc2_sqrt,
                  stream);
        break;
    default:
        kt->split_sgd(len, s->hi + j0, s->lo + j0,
                      (const char *)s->g + j0 * (s->g_bf16 ? 2 : 4), s->g_bf16, s->lr);
    }
}

void pytpp_optim_run(const pytpp_optim_kernels *kt, const pytpp_optim_step *s, int nthreads)
{
    if (s->n <= 0) return;
    const int64_t line = 64 / 2;                 /* elements per chunk unit: a line of bf16 */
    const int64_t units = (s->n + line - 1) / line;
    int nt = nthreads < 1 ? 1 : nthreads;
    if (s->n < PYTPP_EW_PAR_MIN_ELEMS) nt = 1;
    if (nt > units) nt = (int)units;
    /* state beyond the caches: written back by streaming stores */
    const int stream = s->n * kt->esz >= PYTPP_EW_STREAM_MIN_BYTES;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int64_t u0, ulen;
        pytpp_thread_part(units, &u0, &ulen);
        int64_t j0 = u0 * line, j1 = (u0 + ulen) * line;
        if (j1 > s->n) j1 = s->n;
        if (j1 > j0) run_chunk(kt, s, j0, j1 - j0, stream);
    }
}
