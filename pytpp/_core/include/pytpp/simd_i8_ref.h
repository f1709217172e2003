/* 8-bit GEMM shim for the portable reference level: one int32 lane, operands widened to int16
 * pairs while packing (the AVX2 layout), sums in uint32 so they wrap modulo 2^32 as the vector
 * kernels do (signed overflow would be undefined in C). */
#include <stdint.h>
#include <string.h>
#include "pytpp/gemm_pk_shapes.h"

#define PYTPP_ISA_NAME ref
typedef int32_t ivec_t;
#define I8_VL 1
#define I8_GROUP 2
#define V_I8_ZERO() 0
#define V_I8_ADD(x, y) ((int32_t)((uint32_t)(x) + (uint32_t)(y)))
#define V_I8_LOAD(p) (*(p))
#define V_I8_LOADM(p, r) (*(p))
#define V_I8_STORE(p, v) (*(p) = (v))
#define V_I8_STOREM(p, r, v) (*(p) = (v))
PYTPP_INLINE int32_t i8_ref_lane(const uint8_t *p)
{
    int32_t x;
    memcpy(&x, p, 4);
    return x;
}
#define V_I8_LOAD_B(p) i8_ref_lane(p)
#define V_I8_BCAST_A(p) i8_ref_lane(p)
PYTPP_INLINE int32_t i8_ref_dot(int32_t acc, int32_t a, int32_t b)
{
    const int32_t a0 = (int16_t)(a & 0xFFFF), a1 = (int16_t)((uint32_t)a >> 16);
    const int32_t b0 = (int16_t)(b & 0xFFFF), b1 = (int16_t)((uint32_t)b >> 16);
    return (int32_t)((uint32_t)acc + (uint32_t)(a0 * b0 + a1 * b1));
}
#define V_I8_DOT(acc, a, b) i8_ref_dot((acc), (a), (b))

#define I8_SHAPES(X) PYTPP_ROWS(4)(X, 1) PYTPP_ROWS(4)(X, 2) PYTPP_ROWS(4)(X, 3) PYTPP_ROWS(4)(X, 4)
#define I8_MR_MAIN 4
#define I8_NV_MAIN 4

/* Small-m kernels on unpacked B (gemm_lane.inc I8_GV_*): one column's two int16 pairs. */
PYTPP_INLINE int32_t i8_ref_pair(uint8_t x0, uint8_t x1, int sgn)
{
    const int16_t lo = sgn ? (int16_t)(int8_t)x0 : (int16_t)x0;
    const int16_t hi = sgn ? (int16_t)(int8_t)x1 : (int16_t)x1;
    return (int32_t)((uint32_t)(uint16_t)lo | ((uint32_t)(uint16_t)hi << 16));
}
#define I8_GV_PLAIN(out, r0, r1, r2, r3, sgn)                                                \
    ((out)[0] = i8_ref_pair(*(r0), *(r1), (sgn)), (out)[1] = i8_ref_pair(*(r2), *(r3), (sgn)))
#define I8_GV_QUAD(out, src, sgn)                                                            \
    ((out)[0] = i8_ref_pair((src)[0], (src)[1], (sgn)),                                      \
     (out)[1] = i8_ref_pair((src)[2], (src)[3], (sgn)))
