/* One element of a float32 or float64 array (esz 4 or 8) as a double, for the dtype-free loop
 * drivers that handle scalars per row or per channel (statistics, scale factors). */
#ifndef PYTPP_ELEM_ACCESS_H
#define PYTPP_ELEM_ACCESS_H
#include <stdint.h>

static inline double pytpp_elem_get(int64_t esz, const void *a, int64_t i)
{
    return esz == 8 ? ((const double *)a)[i] : (double)((const float *)a)[i];
}

static inline void pytpp_elem_put(int64_t esz, void *a, int64_t i, double v)
{
    if (esz == 8) ((double *)a)[i] = v; else ((float *)a)[i] = (float)v;
}
#endif
