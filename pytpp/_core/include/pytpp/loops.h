/* PARLOOPER loop nests (paper 001, II) run in C: the nest a loop-spec string describes (parsed in
 * Python, pytpp/loops.py) as an array of levels, walked by every thread of one OpenMP parallel
 * region with the C body called per iteration: no Python in the loop.
 *
 * Level k runs logical loop lv[k].loop over [lo, hi) by lv[k].step, where for the first
 * occurrence of a loop lo = start, hi = end, and for a later one lo = the enclosing occurrence's
 * value, hi = min(lo + lv[k].block, end). Parallel levels: one group of consecutive levels shared
 * as one collapsed loop (static / dynamic / guided, chunk), or grid levels (R or C axis) split
 * in contiguous blocks among the rows / columns of the thread grid. */
#ifndef PYTPP_LOOPS_H
#define PYTPP_LOOPS_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PYTPP_LOOP_MAX_LOOPS 26
#define PYTPP_LOOP_MAX_LEVELS 64

enum pytpp_loop_par { PYTPP_LOOP_SEQ = 0, PYTPP_LOOP_COLLAPSE = 1, PYTPP_LOOP_GRID_R = 2,
                      PYTPP_LOOP_GRID_C = 3 };
enum pytpp_loop_sched { PYTPP_LOOP_STATIC = 0, PYTPP_LOOP_DYNAMIC = 1, PYTPP_LOOP_GUIDED = 2 };

typedef struct pytpp_loop_level {
    int loop;            /* logical loop */
    int first;           /* first occurrence of its loop */
    int64_t step;        /* this occurrence's step */
    int64_t block;       /* the enclosing occurrence's step (later occurrences) */
    int par;             /* enum pytpp_loop_par */
    int barrier;         /* a barrier after each completion of this level */
} pytpp_loop_level;

typedef struct pytpp_loop_nest {
    int nlevels, nloops;
    pytpp_loop_level lv[PYTPP_LOOP_MAX_LEVELS];
    int64_t start[PYTPP_LOOP_MAX_LOOPS], end[PYTPP_LOOP_MAX_LOOPS];
    int sched;           /* enum pytpp_loop_sched */
    int64_t chunk;       /* 0: the schedule's default */
    int grid_r, grid_c;  /* 0 0: no grid */
} pytpp_loop_nest;

/* body(ind, ctx, tid): ind[i] the current value of logical loop i */
typedef void (*pytpp_loop_body)(const int64_t *ind, void *ctx, int tid);

/* Runs the nest on nthreads threads (a grid: grid_r * grid_c). Returns 0, -1 without memory. */
int pytpp_loop_run(const pytpp_loop_nest *n, int nthreads, pytpp_loop_body body, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
