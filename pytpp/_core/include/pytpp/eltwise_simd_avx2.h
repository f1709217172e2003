/* Element-wise vector shim for AVX2 + FMA: the GEMM shim's V_* vocabulary and the operations
 * only element-wise kernels need. Masks are lane vectors (all-ones / zero). */
#include "pytpp/simd_avx2.h"
#include <stdint.h>
#include <string.h>

#define EW_PRED_EQ _CMP_EQ_OQ
#define EW_PRED_NE _CMP_NEQ_UQ
#define EW_PRED_LT _CMP_LT_OQ
#define EW_PRED_LE _CMP_LE_OQ
#define EW_PRED_GT _CMP_GT_OQ
#define EW_PRED_GE _CMP_GE_OQ
#define EW_PRED_NLT_U _CMP_NLT_UQ   /* not less than, or unordered (NaN) */

#if defined(PYTPP_DT_F32)
typedef __m256 cmask_t;
typedef __m256i ivec_t;
typedef struct { __m256 lo, hi; } lut_t;
#define V_LOADMF(p, m, f) _mm256_blendv_ps((f), _mm256_maskload_ps((p), (m)), _mm256_castsi256_ps(m))
#define V_SUB _mm256_sub_ps
#define V_DIV _mm256_div_ps
#define V_FNMA _mm256_fnmadd_ps
#define V_FMS _mm256_fmsub_ps
#define V_MAX _mm256_max_ps
#define V_MIN _mm256_min_ps
#define V_SQRT _mm256_sqrt_ps
#define V_ABS(a) _mm256_andnot_ps(_mm256_set1_ps(-0.0f), (a))
#define V_ROUND(a) _mm256_round_ps((a), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define V_CMP(a, b, P) _mm256_cmp_ps((a), (b), (P))
#define V_SEL(m, a, b) _mm256_blendv_ps((a), (b), (m))
/* b where x has its sign bit set (x < 0, -0, negative NaN), else a: blendv reads the sign */
#define V_SEL_NEG(x, a, b) _mm256_blendv_ps((a), (b), (x))
#define V_CMASK_BITS(m) ((uint32_t)_mm256_movemask_ps(m))
#define V_CMASK_FROM_BITS(b) _mm256_castsi256_ps(_mm256_cmpeq_epi32(                       \
    _mm256_and_si256(_mm256_set1_epi32((int)(b)), _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128)), \
    _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128)))
#define V_CMASK_AND(a, b) _mm256_and_ps((a), (b))
#define V_RCP_NR(d) ew_rcp_nr_avx2(d)
static inline __m256 ew_rcp_nr_avx2(__m256 d)
{   /* 12-bit estimate + one Newton step (~22 bits) */
    __m256 r = _mm256_rcp_ps(d);
    return _mm256_fmadd_ps(r, _mm256_fnmadd_ps(d, r, _mm256_set1_ps(1.0f)), r);
}
static inline float ew_hsum_avx2(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float ew_hmax_avx2(__m256 v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float ew_hmin_avx2(__m256 v)
{
    __m128 s = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_min_ps(s, _mm_movehl_ps(s, s));
    s = _mm_min_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float ew_hmul_avx2(__m256 v)
{
    __m128 s = _mm_mul_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_mul_ps(s, _mm_movehl_ps(s, s));
    s = _mm_mul_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#define V_HSUM(v) ew_hsum_avx2(v)
#define V_HMUL(v) ew_hmul_avx2(v)
#define V_HMAX(v) ew_hmax_avx2(v)
#define V_HMIN(v) ew_hmin_avx2(v)
#define V_I_CAST(v) _mm256_castps_si256(v)
#define V_F_CAST(i) _mm256_castsi256_ps(i)
#define V_I_SET1(x) _mm256_set1_epi32(x)
#define V_I_LOADU(p) _mm256_loadu_si256((const __m256i *)(p))
#define V_I_ADD _mm256_add_epi32
#define V_I_SUB _mm256_sub_epi32
#define V_I_MUL _mm256_mullo_epi32
#define V_I_XOR _mm256_xor_si256
#define V_I_AND _mm256_and_si256
#define V_I_OR _mm256_or_si256
#define V_I_MIN _mm256_min_epi32
#define V_I_SLL(i, s) _mm256_slli_epi32((i), (s))
#define V_I_SRL(i, s) _mm256_srli_epi32((i), (s))
#define V_I_SRA(i, s) _mm256_srai_epi32((i), (s))
#define V_I_IOTA() _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)
#define V_CVT_I(v) _mm256_cvtps_epi32(v)
#define V_CVT_F(i) _mm256_cvtepi32_ps(i)
static inline lut_t ew_lut_load_avx2(const float *p)
{
    lut_t l = {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)};
    return l;
}
static inline __m256 ew_lut_avx2(lut_t l, __m256i idx)
{   /* permutevar8x32 uses the low 3 bits; bit 3 chooses the half */
    __m256 a = _mm256_permutevar8x32_ps(l.lo, idx), b = _mm256_permutevar8x32_ps(l.hi, idx);
    return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
}
#define V_LUT_LOAD(p) ew_lut_load_avx2(p)
#define V_LUT(l, idx) ew_lut_avx2((l), (idx))
/* p * 2^n for integral n in [-252, 254]: two normal factors, so results underflow gradually */
static inline __m256 ew_exp2i_avx2(__m256 p, __m256 n)
{
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i h = _mm256_srai_epi32(ni, 1);
    __m256i s1 = _mm256_slli_epi32(_mm256_add_epi32(h, _mm256_set1_epi32(127)), 23);
    __m256i s2 = _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, h), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(s1)), _mm256_castsi256_ps(s2));
}
#define V_EXP2I(p, n) ew_exp2i_avx2((p), (n))
#define V_BF16_LOAD(p) _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16)
#define V_BF16_PACK(i) \
    _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32((i), (i)), 0x08))
