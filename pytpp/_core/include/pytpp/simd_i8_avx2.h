/* 8-bit GEMM shim for AVX2 (no VNNI): operands widened to int16 while packing, one vpmaddwd
 * (exact: |255 * -128| * 2 < 2^31) and one vpaddd per pair of k values and 8 columns. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include "pytpp/gemm_pk_shapes.h"
#include "pytpp/i8_interleave_ymm.h"

typedef __m256i ivec_t;
#define I8_VL 8
#define V_I8_FLIP(v) _mm256_xor_si256((v), _mm256_set1_epi8((char)0x80))
#if defined(PYTPP_I8_AVX_VNNI)
/* AVX-VNNI (VEX vpdpbusd on ymm, CPUs with it and without AVX-512): u8 x s8 raw quads, one
 * instruction per 32 products, the AVX512_VNNI kernels' layout at half the width. */
#define PYTPP_ISA_NAME avx_vnni
#define I8_GROUP 4
#define I8_RAW_LANES   /* a lane is 4 input bytes: direct kernels */
#define PYTPP_I8_QUADS
#define V_I8_DOT(acc, a, b) _mm256_dpbusd_avx_epi32((acc), (a), (b))
#elif defined(PYTPP_I8_U7)
/* 7-bit A (0..127) x s8 B on raw quads: vpmaddubsw's int16 pair sums stay within
 * 2 * 127 * 128 < 32767, so they never saturate (exact), then vpmaddwd by ones and vpaddd:
 * 3 instructions per 32 products where the int16 kernels spend 4. */
#define PYTPP_ISA_NAME avx2_u7
#define PYTPP_I8_QUADS
#define I8_GROUP 4
#define I8_RAW_LANES   /* a lane is 4 input bytes: direct kernels */
#define V_I8_DOT(acc, a, b)                                                                  \
    _mm256_add_epi32((acc), _mm256_madd_epi16(_mm256_maddubs_epi16((a), (b)),                 \
                                              _mm256_set1_epi16(1)))
#else
#define PYTPP_ISA_NAME avx2
#define I8_GROUP 2
#define V_I8_DOT(acc, a, b) _mm256_add_epi32((acc), _mm256_madd_epi16((a), (b)))
#endif
static const int32_t pytpp_i8_avx2_mask[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                               0, 0, 0, 0, 0, 0, 0, 0};
#define I8_MASK(r) _mm256_loadu_si256((const __m256i *)(pytpp_i8_avx2_mask + 8 - (r)))
#define V_I8_ZERO() _mm256_setzero_si256()
#define V_I8_ADD(x, y) _mm256_add_epi32((x), (y))
#define V_I8_LOAD(p) _mm256_loadu_si256((const __m256i *)(p))
#define V_I8_LOADM(p, r) _mm256_maskload_epi32((const int *)(p), I8_MASK(r))
#define V_I8_STORE(p, v) _mm256_storeu_si256((__m256i *)(p), (v))
#define V_I8_STOREM(p, r, v) _mm256_maskstore_epi32((int *)(p), I8_MASK(r), (v))
#define V_I8_LOAD_B(p) _mm256_loadu_si256((const __m256i *)(p))
PYTPP_INLINE __m256i i8_bcast32(const uint8_t *p)
{
    int32_t x;
    memcpy(&x, p, 4);
    return _mm256_set1_epi32(x);
}
#define V_I8_BCAST_A(p) i8_bcast32(p)

#if !defined(PYTPP_I8_QUADS)
PYTPP_INLINE __m256i i8_widen16(__m128i x, int sgn)
{
    return sgn ? _mm256_cvtepi8_epi16(x) : _mm256_cvtepu8_epi16(x);
}
/* out[2j], out[2j + 1] = r0[j], r1[j] widened, 16 columns at a time */
PYTPP_INLINE int64_t i8_interleave2(int16_t *out, const uint8_t *r0, const uint8_t *r1,
                                    int64_t cols, int sgn)
{
    int64_t j = 0;
    for (; j + 16 <= cols; j += 16) {
        const __m128i a = _mm_loadu_si128((const __m128i *)(r0 + j));
        const __m128i b = _mm_loadu_si128((const __m128i *)(r1 + j));
        _mm256_storeu_si256((__m256i *)(out + 2 * j), i8_widen16(_mm_unpacklo_epi8(a, b), sgn));
        _mm256_storeu_si256((__m256i *)(out + 2 * j + 16),
                            i8_widen16(_mm_unpackhi_epi8(a, b), sgn));
    }
    return j;
}
/* a VNNI quad row (4 bytes per column) into the pair rows of its k values 0-1 and 2-3 */
PYTPP_INLINE int64_t i8_quad_pairs(int16_t *out, int16_t *out1, const uint8_t *src, int64_t cols,
                                   int sgn)
{
    const __m256i pairs = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                           0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    int64_t j = 0;
    for (; j + 8 <= cols; j += 8) {
        __m256i v = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(src + 4 * j)), pairs);
        v = _mm256_permute4x64_epi64(v, 0xD8);   /* [pairs 0-1 | pairs 2-3] of 8 columns */
        _mm256_storeu_si256((__m256i *)(out + 2 * j), i8_widen16(_mm256_castsi256_si128(v), sgn));
        _mm256_storeu_si256((__m256i *)(out1 + 2 * j),
                            i8_widen16(_mm256_extracti128_si256(v, 1), sgn));
    }
    return j;
}
#define I8_INTERLEAVE2(out, r0, r1, cols, sgn) i8_interleave2((out), (r0), (r1), (cols), (sgn))
#define I8_QUAD_PAIRS(out, out1, src, cols, sgn) i8_quad_pairs((out), (out1), (src), (cols), (sgn))
#endif


