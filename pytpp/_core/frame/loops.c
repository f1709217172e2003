/* The loop-nest walker of loops.h: one OpenMP parallel region, each thread walking the levels
 * recursively; the collapsed group's iterations enumerated per encounter and shared under the
 * schedule (dynamic chunks from a counter per encounter), grid levels split in blocks, orphaned
 * barriers where the string has '|'. */
#include <stdlib.h>
#include <string.h>
#include "pytpp/loops.h"
#ifdef _OPENMP
#include <omp.h>
#include "pytpp/partition.h"
#endif

typedef struct walk {
    const pytpp_loop_nest *n;
    pytpp_loop_body body;
    void *ctx;
    int tid, nt, g0, g1;     /* the collapsed group's levels [g0, g1) */
    int64_t ind[PYTPP_LOOP_MAX_LOOPS];
    int64_t *space;          /* this thread's enumeration of a group instance */
    int64_t cap;             /* tuples it holds */
    int64_t enc;             /* group instances met so far */
    int64_t *counters;       /* dynamic schedules: next position per instance */
    int64_t ncounters;
    int err;
} walk;


static inline void level_range(const walk *w, int k, int64_t *lo, int64_t *hi)
{
    const pytpp_loop_level *lv = &w->n->lv[k];
    if (lv->first) {
        *lo = w->n->start[lv->loop];
        *hi = w->n->end[lv->loop];
    } else {
        *lo = w->ind[lv->loop];
        *hi = imin(*lo + lv->block, w->n->end[lv->loop]);
    }
}

static inline int64_t trips(int64_t lo, int64_t hi, int64_t step)
{
    return hi > lo ? (hi - lo + step - 1) / step : 0;
}

/* the group's iterations in nest order, each as (g1 - g0) values, into w->space; returns count */
static int64_t enumerate(walk *w, int k, int64_t count)
{
    const pytpp_loop_nest *n = w->n;
    if (k == w->g1) {
        if (count < w->cap)
            for (int q = w->g0; q < w->g1; ++q)
                w->space[count * (w->g1 - w->g0) + (q - w->g0)] = w->ind[n->lv[q].loop];
        return count + 1;
    }
    const int loop = n->lv[k].loop;
    const int64_t saved = w->ind[loop];
    int64_t lo, hi;
    level_range(w, k, &lo, &hi);
    for (int64_t v = lo; v < hi; v += n->lv[k].step) {
        w->ind[loop] = v;
        count = enumerate(w, k + 1, count);
    }
    w->ind[loop] = saved;
    return count;
}

static void walk_level(walk *w, int k);

static void run_tuple(walk *w, int64_t i)
{
    const pytpp_loop_nest *n = w->n;
    int64_t saved[PYTPP_LOOP_MAX_LEVELS];
    for (int q = w->g0; q < w->g1; ++q) saved[q] = w->ind[n->lv[q].loop];
    for (int q = w->g0; q < w->g1; ++q)
        w->ind[n->lv[q].loop] = w->space[i * (w->g1 - w->g0) + (q - w->g0)];
    walk_level(w, w->g1);
    for (int q = w->g1 - 1; q >= w->g0; --q) w->ind[n->lv[q].loop] = saved[q];
}

static void run_group(walk *w)
{
    const pytpp_loop_nest *n = w->n;
    const int64_t total = enumerate(w, w->g0, 0);
    const int64_t enc = w->enc++;
    if (total > w->cap) {   /* grow this thread's buffer (the same on every thread) */
        free(w->space);
        w->cap = total;
        w->space = (int64_t *)malloc(sizeof(int64_t) * (size_t)(total * (w->g1 - w->g0)));
        if (!w->space) { w->err = 1; w->cap = 0; return; }
        enumerate(w, w->g0, 0);
    }
    const int nt = w->nt, t = w->tid;
    const int64_t chunk = n->chunk;
    if (n->sched == PYTPP_LOOP_STATIC) {
        if (chunk <= 0) {
            const int64_t base = total / nt, extra = total % nt;
            const int64_t s = t * base + (t < extra ? t : extra);
            const int64_t e = s + base + (t < extra);
            for (int64_t i = s; i < e; ++i) run_tuple(w, i);
        } else {
            for (int64_t c0 = t * chunk; c0 < total; c0 += (int64_t)nt * chunk)
                for (int64_t i = c0; i < imin(c0 + chunk, total); ++i) run_tuple(w, i);
        }
    } else {
        if (enc >= w->ncounters) { w->err = 1; return; }
        int64_t *ctr = &w->counters[enc];
        for (;;) {
            int64_t size = chunk > 0 ? chunk : 1, pos;
            if (n->sched == PYTPP_LOOP_GUIDED) {
                int64_t cur;
#pragma omp atomic read
                cur = *ctr;
                const int64_t g = (total - cur + nt - 1) / nt;
                if (g > size) size = g;
            }
#pragma omp atomic capture
            { pos = *ctr; *ctr += size; }
            if (pos >= total) break;
            for (int64_t i = pos; i < imin(pos + size, total); ++i) run_tuple(w, i);
        }
    }
}

