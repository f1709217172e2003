/* Near-equal partitions, shared by the loop drivers. */
#ifndef PYTPP_PARTITION_H
#define PYTPP_PARTITION_H
#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Integer helpers of the loop drivers (frame/ only: kernels do not include this header). */
static inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Start and length of part `i` when `total` is split into `parts` near-equal parts. */
static inline void pytpp_split(int64_t total, int64_t parts, int64_t i, int64_t *start,
                               int64_t *len)
{
    const int64_t base = total / parts, extra = total % parts;
    *start = i * base + (i < extra ? i : extra);
    *len = base + (i < extra);
}

/* This thread's part of `total` inside an OpenMP parallel region (all of it outside one, or
 * without OpenMP); returns the thread number. */
static inline int pytpp_thread_part(int64_t total, int64_t *start, int64_t *len)
{
    int t = 0, nt = 1;
#ifdef _OPENMP
    t = omp_get_thread_num();
    nt = omp_get_num_threads();
#endif
    pytpp_split(total, nt, t, start, len);
    return t;
}
#endif