/* Small-m kernels on unpacked B (gemm_lane.inc I8_GV_*): 8 columns of 4 k values in lanes. */
#if defined(PYTPP_I8_QUADS)
/* out[4j + e] = r_e[j] (XOR 0x80 with flip), 32 columns a step, then 16 (the B packers' plain
 * rows); returns the columns done */
PYTPP_INLINE int64_t i8_interleave4(uint8_t *out, const uint8_t *r0, const uint8_t *r1,
                                    const uint8_t *r2, const uint8_t *r3, int64_t cols, int flip)
{
    int64_t j = 0;
    for (; j + 32 <= cols; j += 32)
        i8_interleave4_32(out + 4 * j, r0 + j, r1 + j, r2 + j, r3 + j, flip);
    const __m128i fx = _mm_set1_epi8(flip ? (char)0x80 : 0);
    for (; j + 16 <= cols; j += 16) {
        const __m128i x0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(r0 + j)), fx);
        const __m128i x1 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(r1 + j)), fx);
        const __m128i x2 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(r2 + j)), fx);
        const __m128i x3 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(r3 + j)), fx);
        const __m128i lo01 = _mm_unpacklo_epi8(x0, x1), hi01 = _mm_unpackhi_epi8(x0, x1);
        const __m128i lo23 = _mm_unpacklo_epi8(x2, x3), hi23 = _mm_unpackhi_epi8(x2, x3);
        _mm256_storeu_si256((__m256i *)(out + 4 * j),
                            _mm256_set_m128i(_mm_unpackhi_epi16(lo01, lo23),
                                             _mm_unpacklo_epi16(lo01, lo23)));
        _mm256_storeu_si256((__m256i *)(out + 4 * j + 32),
                            _mm256_set_m128i(_mm_unpackhi_epi16(hi01, hi23),
                                             _mm_unpacklo_epi16(hi01, hi23)));
    }
    return j;
}
#define I8_INTERLEAVE4(out, r0, r1, r2, r3, cols, flip)                                       \
    i8_interleave4((out), (r0), (r1), (r2), (r3), (cols), (flip))
/* raw quads: four plain rows byte-interleaved, or a VNNI quad row as it is */
PYTPP_INLINE void i8_gv_plain(__m256i *out, const uint8_t *r0, const uint8_t *r1,
                              const uint8_t *r2, const uint8_t *r3, int sgn)
{
    (void)sgn;
    const __m128i r01 = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)r0),
                                          _mm_loadl_epi64((const __m128i *)r1));
    const __m128i r23 = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)r2),
                                          _mm_loadl_epi64((const __m128i *)r3));
    out[0] = _mm256_set_m128i(_mm_unpackhi_epi16(r01, r23), _mm_unpacklo_epi16(r01, r23));
}
#define I8_GV_QUAD(out, src, sgn) ((out)[0] = _mm256_loadu_si256((const __m256i *)(src)))
#else
/* int16 pairs: rows (0, 1) and (2, 3) interleaved and widened, or a quad row split in two */
PYTPP_INLINE __m256i i8_gv_pair(const uint8_t *r0, const uint8_t *r1, int sgn)
{
    return i8_widen16(_mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)r0),
                                        _mm_loadl_epi64((const __m128i *)r1)), sgn);
}
PYTPP_INLINE void i8_gv_plain(__m256i *out, const uint8_t *r0, const uint8_t *r1,
                              const uint8_t *r2, const uint8_t *r3, int sgn)
{
    out[0] = i8_gv_pair(r0, r1, sgn);
    out[1] = i8_gv_pair(r2, r3, sgn);
}
PYTPP_INLINE void i8_gv_quad(__m256i *out, const uint8_t *src, int sgn)
{
    const __m256i pairs = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                           0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    __m256i v = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)src), pairs);
    v = _mm256_permute4x64_epi64(v, 0xD8);
    out[0] = i8_widen16(_mm256_castsi256_si128(v), sgn);
    out[1] = i8_widen16(_mm256_extracti128_si256(v, 1), sgn);
}
#define I8_GV_QUAD(out, src, sgn) i8_gv_quad((out), (src), (sgn))
#endif
#define I8_GV_PLAIN(out, r0, r1, r2, r3, sgn) i8_gv_plain((out), (r0), (r1), (r2), (r3), (sgn))

#if defined(PYTPP_I8_U7)
/* 16 ymm: 5x2 accumulators + 2 B vectors + the broadcast + one product + the int16 ones (6
 * rows would spill an accumulator to the stack at every k step). */
#define I8_SHAPES(X) PYTPP_ROWS(5)(X, 1) PYTPP_ROWS(5)(X, 2)
#define I8_MR_MAIN 5
#else
/* 16 ymm: 6x2 accumulators + 2 B vectors + the broadcast + one product. */
#define I8_SHAPES(X) PYTPP_ROWS(6)(X, 1) PYTPP_ROWS(6)(X, 2)
#define I8_MR_MAIN 6
#endif
#define I8_NV_MAIN 2
