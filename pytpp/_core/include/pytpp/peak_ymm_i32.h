/* The 8-bit peak probes' ymm helpers (kernels/avx2/peak.c, kernels/avx_vnni/peak.c): an int32
 * lane sum, 32-bit lanes of operands like the kernels' (filled at run time: see peak_loop.h),
 * loads and stores. */
#ifndef PYTPP_PEAK_YMM_I32_H
#define PYTPP_PEAK_YMM_I32_H
#include <immintrin.h>
#include <stdint.h>

static inline double hsum_epi32(__m256i v)
{
    int32_t t[8];
    _mm256_storeu_si256((__m256i *)t, v);
    return (double)t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
/* lanes of widened u8 pairs (A) and s8 pairs (B); of u8 quads below 128 (7-bit A) and s8 quads */
static inline int32_t u8_pair(uint32_t j) { return (int32_t)(((j * 37u) & 0xffu) | ((j * 91u) & 0xffu) << 16); }
static inline int32_t s8_pair(uint32_t j)
{
    return (int32_t)((uint32_t)(uint16_t)(int16_t)(int8_t)(j * 13u) |
                     (uint32_t)(uint16_t)(int16_t)(int8_t)(j * 29u) << 16);
}
static inline int32_t u7_quad(uint32_t j) { return (int32_t)((j * 0x25135b07u) & 0x7f7f7f7fu); }
static inline int32_t s8_quad(uint32_t j) { return (int32_t)(j * 0x9e3779b1u); }
#define LOAD_I(p) _mm256_loadu_si256((const __m256i *)(p))
#define STORE_I(p, v) _mm256_storeu_si256((__m256i *)(p), (v))
/* raw u8 quads (vpdpbusd's A) */
static inline int32_t u8_quad(uint32_t j) { return (int32_t)(j * 0x25135b07u); }

#endif
