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

/* VL lanes at once: the bfloat16 bits in the low half of each 32-bit lane (for V_BF16_STORE),
 * or 2*VL lanes packed in element order (pairs). */
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

/* Pairs: one float32-vector load brings 2*VL bf16 values; in each 32-bit lane (little endian)
 * the low half is element 2k and the high half element 2k+1. Widening is one shift (even
 * elements) and one mask (odd elements): no unpacking across lanes, and the store re-packs with
 * a shift and a 16-bit blend (V_I_BLEND_HI16), so the element order never changes. */
static inline void pytpp_bf16_ld2(const void *p, vec_t *even, vec_t *odd)
{
    const ivec_t w = V_I_CAST(V_LOAD((const float *)p));
    *even = V_F_CAST(V_I_SLL(w, 16));
    *odd = V_F_CAST(V_I_AND(w, V_I_SET1((int32_t)0xffff0000u)));
}

/* The rounding with the bf16 bits left in the high half (the low half is garbage): right for
 * numbers and for NaNs whose low 16 bits are zero (a widened bf16, the default NaN), whose
 * rounding add cannot carry. */
static inline ivec_t pytpp_bf16_rne_hi_num(vec_t v)
{
    const ivec_t b = V_I_CAST(v);
    return V_I_ADD(b, V_I_ADD(V_I_SET1(0x7fff), V_I_AND(V_I_SRL(b, 16), V_I_SET1(1))));
}

/* even and odd lanes rounded and packed back into 2*VL bf16 in element order */
static inline vec_t pytpp_bf16_pack2_num(vec_t even, vec_t odd)
{
    return V_F_CAST(V_I_BLEND_HI16(V_I_SRL(pytpp_bf16_rne_hi_num(even), 16),
                                   pytpp_bf16_rne_hi_num(odd)));
}

/* the same for any NaN: it keeps its high half with the quiet bit set */
static inline vec_t pytpp_bf16_pack2(vec_t even, vec_t odd)
{
    const ivec_t qo = V_I_OR(V_I_CAST(odd), V_I_SET1(0x400000));
    const ivec_t ho = V_I_SEL(V_ISNAN(odd), pytpp_bf16_rne_hi_num(odd), qo);
    return V_F_CAST(V_I_BLEND_HI16(pytpp_bf16_rne_lo(even), ho));
}
#endif
