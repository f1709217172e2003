/* Element-wise "vector" shim for the portable reference level: one element per vector.
 * max/min return the second operand when either is NaN, like the x86 instructions. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#define EW_ISA_NAME ref
#define EW_PRED_EQ 0
#define EW_PRED_NE 1
#define EW_PRED_LT 2
#define EW_PRED_LE 3
#define EW_PRED_GT 4
#define EW_PRED_GE 5

#if defined(PYTPP_DT_F32)
typedef float elem_t;
#elif defined(PYTPP_DT_F64)
typedef double elem_t;
#endif
typedef elem_t vec_t;
typedef int mask_t;
typedef int cmask_t;
#define VL 1
#define E_ZERO() ((elem_t)0)
#define E_SET1(x) ((elem_t)(x))
#define E_LOAD(p) (*(p))
#define E_LOADM(p, m) (*(p))
#define E_LOADMF(p, m, f) (*(p))
#define E_STORE(p, v) (*(p) = (v))
#define E_STOREM(p, m, v) (*(p) = (v))
#define E_MASK_FIRST(r) (r)
#define E_ADD(a, b) ((a) + (b))
#define E_SUB(a, b) ((a) - (b))
#define E_MUL(a, b) ((a) * (b))
#define E_DIV(a, b) ((a) / (b))
#if defined(PYTPP_DT_F32)
#define E_FMA(a, b, c) fmaf((a), (b), (c))
#define E_FNMA(a, b, c) fmaf(-(a), (b), (c))
#define E_FMS(a, b, c) fmaf((a), (b), -(c))
#define E_SQRT(a) sqrtf(a)
#define E_ABS(a) fabsf(a)
#define E_ROUND(a) nearbyintf(a)
#else
#define E_FMA(a, b, c) fma((a), (b), (c))
#define E_FNMA(a, b, c) fma(-(a), (b), (c))
#define E_FMS(a, b, c) fma((a), (b), -(c))
#define E_SQRT(a) sqrt(a)
#define E_ABS(a) fabs(a)
#define E_ROUND(a) nearbyint(a)
#endif
static inline elem_t ew_ref_max(elem_t a, elem_t b) { return a > b ? a : b; }
static inline elem_t ew_ref_min(elem_t a, elem_t b) { return a < b ? a : b; }
#define E_MAX(a, b) ew_ref_max((a), (b))
#define E_MIN(a, b) ew_ref_min((a), (b))
static inline int ew_ref_cmp(elem_t a, elem_t b, int p)
{
    switch (p) {
    case 0: return a == b;
    case 1: return !(a == b);
    case 2: return a < b;
    case 3: return a <= b;
    case 4: return a > b;
    default: return a >= b;
    }
}
#define E_CMP(a, b, P) ew_ref_cmp((a), (b), (P))
#define E_SEL(m, a, b) ((m) ? (b) : (a))
/* b where x has its sign bit set (x < 0, -0, negative NaN), else a */
#define E_SEL_NEG(x, a, b) (signbit(x) ? (b) : (a))
#define E_CMASK_BITS(m) ((uint32_t)((m) != 0))
#define E_CMASK_FROM_BITS(b) ((int)((b) & 1u))
#define E_CMASK_AND(a, b) ((a) && (b))
#define E_HSUM(v) (v)
#define E_HMUL(v) (v)
#define E_HMAX(v) (v)
#define E_HMIN(v) (v)
#define E_RCP_NR(d) (1.0f / (d))

#if defined(PYTPP_DT_F32)
typedef int32_t ivec_t;
typedef const float *lut_t;
static inline int32_t ew_ref_bits(float f) { int32_t i; memcpy(&i, &f, 4); return i; }
static inline float ew_ref_float(int32_t i) { float f; memcpy(&f, &i, 4); return f; }
#define E_I_CAST(v) ew_ref_bits(v)
#define E_F_CAST(i) ew_ref_float(i)
#define E_I_SET1(x) ((int32_t)(x))
#define E_I_ADD(a, b) ((int32_t)((uint32_t)(a) + (uint32_t)(b)))
#define E_I_SUB(a, b) ((int32_t)((uint32_t)(a) - (uint32_t)(b)))
#define E_I_MUL(a, b) ((int32_t)((uint32_t)(a) * (uint32_t)(b)))
#define E_I_XOR(a, b) ((a) ^ (b))
#define E_I_AND(a, b) ((a) & (b))
#define E_I_OR(a, b) ((a) | (b))
#define E_I_MIN(a, b) ((a) < (b) ? (a) : (b))
#define E_I_SLL(i, s) ((int32_t)((uint32_t)(i) << (s)))
#define E_I_SRL(i, s) ((int32_t)((uint32_t)(i) >> (s)))
#define E_I_SRA(i, s) ((i) >> (s))
#define E_I_IOTA() 0
#define E_CVT_I(v) ((int32_t)nearbyintf(v))
#define E_CVT_F(i) ((float)(i))
#define E_LUT_LOAD(p) (p)
#define E_LUT(l, idx) ((l)[idx])
static inline float ew_ref_exp2i(float p, float n)
{
    int32_t ni = (int32_t)n, h = ni >> 1;
    return p * ew_ref_float((h + 127) << 23) * ew_ref_float((ni - h + 127) << 23);
}
#define E_EXP2I(p, n) ew_ref_exp2i((p), (n))
#define E_BF16_LOAD(p) ((int32_t)((uint32_t)*(const uint16_t *)(p) << 16))
#define E_BF16_STORE(p, i) (*(uint16_t *)(p) = (uint16_t)(i))
#define E_ISNAN(v) ((v) != (v))
#define E_I_SEL(m, a, b) ((m) ? (b) : (a))
#endif

/* Large arrays: plain stores here (no streaming stores in portable C). */
#define E_STREAM(p, v) E_STORE((p), (v))
#define E_SFENCE() ((void)0)
#if defined(PYTPP_DT_F32)
/* |x| > c or NaN: the fast paths of the transcendentals cover |x| <= c */
#define E_ANY_ABS_GT(x, c) (!(fabsf(x) <= (c)))
#define E_I_BLEND_HI16(lo, hi) ((int32_t)(((uint32_t)(lo) & 0xffffu) | ((uint32_t)(hi) & 0xffff0000u)))
#endif
/* table lookups are plain loads here: the reference level runs the piecewise minimax tables */
#define EW_LUT_IS_CHEAP 1