#define V_BF16_STORE(p, i) _mm_storeu_si128((__m128i *)(p), V_BF16_PACK(i))
#define V_BF16_STREAM(p, i) _mm_stream_si128((__m128i *)(p), V_BF16_PACK(i))
#define V_ISNAN(v) _mm256_cmp_ps((v), (v), _CMP_UNORD_Q)
#define V_I_SEL(m, a, b) _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), (m)))
#elif defined(PYTPP_DT_F64)
typedef __m256d cmask_t;
#define V_LOADMF(p, m, f) _mm256_blendv_pd((f), _mm256_maskload_pd((p), (m)), _mm256_castsi256_pd(m))
#define V_SUB _mm256_sub_pd
#define V_DIV _mm256_div_pd
#define V_FNMA _mm256_fnmadd_pd
#define V_FMS _mm256_fmsub_pd
#define V_MAX _mm256_max_pd
#define V_MIN _mm256_min_pd
#define V_SQRT _mm256_sqrt_pd
#define V_ABS(a) _mm256_andnot_pd(_mm256_set1_pd(-0.0), (a))
#define V_ROUND(a) _mm256_round_pd((a), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define V_CMP(a, b, P) _mm256_cmp_pd((a), (b), (P))
#define V_SEL(m, a, b) _mm256_blendv_pd((a), (b), (m))
#define V_CMASK_BITS(m) ((uint32_t)_mm256_movemask_pd(m))
#define V_CMASK_FROM_BITS(b) _mm256_castsi256_pd(_mm256_cmpeq_epi64(                        \
    _mm256_and_si256(_mm256_set1_epi64x((long long)(b)), _mm256_setr_epi64x(1, 2, 4, 8)),     \
    _mm256_setr_epi64x(1, 2, 4, 8)))
#define V_CMASK_AND(a, b) _mm256_and_pd((a), (b))
static inline double ew_hsum_avx2d(__m256d v)
{
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}
static inline double ew_hmax_avx2d(__m256d v)
{
    __m128d s = _mm_max_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_max_sd(s, _mm_unpackhi_pd(s, s)));
}
static inline double ew_hmin_avx2d(__m256d v)
{
    __m128d s = _mm_min_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_min_sd(s, _mm_unpackhi_pd(s, s)));
}
static inline double ew_hmul_avx2d(__m256d v)
{
    __m128d s = _mm_mul_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_mul_sd(s, _mm_unpackhi_pd(s, s)));
}
#define V_HSUM(v) ew_hsum_avx2d(v)
#define V_HMUL(v) ew_hmul_avx2d(v)
#define V_HMAX(v) ew_hmax_avx2d(v)
#define V_HMIN(v) ew_hmin_avx2d(v)
/* 2^h for integral h in [-1022, 1023] (as double): h + 1.5 * 2^52 holds h in its low mantissa
 * bits, moved into the exponent field */
