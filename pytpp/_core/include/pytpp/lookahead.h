/* Look-ahead fetches for the drivers that work block by block (the Goto GEMM's B blocks,
 * attention's per-head K and V, a streaming BRGEMM's chunks): while the micro-kernels compute
 * on the current block,
 * which leaves the memory idle, the raw data of the next one is fetched into L2 a slice at a
 * time, so its packing then reads L2 instead of waiting on memory. Spread evenly over the
 * current block's kernel calls rather than issued at once: a burst fills the miss buffers and
 * stalls the next kernel call. Prefetches never fault, so ranges need no bounds care. */
#ifndef PYTPP_LOOKAHEAD_H
#define PYTPP_LOOKAHEAD_H
#include <stdint.h>
#include "pytpp/partition.h"

#define PYTPP_AHEAD_REGIONS 16

/* Up to PYTPP_AHEAD_REGIONS regions of `rows` rows of `row_bytes`, `stride` bytes apart */
typedef struct pytpp_ahead {
    const char *p[PYTPP_AHEAD_REGIONS];
    int64_t rows[PYTPP_AHEAD_REGIONS], row_bytes[PYTPP_AHEAD_REGIONS],
        stride[PYTPP_AHEAD_REGIONS];
    int n, at;
    int64_t row, off, per_step;
} pytpp_ahead;

static inline void pytpp_ahead_add(pytpp_ahead *a, const void *p, int64_t rows,
                                   int64_t row_bytes, int64_t stride)
{
    if (a->n >= PYTPP_AHEAD_REGIONS || rows <= 0 || row_bytes <= 0) return;
    a->p[a->n] = (const char *)p;
    a->rows[a->n] = rows;
    a->row_bytes[a->n] = row_bytes + 63;   /* a row's first line may start before it */
    a->stride[a->n] = stride;
    ++a->n;
}

/* Spreads the regions' lines over `steps` calls of pytpp_ahead_step */
static inline void pytpp_ahead_plan(pytpp_ahead *a, int64_t steps)
{
    int64_t lines = 0;
    for (int i = 0; i < a->n; ++i) lines += a->rows[i] * cdiv(a->row_bytes[i], 64);
    a->per_step = cdiv(lines, imax(steps, 1));
}

static inline void pytpp_ahead_step(pytpp_ahead *a)
{
    for (int64_t i = 0; i < a->per_step && a->at < a->n; ++i) {
        const uintptr_t r = (uintptr_t)(a->p[a->at] + a->row * a->stride[a->at]) & ~(uintptr_t)63;
        __builtin_prefetch((const char *)r + a->off, 0, 2);   /* prefetcht1: into L2 */
        a->off += 64;
        if (a->off >= a->row_bytes[a->at]) {
            a->off = 0;
            if (++a->row >= a->rows[a->at]) a->row = 0, ++a->at;
        }
    }
}

#endif
