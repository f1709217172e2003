/* Four plain 8-bit rows byte-interleaved into raw quads (out[4j + e] = r_e[j]: the VNNI quad
 * panels of the vpdpbusd kernels), 32 columns per step on ymm: 8 in-lane unpacks and 4 lane
 * permutes per 128 output bytes, where 16-column steps on xmm spent 20 shuffles (a packed
 * 768 x 3072 B: most of the time of a 32-row product). For the AVX2 and AVX-512 shims. */
#ifndef PYTPP_I8_INTERLEAVE_YMM_H
#define PYTPP_I8_INTERLEAVE_YMM_H
#include <immintrin.h>
#include <stdint.h>
#include "pytpp/kernel_common.h"

PYTPP_INLINE void i8_interleave4_32(uint8_t *out, const uint8_t *r0, const uint8_t *r1,
                                    const uint8_t *r2, const uint8_t *r3, int flip)
{
    /* flip: bytes XOR 0x80 (an unsigned B stored as B - 128) */
    const __m256i fx = _mm256_set1_epi8(flip ? (char)0x80 : 0);
    const __m256i x0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)r0), fx);
    const __m256i x1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)r1), fx);
    const __m256i x2 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)r2), fx);
    const __m256i x3 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)r3), fx);
    /* byte pairs, then quads, of columns {0-7, 16-23} and {8-15, 24-31} */
    const __m256i lo01 = _mm256_unpacklo_epi8(x0, x1), hi01 = _mm256_unpackhi_epi8(x0, x1);
    const __m256i lo23 = _mm256_unpacklo_epi8(x2, x3), hi23 = _mm256_unpackhi_epi8(x2, x3);
    const __m256i q0 = _mm256_unpacklo_epi16(lo01, lo23);   /* columns 0-3 | 16-19 */
    const __m256i q1 = _mm256_unpackhi_epi16(lo01, lo23);   /* 4-7 | 20-23 */
    const __m256i q2 = _mm256_unpacklo_epi16(hi01, hi23);   /* 8-11 | 24-27 */
    const __m256i q3 = _mm256_unpackhi_epi16(hi01, hi23);   /* 12-15 | 28-31 */
    _mm256_storeu_si256((__m256i *)out, _mm256_permute2x128_si256(q0, q1, 0x20));
    _mm256_storeu_si256((__m256i *)(out + 32), _mm256_permute2x128_si256(q2, q3, 0x20));
    _mm256_storeu_si256((__m256i *)(out + 64), _mm256_permute2x128_si256(q0, q1, 0x31));
    _mm256_storeu_si256((__m256i *)(out + 96), _mm256_permute2x128_si256(q2, q3, 0x31));
}
#endif
