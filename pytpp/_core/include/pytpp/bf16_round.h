/* float32 -> bfloat16 rounded to nearest even, as ml_dtypes' astype rounds (bit for bit): a NaN
 * stays a quiet NaN (its high half with the quiet bit set; the rounding add could otherwise
 * carry a NaN's payload into an infinity). Shared by the element-wise conversions
 * (eltwise_cvt.inc) and the embedding kernels (embedding_rows.inc). The vector form needs a
 * float32 eltwise_simd_<isa>.h shim included first. */
#ifndef PYTPP_BF16_ROUND_H
#define PYTPP_BF16_ROUND_H
#include <stdint.h>
#include <string.h>

static inline uint16_t pytpp_bf16_rne(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b >> 16) | 0x40u);
    return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}
#endif

/* VL lanes at once: the bfloat16 bits in the low half of each 32-bit lane (for V_BF16_STORE). */
#if defined(PYTPP_DT_F32) && !defined(PYTPP_BF16_RNE_VEC)
#define PYTPP_BF16_RNE_VEC
/* The rounding alone, right for every lane that is not NaN (infinities and overflow to infinity
 * included): for callers that know their values are numbers, 4 instructions fewer. */
static inline ivec_t pytpp_bf16_rne_lo_num(vec_t v)
{
    const ivec_t b = V_I_CAST(v);
    return V_I_SRL(V_I_ADD(b, V_I_ADD(V_I_SET1(0x7fff), V_I_AND(V_I_SRL(b, 16), V_I_SET1(1)))),
                   16);
}

static inline ivec_t pytpp_bf16_rne_lo(vec_t v)
{
    const ivec_t q = V_I_OR(V_I_SRL(V_I_CAST(v), 16), V_I_SET1(0x40));
    return V_I_SEL(V_ISNAN(v), pytpp_bf16_rne_lo_num(v), q);
}
#endif
