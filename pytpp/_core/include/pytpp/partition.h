/* Near-equal partitions, shared by the loop drivers. */
#ifndef PYTPP_PARTITION_H
#define PYTPP_PARTITION_H
#include <stdint.h>

/* Start and length of part `i` when `total` is split into `parts` near-equal parts. */
static inline void pytpp_split(int64_t total, int64_t parts, int64_t i, int64_t *start,
                               int64_t *len)
{
    const int64_t base = total / parts, extra = total % parts;
    *start = i * base + (i < extra ? i : extra);
    *len = base + (i < extra);
}
#endif
