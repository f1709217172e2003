/* Element-wise vector shim for AVX-512 (F/BW/DQ/VL): the GEMM shim's V_* vocabulary and the
 * operations only element-wise kernels need. Included by kernels/avx512/eltwise_*.c after
 * PYTPP_DT_F32 or PYTPP_DT_F64. */
#include "pytpp/simd_avx512.h"

#define EW_PRED_EQ _CMP_EQ_OQ
#define EW_PRED_NE _CMP_NEQ_UQ
#define EW_PRED_LT _CMP_LT_OQ
#define EW_PRED_LE _CMP_LE_OQ
#define EW_PRED_GT _CMP_GT_OQ
#define EW_PRED_GE _CMP_GE_OQ
#define EW_PRED_NLT_U _CMP_NLT_UQ   /* not less than, or unordered (NaN) */

#if defined(PYTPP_DT_F32)
typedef __mmask16 cmask_t;
typedef __m512i ivec_t;
typedef __m512 lut_t;
#define V_LOADMF(p, m, f) _mm512_mask_loadu_ps((f), (m), (p))
#define V_SUB _mm512_sub_ps
#define V_DIV _mm512_div_ps
#define V_FNMA _mm512_fnmadd_ps
#define V_FMS _mm512_fmsub_ps
#define V_MAX _mm512_max_ps
#define V_MIN _mm512_min_ps
#define V_SQRT _mm512_sqrt_ps
#define V_ABS(a) _mm512_abs_ps(a)
#define V_ROUND(a) _mm512_roundscale_ps((a), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define V_CMP(a, b, P) _mm512_cmp_ps_mask((a), (b), (P))
#define V_SEL(m, a, b) _mm512_mask_blend_ps((m), (a), (b))
/* b where x has its sign bit set (x < 0, -0, negative NaN), else a */
#define V_SEL_NEG(x, a, b) _mm512_mask_blend_ps(_mm512_movepi32_mask(_mm512_castps_si512(x)), (a), (b))
#define V_CMASK_BITS(m) ((uint32_t)(m))
#define V_CMASK_FROM_BITS(b) ((__mmask16)(b))
#define V_CMASK_AND(a, b) ((__mmask16)((a) & (b)))
#define V_HSUM(v) _mm512_reduce_add_ps(v)
#define V_HMUL(v) _mm512_reduce_mul_ps(v)
#define V_HMAX(v) _mm512_reduce_max_ps(v)
#define V_HMIN(v) _mm512_reduce_min_ps(v)
#define V_RCP_NR(d) ew_rcp_nr_avx512(d)
static inline __m512 ew_rcp_nr_avx512(__m512 d)
{   /* 14-bit estimate + one Newton step: ~1 ulp */
    __m512 r = _mm512_rcp14_ps(d);
    return _mm512_fmadd_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(1.0f)), r);
}
/* integer lanes */
#define V_I_CAST(v) _mm512_castps_si512(v)
#define V_F_CAST(i) _mm512_castsi512_ps(i)
#define V_I_SET1(x) _mm512_set1_epi32(x)
#define V_I_LOADU(p) _mm512_loadu_si512((const void *)(p))
#define V_I_ADD _mm512_add_epi32
#define V_I_SUB _mm512_sub_epi32
#define V_I_MUL _mm512_mullo_epi32
#define V_I_XOR _mm512_xor_si512
#define V_I_AND _mm512_and_si512
#define V_I_OR _mm512_or_si512
#define V_I_MIN _mm512_min_epi32
#define V_I_SLL(i, s) _mm512_slli_epi32((i), (s))
#define V_I_SRL(i, s) _mm512_srli_epi32((i), (s))
#define V_I_SRA(i, s) _mm512_srai_epi32((i), (s))
#define V_I_IOTA() _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
#define V_CVT_I(v) _mm512_cvtps_epi32(v)      /* round to nearest */
#define V_CVT_F(i) _mm512_cvtepi32_ps(i)
#define V_I_CMPEQ_F(a, b) _mm512_cmpeq_epi32_mask((a), (b))
#define V_LUT_LOAD(p) _mm512_loadu_ps(p)
#define V_LUT(l, idx) _mm512_permutexvar_ps((idx), (l))
/* p * 2^n (n integral, as float): exact scaling with gradual underflow and overflow to inf */
#define V_EXP2I(p, n) _mm512_scalef_ps((p), (n))
/* bf16 (uint16) <-> f32 bits */
#define V_BF16_LOAD(p) _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16)
#define V_BF16_LOADM(p, m) _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16((m), (p))), 16)
#define V_BF16_STORE(p, i) _mm256_storeu_si256((__m256i *)(p), _mm512_cvtepi32_epi16(i))
#define V_BF16_STREAM(p, i) _mm256_stream_si256((__m256i *)(p), _mm512_cvtepi32_epi16(i))
#define V_BF16_STOREM(p, m, i) _mm256_mask_storeu_epi16((p), (m), _mm512_cvtepi32_epi16(i))
#define V_ISNAN(v) _mm512_cmp_ps_mask((v), (v), _CMP_UNORD_Q)
#define V_I_SEL(m, a, b) _mm512_mask_blend_epi32((m), (a), (b))
#elif defined(PYTPP_DT_F64)
typedef __mmask8 cmask_t;
#define V_LOADMF(p, m, f) _mm512_mask_loadu_pd((f), (m), (p))
#define V_SUB _mm512_sub_pd
#define V_DIV _mm512_div_pd
#define V_FNMA _mm512_fnmadd_pd
#define V_FMS _mm512_fmsub_pd
#define V_MAX _mm512_max_pd
#define V_MIN _mm512_min_pd
#define V_SQRT _mm512_sqrt_pd
#define V_ABS(a) _mm512_abs_pd(a)
#define V_ROUND(a) _mm512_roundscale_pd((a), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define V_CMP(a, b, P) _mm512_cmp_pd_mask((a), (b), (P))
#define V_SEL(m, a, b) _mm512_mask_blend_pd((m), (a), (b))
#define V_CMASK_BITS(m) ((uint32_t)(m))
#define V_CMASK_FROM_BITS(b) ((__mmask8)(b))
#define V_CMASK_AND(a, b) ((__mmask8)((a) & (b)))
#define V_HSUM(v) _mm512_reduce_add_pd(v)
#define V_HMUL(v) _mm512_reduce_mul_pd(v)
#define V_HMAX(v) _mm512_reduce_max_pd(v)
#define V_HMIN(v) _mm512_reduce_min_pd(v)
/* p * 2^n (n integral, as double): exact scaling with gradual underflow and overflow to inf */
#define V_EXP2I(p, n) _mm512_scalef_pd((p), (n))
#endif
#if defined(PYTPP_DT_F32)
#define V_I_GEU_BITS(a, b) ((uint32_t)_mm512_cmpge_epu32_mask((a), (b)))
#endif

