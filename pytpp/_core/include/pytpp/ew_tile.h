/* An element-wise operand seen from a tile's origin: what the equation executor and the loop
 * nests' equation bodies hand to the row kernels for the tile at (i0, j0). */
#ifndef PYTPP_EW_TILE_H
#define PYTPP_EW_TILE_H
#include <stdint.h>
#include "pytpp/eltwise.h"

/* bytes of an element of each element-wise dtype (enum pytpp_ew_dtype: f64, f32, bf16) */
static const int64_t PYTPP_EW_ESZ[PYTPP_EW_NDT] = {8, 4, 2};

/* operand o moved to the tile's origin (i0, j0), its broadcast kept */
static inline pytpp_ew_operand pytpp_ew_at_tile(const pytpp_ew_operand *o, int64_t i0,
                                                int64_t j0)
{
    pytpp_ew_operand t = *o;
    const int64_t e = PYTPP_EW_ESZ[o->dtype];
    switch (o->bcast) {
    case PYTPP_EW_BCAST_ROW: t.p = (char *)o->p + j0 * e; break;
    case PYTPP_EW_BCAST_COL: t.p = (char *)o->p + i0 * o->ld * e; break;
    case PYTPP_EW_BCAST_SCALAR: break;
    default: t.p = (char *)o->p + (i0 * o->ld + j0) * e;
    }
    return t;
}
#endif
