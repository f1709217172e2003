/* 8-bit GEMM shims for AVX-512: vpdpbusd on raw u8 x s8 quads (AVX512_VNNI; define
 * PYTPP_I8_VNNI), else AVX-512BW on operands widened to int16 pairs (vpmaddwd + vpaddd, exact).
 * Masked C tails through __mmask16. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include "pytpp/gemm_pk_shapes.h"
#include "pytpp/i8_interleave_ymm.h"

typedef __m512i ivec_t;
#define I8_VL 16
#define I8_MASK(r) ((__mmask16)((1u << (r)) - 1u))
#define V_I8_ZERO() _mm512_setzero_si512()
#define V_I8_ADD(x, y) _mm512_add_epi32((x), (y))
#define V_I8_LOAD(p) _mm512_loadu_si512((const void *)(p))
#define V_I8_LOADM(p, r) _mm512_maskz_loadu_epi32(I8_MASK(r), (const void *)(p))
#define V_I8_STORE(p, v) _mm512_storeu_si512((void *)(p), (v))
#define V_I8_STOREM(p, r, v) _mm512_mask_storeu_epi32((void *)(p), I8_MASK(r), (v))
#define V_I8_LOAD_B(p) _mm512_loadu_si512((const void *)(p))
PYTPP_INLINE __m512i i8_bcast32(const uint8_t *p)
{
    int32_t x;
    memcpy(&x, p, 4);
    return _mm512_set1_epi32(x);
}
#define V_I8_BCAST_A(p) i8_bcast32(p)
#define V_I8_FLIP(v) _mm512_xor_si512((v), _mm512_set1_epi8((char)0x80))
#if defined(PYTPP_I8_VNNI)
#define PYTPP_ISA_NAME avx512_vnni
#define I8_GROUP 4
#define I8_RAW_LANES   /* a lane is 4 input bytes: direct kernels */
#define V_I8_DOT(acc, a, b) _mm512_dpbusd_epi32((acc), (a), (b))
/* 32 zmm: 12x2 accumulators + 2 B vectors + the broadcast. */
#define I8_SHAPES(X) PYTPP_ROWS(12)(X, 1) PYTPP_ROWS(12)(X, 2)
#define I8_MR_MAIN 12
#else
#define PYTPP_ISA_NAME avx512
#define I8_GROUP 2
#define V_I8_DOT(acc, a, b) _mm512_add_epi32((acc), _mm512_madd_epi16((a), (b)))
/* 32 zmm: 12x2 accumulators + 2 B vectors + the broadcast + one product. */
#define I8_SHAPES(X) PYTPP_ROWS(12)(X, 1) PYTPP_ROWS(12)(X, 2)
#define I8_MR_MAIN 12
#endif
#define I8_NV_MAIN 2

/* Small-m kernels on unpacked B (gemm_lane.inc I8_GV_*): 16 columns of 4 k values in lanes. */
#if defined(PYTPP_I8_VNNI)
/* raw quads: four plain rows byte-interleaved, or a VNNI quad row as it is */
PYTPP_INLINE void i8_gv_plain(__m512i *out, const uint8_t *r0, const uint8_t *r1,
                              const uint8_t *r2, const uint8_t *r3, int sgn)
{
    (void)sgn;
    const __m128i x0 = _mm_loadu_si128((const __m128i *)r0), x1 = _mm_loadu_si128((const __m128i *)r1);
    const __m128i x2 = _mm_loadu_si128((const __m128i *)r2), x3 = _mm_loadu_si128((const __m128i *)r3);
    const __m128i lo01 = _mm_unpacklo_epi8(x0, x1), hi01 = _mm_unpackhi_epi8(x0, x1);
    const __m128i lo23 = _mm_unpacklo_epi8(x2, x3), hi23 = _mm_unpackhi_epi8(x2, x3);
    __m512i v = _mm512_castsi128_si512(_mm_unpacklo_epi16(lo01, lo23));
    v = _mm512_inserti32x4(v, _mm_unpackhi_epi16(lo01, lo23), 1);
    v = _mm512_inserti32x4(v, _mm_unpacklo_epi16(hi01, hi23), 2);
    out[0] = _mm512_inserti32x4(v, _mm_unpackhi_epi16(hi01, hi23), 3);
}
#define I8_GV_QUAD(out, src, sgn) ((out)[0] = _mm512_loadu_si512((const void *)(src)))
/* out[4j + e] = r_e[j] (XOR 0x80 with flip), 32 columns a step, then 16 (the B packers' plain
 * rows); returns the columns done */
PYTPP_INLINE int64_t i8_interleave4(uint8_t *out, const uint8_t *r0, const uint8_t *r1,
                                    const uint8_t *r2, const uint8_t *r3, int64_t cols, int flip)
{
    int64_t j = 0;
    for (; j + 32 <= cols; j += 32)
        i8_interleave4_32(out + 4 * j, r0 + j, r1 + j, r2 + j, r3 + j, flip);
    for (; j + 16 <= cols; j += 16) {
        __m512i v;
        i8_gv_plain(&v, r0 + j, r1 + j, r2 + j, r3 + j, 0);
        _mm512_storeu_si512((void *)(out + 4 * j), flip ? V_I8_FLIP(v) : v);
    }
    return j;
}
#define I8_INTERLEAVE4(out, r0, r1, r2, r3, cols, flip)                                       \
    i8_interleave4((out), (r0), (r1), (r2), (r3), (cols), (flip))
#else
/* int16 pairs: rows (0, 1) and (2, 3) interleaved and widened, or a quad row split in two */
PYTPP_INLINE __m512i i8_gv_widen(__m256i x, int sgn)
{
    return sgn ? _mm512_cvtepi8_epi16(x) : _mm512_cvtepu8_epi16(x);
}
PYTPP_INLINE __m512i i8_gv_pair(const uint8_t *r0, const uint8_t *r1, int sgn)
{
    const __m128i x0 = _mm_loadu_si128((const __m128i *)r0), x1 = _mm_loadu_si128((const __m128i *)r1);
    return i8_gv_widen(_mm256_set_m128i(_mm_unpackhi_epi8(x0, x1), _mm_unpacklo_epi8(x0, x1)),
                       sgn);
}
PYTPP_INLINE void i8_gv_plain(__m512i *out, const uint8_t *r0, const uint8_t *r1,
                              const uint8_t *r2, const uint8_t *r3, int sgn)
{
    out[0] = i8_gv_pair(r0, r1, sgn);
    out[1] = i8_gv_pair(r2, r3, sgn);
}
PYTPP_INLINE void i8_gv_quad(__m512i *out, const uint8_t *src, int sgn)
{
    /* per 128-bit lane (4 columns): [k pairs 0-1 | k pairs 2-3], then the halves gathered */
    const __m512i pairs = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6,
                                                               7, 10, 11, 14, 15));
    const __m512i order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
    const __m512i v = _mm512_permutexvar_epi64(
        order, _mm512_shuffle_epi8(_mm512_loadu_si512((const void *)src), pairs));
    out[0] = i8_gv_widen(_mm512_castsi512_si256(v), sgn);
    out[1] = i8_gv_widen(_mm512_extracti64x4_epi64(v, 1), sgn);
}
#define I8_GV_QUAD(out, src, sgn) i8_gv_quad((out), (src), (sgn))
#endif
#define I8_GV_PLAIN(out, r0, r1, r2, r3, sgn) i8_gv_plain((out), (r0), (r1), (r2), (r3), (sgn))
