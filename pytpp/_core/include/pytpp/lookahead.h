/* Look-ahead fetches for the drivers that work block by block (the Goto GEMM's B blocks,
 * attention's per-head K and V, a streaming BRGEMM's chunks): while the micro-kernels compute
 * on the current block, which leaves the memory idle, the raw data of the next one is fetched
 * into L2 a slice at a time, so its packing then reads L2 instead of waiting on memory. Spread
 * over the current block's kernel calls rather than issued at once: a burst fills the miss
 * buffers and stalls the next kernel call. A kernel that can fetch as it computes (the LPF GEMM
 * variants) takes its slice as a byte range and paces it over its own k steps. Prefetches
 * never fault, so ranges need no bounds care. */
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

/* Adds a region; rows that follow each other in memory, and a region that continues the last
 * one, become one range (a stride batch of contiguous blocks is then one region per operand) */
static inline void pytpp_ahead_add(pytpp_ahead *a, const void *p, int64_t rows,
                                   int64_t row_bytes, int64_t stride)
{
    if (rows <= 0 || row_bytes <= 0) return;
    if (stride == row_bytes) row_bytes *= rows, rows = 1;   /* back-to-back rows: one range */
    const char *c = (const char *)p;
    if (a->n > 0 && rows == 1 && a->rows[a->n - 1] == 1 &&
        a->p[a->n - 1] + a->row_bytes[a->n - 1] - 63 == c) {
        a->row_bytes[a->n - 1] += row_bytes;   /* continues the previous range */
        return;
    }
    if (a->n >= PYTPP_AHEAD_REGIONS) return;
    a->p[a->n] = c;
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

/* Issues the next `lines` lines, one at a time: the bookkeeping between two prefetches spaces
 * them out, which measured faster than issuing a row's run back to back (2000 x 64^3 f64
 * BRGEMM, one Zen 5 core: 89 against 67 GFLOP/s) */
static inline void pytpp_ahead_issue(pytpp_ahead *a, int64_t lines)
{
    for (int64_t i = 0; i < lines && a->at < a->n; ++i) {
        const uintptr_t r = (uintptr_t)(a->p[a->at] + a->row * a->stride[a->at]) & ~(uintptr_t)63;
        __builtin_prefetch((const char *)r + a->off, 0, 2);   /* prefetcht1: into L2 */
        a->off += 64;
        if (a->off >= a->row_bytes[a->at]) {
            a->off = 0;
            if (++a->row >= a->rows[a->at]) a->row = 0, ++a->at;
        }
    }
}

/* One step's share, issued at once (before a kernel call that cannot fetch itself) */
static inline void pytpp_ahead_step(pytpp_ahead *a) { pytpp_ahead_issue(a, a->per_step); }

/* One step's share for a kernel that fetches a byte range as it computes (the LPF GEMM
 * variants, at most a line per k step): the next run of the share within one row, at most
 * max_lines, as [*lo, *hi); what the run cannot hold is issued here at once. */
static inline void pytpp_ahead_take(pytpp_ahead *a, int64_t max_lines, const void **lo,
                                    const void **hi)
{
    *lo = *hi = NULL;
    if (a->at >= a->n || a->per_step <= 0) return;
    const uintptr_t row = (uintptr_t)(a->p[a->at] + a->row * a->stride[a->at]) & ~(uintptr_t)63;
    const char *line = (const char *)row + a->off;
    int64_t run = (a->row_bytes[a->at] - a->off + 63) / 64;   /* lines left in this row */
    if (run > a->per_step) run = a->per_step;
    if (run > max_lines) run = max_lines;
    *lo = line;
    *hi = line + 64 * run;
    a->off += 64 * run;
    if (a->off >= a->row_bytes[a->at]) {
        a->off = 0;
        if (++a->row >= a->rows[a->at]) a->row = 0, ++a->at;
    }
    pytpp_ahead_issue(a, a->per_step - run);
}

#endif