static void walk_level(walk *w, int k)
{
    const pytpp_loop_nest *n = w->n;
    if (k == n->nlevels) {
        w->body(w->ind, w->ctx, w->tid);
        return;
    }
    const pytpp_loop_level *lv = &n->lv[k];
    if (lv->par == PYTPP_LOOP_COLLAPSE) {
        run_group(w);
        if (n->lv[w->g1 - 1].barrier) {
#pragma omp barrier
        }
        return;
    }
    const int loop = lv->loop;
    const int64_t saved = w->ind[loop];
    int64_t lo, hi;
    level_range(w, k, &lo, &hi);
    if (lv->par == PYTPP_LOOP_GRID_R || lv->par == PYTPP_LOOP_GRID_C) {
        const int ways = lv->par == PYTPP_LOOP_GRID_R ? n->grid_r : n->grid_c;
        const int part = lv->par == PYTPP_LOOP_GRID_R ? w->tid / n->grid_c : w->tid % n->grid_c;
        const int64_t cnt = trips(lo, hi, lv->step);
        const int64_t base = cnt / ways, extra = cnt % ways;
        const int64_t s = part * base + (part < extra ? part : extra);
        const int64_t e = s + base + (part < extra);
        hi = imin(hi, lo + e * lv->step);
        lo = lo + s * lv->step;
    }
    for (int64_t v = lo; v < hi; v += lv->step) {
        w->ind[loop] = v;
        walk_level(w, k + 1);
    }
    w->ind[loop] = saved;
    if (lv->barrier) {
#pragma omp barrier
    }
}

/* instances of the collapsed group: the iterations of the levels around it */
static int64_t instances(walk *w, int k)
{
    if (k == w->g0) return 1;
    const int loop = w->n->lv[k].loop;
    const int64_t saved = w->ind[loop];
    int64_t lo, hi, count = 0;
    level_range(w, k, &lo, &hi);
    for (int64_t v = lo; v < hi; v += w->n->lv[k].step) {
        w->ind[loop] = v;
        count += instances(w, k + 1);
    }
    w->ind[loop] = saved;
    return count;
}

int pytpp_loop_run(const pytpp_loop_nest *n, int nthreads, pytpp_loop_body body, void *ctx)
{
    if (n->nlevels < 1 || n->nlevels > PYTPP_LOOP_MAX_LEVELS || n->nloops > PYTPP_LOOP_MAX_LOOPS)
        return -2;
    int g0 = n->nlevels, g1 = n->nlevels;
    for (int k = 0; k < n->nlevels; ++k)
        if (n->lv[k].par == PYTPP_LOOP_COLLAPSE) {
            g0 = k;
            for (g1 = k; g1 < n->nlevels && n->lv[g1].par == PYTPP_LOOP_COLLAPSE; ++g1) {}
            break;
        }
    int nt = n->grid_r > 0 ? n->grid_r * (n->grid_c > 0 ? n->grid_c : 1) : nthreads;
    if (g0 == n->nlevels && n->grid_r <= 0) nt = 1;
    if (nt < 1) nt = 1;
    walk proto;
    memset(&proto, 0, sizeof(proto));
    proto.n = n, proto.body = body, proto.ctx = ctx, proto.nt = nt, proto.g0 = g0, proto.g1 = g1;
    for (int i = 0; i < n->nloops; ++i) proto.ind[i] = n->start[i];
    int64_t *counters = NULL;
    if (g0 < n->nlevels && n->sched != PYTPP_LOOP_STATIC) {
        proto.ncounters = instances(&proto, 0);
        counters = (int64_t *)calloc((size_t)(proto.ncounters > 0 ? proto.ncounters : 1),
                                     sizeof(int64_t));
        if (!counters) return -1;
        proto.counters = counters;
    }
    int err = 0;
#pragma omp parallel num_threads(nt) reduction(| : err)
    {
        walk w = proto;
#ifdef _OPENMP
        w.tid = omp_get_thread_num();
        w.nt = omp_get_num_threads();
#endif
        /* a grid needs its every thread: with fewer, the missing ones' blocks would be lost */
        if (n->grid_r > 0 && w.nt != nt) {
            err |= 1;
        } else {
            walk_level(&w, 0);
            err |= w.err;
        }
        free(w.space);
    }
    free(counters);
    return err ? -1 : 0;
}
