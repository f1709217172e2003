/* FMA throughput at the AVX-512 level: 16 chains of zmm FMAs hide the FMA latency. */
#include <immintrin.h>
#include "pytpp/peak.h"
#include "pytpp/peak_loop.h"

PYTPP_PEAK_LOOP(pytpp_peak_fma_f64_avx512, 16, __m512d, _mm512_set1_pd, _mm512_fmadd_pd,
                _mm512_add_pd, _mm512_reduce_add_pd, 16)
PYTPP_PEAK_LOOP(pytpp_peak_fma_f32_avx512, 16, __m512, _mm512_set1_ps, _mm512_fmadd_ps,
                _mm512_add_ps, _mm512_reduce_add_ps, 32)

/* 8-bit GEMM rate without VNNI: vpmaddwd + vpaddd on int16 pairs (AVX-512BW): 64 ops. */
static __m512i i16_madd_add(__m512i acc, __m512i x, __m512i y)
{
    return _mm512_add_epi32(acc, _mm512_madd_epi16(x, y));
}
static double hsum_epi32(__m512i v) { return (double)_mm512_reduce_add_epi32(v); }
/* lanes of widened u8 pairs (A) and s8 pairs (B), as the kernels' */
static int32_t u8_pair(uint32_t j) { return (int32_t)(((j * 37u) & 0xffu) | ((j * 91u) & 0xffu) << 16); }
static int32_t s8_pair(uint32_t j)
{
    return (int32_t)((uint32_t)(uint16_t)(int16_t)(int8_t)(j * 13u) |
                     (uint32_t)(uint16_t)(int16_t)(int8_t)(j * 29u) << 16);
}
#define LOAD_I(p) _mm512_loadu_si512((const void *)(p))
#define STORE_I(p, v) _mm512_storeu_si512((void *)(p), (v))
PYTPP_PEAK_BCAST_LOOP(pytpp_peak_int8_madd_avx512, 6, 4, __m512i, 16, LOAD_I, STORE_I,
                      _mm512_set1_epi32, i16_madd_add, _mm512_add_epi32, hsum_epi32, 64, u8_pair,
                      s8_pair)