static inline __m256d ew_pow2_avx2d(__m256d h)
{
    const __m256d magic = _mm256_set1_pd(6755399441055744.0);
    const __m256i hi = _mm256_sub_epi64(_mm256_castpd_si256(_mm256_add_pd(h, magic)),
                                        _mm256_castpd_si256(magic));
    const __m256i e = _mm256_add_epi64(hi, _mm256_set1_epi64x(1023));
    return _mm256_castsi256_pd(_mm256_slli_epi64(e, 52));
}
/* p * 2^n for integral n in [-2044, 2046]: two normal factors, so results underflow gradually */
static inline __m256d ew_exp2i_avx2d(__m256d p, __m256d n)
{
    const __m256d h = _mm256_round_pd(_mm256_mul_pd(n, _mm256_set1_pd(0.5)),
                                      _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    return _mm256_mul_pd(_mm256_mul_pd(p, ew_pow2_avx2d(h)), ew_pow2_avx2d(_mm256_sub_pd(n, h)));
}
#define V_EXP2I(p, n) ew_exp2i_avx2d((p), (n))
#endif
#if defined(PYTPP_DT_F32)
#define V_I_GEU_BITS(a, b) ((uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(                 \
    _mm256_cmpeq_epi32(_mm256_max_epu32((a), (b)), (a)))))
#endif

/* 8-bit (de)quantization lanes (eltwise_quant.inc): VL bytes / float32 / bfloat16 / int32 values
 * as one compute vector, and integral in-range values stored as their low bytes */
static inline __m128i ew_load4_avx2(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm_cvtsi32_si128(v);
}
#if defined(PYTPP_DT_F32)
#define V_LD_U8(p) _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p))))
#define V_LD_S8(p) _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p))))
/* the low byte of each 32-bit lane: bytes 0-3 of each 128-bit half, the halves joined */
static inline void ew_st_bytes_avx2(void *p, __m256 v)
{
    const __m256i b = _mm256_shuffle_epi8(_mm256_cvtps_epi32(v), _mm256_setr_epi8(
        0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
    const __m128i w = _mm_unpacklo_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
    _mm_storel_epi64((__m128i *)p, w);
}
#define V_ST_BYTES(p, v) ew_st_bytes_avx2((p), (v))
#else
#define V_LD_U8(p) _mm256_cvtepi32_pd(_mm_cvtepu8_epi32(ew_load4_avx2(p)))
#define V_LD_S8(p) _mm256_cvtepi32_pd(_mm_cvtepi8_epi32(ew_load4_avx2(p)))
#define V_LD_I32(p) _mm256_cvtepi32_pd(_mm_loadu_si128((const __m128i *)(p)))
#define V_LD_F32(p) _mm256_cvtps_pd(_mm_loadu_ps(p))
#define V_LD_BF16(p) _mm256_cvtps_pd(_mm_castsi128_ps(_mm_slli_epi32(                          \
    _mm_cvtepu16_epi32(_mm_loadl_epi64((const __m128i *)(p))), 16)))
static inline void ew_st_bytes_avx2(void *p, __m256d v)
{
    const __m128i b = _mm_shuffle_epi8(_mm256_cvtpd_epi32(v),
                                       _mm_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1,
                                                     -1, -1, -1, -1));
    const int32_t w = _mm_cvtsi128_si32(b);
    memcpy(p, &w, 4);
}
#define V_ST_BYTES(p, v) ew_st_bytes_avx2((p), (v))
#endif

/* Large arrays: streaming stores (p 32-byte aligned) and the fence after them. */
#if defined(PYTPP_DT_F32)
#define V_STREAM(p, v) _mm256_stream_ps((p), (v))
/* any lane with |x| > c or NaN: the fast paths of the transcendentals cover |x| <= c */
#define V_ANY_ABS_GT(x, c) \
    (_mm256_movemask_ps(_mm256_cmp_ps(V_ABS(x), _mm256_set1_ps(c), _CMP_NLE_UQ)) != 0)
/* 16-bit halves: the low one of each 32-bit lane from lo, the high one from hi */
#define V_I_BLEND_HI16(lo, hi) _mm256_blend_epi16((lo), (hi), 0xAA)
#else
#define V_STREAM(p, v) _mm256_stream_pd((p), (v))
#endif
#define V_SFENCE() _mm_sfence()
#define EW_ISA_AVX2 1