/* 8-bit (de)quantization lanes (eltwise_quant.inc): VL bytes / float32 / bfloat16 / int32 values
 * as one compute vector, and integral in-range values stored as their low bytes */
#if defined(PYTPP_DT_F32)
#define V_LD_U8(p) _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p))))
#define V_LD_S8(p) _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p))))
#define V_ST_BYTES(p, v) _mm_storeu_si128((__m128i *)(p), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v)))
#else
#define V_LD_U8(p) _mm512_cvtepi32_pd(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p))))
#define V_LD_S8(p) _mm512_cvtepi32_pd(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p))))
#define V_LD_I32(p) _mm512_cvtepi32_pd(_mm256_loadu_si256((const __m256i *)(p)))
#define V_LD_F32(p) _mm512_cvtps_pd(_mm256_loadu_ps(p))
#define V_LD_BF16(p) _mm512_cvtps_pd(_mm256_castsi256_ps(_mm256_slli_epi32(                   \
    _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16)))
#define V_ST_BYTES(p, v) _mm_storel_epi64((__m128i *)(p), _mm256_cvtepi32_epi8(_mm512_cvtpd_epi32(v)))
#endif

/* Large arrays: streaming stores (p 64-byte aligned) and the fence after them. */
#if defined(PYTPP_DT_F32)
#define V_STREAM(p, v) _mm512_stream_ps((p), (v))
/* any lane with |x| > c or NaN: the fast paths of the transcendentals cover |x| <= c */
#define V_ANY_ABS_GT(x, c) \
    (_mm512_cmp_ps_mask(_mm512_abs_ps(x), _mm512_set1_ps(c), _CMP_NLE_UQ) != 0)
/* 16-bit halves: the low one of each 32-bit lane from lo, the high one from hi */
#define V_I_BLEND_HI16(lo, hi) _mm512_mask_blend_epi16((__mmask32)0xAAAAAAAAu, (lo), (hi))
#else
#define V_STREAM(p, v) _mm512_stream_pd((p), (v))
#endif
#define V_SFENCE() _mm_sfence()
/* a 16-entry table lookup is one instruction (vpermps zmm): the piecewise minimax tables pay */
#define EW_LUT_IS_CHEAP 1
#define EW_ISA_AVX512 1
