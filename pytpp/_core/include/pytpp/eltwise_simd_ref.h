/* Element-wise "vector" shim for the portable reference level: the GEMM shim's V_* vocabulary
 * (one element per vector) and the operations only element-wise kernels need. max/min return
 * the second operand when either is NaN, like the x86 instructions. */
#include "pytpp/simd_ref.h"
#include <stdint.h>
#include <string.h>

#define EW_PRED_EQ 0
#define EW_PRED_NE 1
#define EW_PRED_LT 2
#define EW_PRED_LE 3
#define EW_PRED_GT 4
#define EW_PRED_GE 5
#define EW_PRED_NLT_U 6   /* not less than, or unordered (NaN) */

typedef int cmask_t;
#define V_LOADMF(p, m, f) (*(p))
#define V_SUB(a, b) ((a) - (b))
#define V_DIV(a, b) ((a) / (b))
#if defined(PYTPP_DT_F32)
#define V_FNMA(a, b, c) fmaf(-(a), (b), (c))
#define V_FMS(a, b, c) fmaf((a), (b), -(c))
#define V_SQRT(a) sqrtf(a)
#define V_ABS(a) fabsf(a)
#define V_ROUND(a) nearbyintf(a)
#else
#define V_FNMA(a, b, c) fma(-(a), (b), (c))
#define V_FMS(a, b, c) fma((a), (b), -(c))
#define V_SQRT(a) sqrt(a)
#define V_ABS(a) fabs(a)
#define V_ROUND(a) nearbyint(a)
#endif
static inline elem_t ew_ref_max(elem_t a, elem_t b) { return a > b ? a : b; }
static inline elem_t ew_ref_min(elem_t a, elem_t b) { return a < b ? a : b; }
#define V_MAX(a, b) ew_ref_max((a), (b))
#define V_MIN(a, b) ew_ref_min((a), (b))
static inline int ew_ref_cmp(elem_t a, elem_t b, int p)
{
    switch (p) {
    case 0: return a == b;
    case 1: return !(a == b);
    case 2: return a < b;
    case 3: return a <= b;
    case 4: return a > b;
    case 5: return a >= b;
    default: return !(a < b);
    }
}
#define V_CMP(a, b, P) ew_ref_cmp((a), (b), (P))
#define V_SEL(m, a, b) ((m) ? (b) : (a))
/* b where x has its sign bit set (x < 0, -0, negative NaN), else a */
#define V_SEL_NEG(x, a, b) (signbit(x) ? (b) : (a))
#define V_CMASK_BITS(m) ((uint32_t)((m) != 0))
#define V_CMASK_FROM_BITS(b) ((int)((b) & 1u))
#define V_CMASK_AND(a, b) ((a) && (b))
#define V_HSUM(v) (v)
#define V_HMUL(v) (v)
#define V_HMAX(v) (v)
#define V_HMIN(v) (v)
#define V_RCP_NR(d) (1.0f / (d))

#if defined(PYTPP_DT_F64)
/* p * 2^n (n integral): one rounding, gradual underflow */
#define V_EXP2I(p, n) ldexp((p), (int)(n))
#endif
#if defined(PYTPP_DT_F32)
typedef int32_t ivec_t;
typedef const float *lut_t;
static inline int32_t ew_ref_bits(float f) { int32_t i; memcpy(&i, &f, 4); return i; }
static inline float ew_ref_float(int32_t i) { float f; memcpy(&f, &i, 4); return f; }
#define V_I_CAST(v) ew_ref_bits(v)
#define V_F_CAST(i) ew_ref_float(i)
#define V_I_SET1(x) ((int32_t)(x))
#define V_I_ADD(a, b) ((int32_t)((uint32_t)(a) + (uint32_t)(b)))
#define V_I_SUB(a, b) ((int32_t)((uint32_t)(a) - (uint32_t)(b)))
#define V_I_MUL(a, b) ((int32_t)((uint32_t)(a) * (uint32_t)(b)))
#define V_I_XOR(a, b) ((a) ^ (b))
#define V_I_AND(a, b) ((a) & (b))
#define V_I_OR(a, b) ((a) | (b))
#define V_I_MIN(a, b) ((a) < (b) ? (a) : (b))
#define V_I_SLL(i, s) ((int32_t)((uint32_t)(i) << (s)))
#define V_I_SRL(i, s) ((int32_t)((uint32_t)(i) >> (s)))
#define V_I_SRA(i, s) ((i) >> (s))
#define V_I_IOTA() 0
#define V_CVT_I(v) ((int32_t)nearbyintf(v))
#define V_CVT_F(i) ((float)(i))
#define V_LUT_LOAD(p) (p)
#define V_LUT(l, idx) ((l)[idx])
static inline float ew_ref_exp2i(float p, float n)
{
    int32_t ni = (int32_t)n, h = ni >> 1;
    return p * ew_ref_float((h + 127) << 23) * ew_ref_float((ni - h + 127) << 23);
}
#define V_EXP2I(p, n) ew_ref_exp2i((p), (n))
#define V_BF16_LOAD(p) ((int32_t)((uint32_t)*(const uint16_t *)(p) << 16))
#define V_BF16_STORE(p, i) (*(uint16_t *)(p) = (uint16_t)(i))
#define V_BF16_STREAM(p, i) V_BF16_STORE(p, i)
#define V_ISNAN(v) ((v) != (v))
#define V_I_SEL(m, a, b) ((m) ? (b) : (a))
#endif

/* 8-bit (de)quantization lanes (eltwise_quant.inc): one byte / float32 / bfloat16 / int32 value
 * as the compute dtype, and an integral in-range value stored as its low byte */
#define V_LD_U8(p) ((elem_t)*(const uint8_t *)(p))
#define V_LD_S8(p) ((elem_t)*(const int8_t *)(p))
#define V_ST_BYTES(p, v) (*(uint8_t *)(p) = (uint8_t)(int32_t)(v))
#if defined(PYTPP_DT_F64)
static inline double ew_ref_bf16_f64(const void *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    const uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return (double)f;
}
#define V_LD_I32(p) ((double)*(const int32_t *)(p))
#define V_LD_F32(p) ((double)*(const float *)(p))
#define V_LD_BF16(p) ew_ref_bf16_f64(p)
#endif

/* Large arrays: plain stores here (no streaming stores in portable C). */
#define V_STREAM(p, v) V_STORE((p), (v))
#define V_SFENCE() ((void)0)
#if defined(PYTPP_DT_F32)
/* |x| > c or NaN: the fast paths of the transcendentals cover |x| <= c */
#define V_ANY_ABS_GT(x, c) (!(fabsf(x) <= (c)))
#define V_I_BLEND_HI16(lo, hi) ((int32_t)(((uint32_t)(lo) & 0xffffu) | ((uint32_t)(hi) & 0xffff0000u)))
#endif
/* table lookups are plain loads here: the reference level runs the piecewise minimax tables */
#define EW_LUT_IS_CHEAP 1
