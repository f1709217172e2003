/* FMA throughput at the AVX2 level: 12 chains of ymm FMAs (two pipes x latency 4, plus slack). */
#include <immintrin.h>
#include "pytpp/peak.h"
#include "pytpp/peak_loop.h"
#include "pytpp/peak_ymm_i32.h"

static double hsum_pd(__m256d v)
{
    double t[4];
    _mm256_storeu_pd(t, v);
    return t[0] + t[1] + t[2] + t[3];
}

static double hsum_ps(__m256 v)
{
    float t[8];
    _mm256_storeu_ps(t, v);
    return (double)t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}

PYTPP_PEAK_LOOP(pytpp_peak_fma_f64_avx2, 12, __m256d, _mm256_set1_pd, _mm256_fmadd_pd,
                _mm256_add_pd, hsum_pd, 8)
PYTPP_PEAK_LOOP(pytpp_peak_fma_f32_avx2, 12, __m256, _mm256_set1_ps, _mm256_fmadd_ps,
                _mm256_add_ps, hsum_ps, 16)

/* 8-bit GEMM rates without VNNI (32 ops per instruction group): exact 8-bit products as int16
 * pairs (vpmaddwd + vpaddd: 16 products), and 7-bit x 8-bit quads (vpmaddubsw, vpmaddwd by
 * ones, vpaddd: 32 products), the step of the 7-bit kernels and of peers that accept the
 * int16 saturation of vpmaddubsw on full-range u8. */
static __m256i i16_madd_add(__m256i acc, __m256i x, __m256i y)
{
    return _mm256_add_epi32(acc, _mm256_madd_epi16(x, y));
}
static __m256i u7_dot_add(__m256i acc, __m256i x, __m256i y)
{
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y),
                                                   _mm256_set1_epi16(1)));
}
PYTPP_PEAK_BCAST_LOOP(pytpp_peak_int8_madd_avx2, 6, 2, __m256i, 8, LOAD_I, STORE_I,
                      _mm256_set1_epi32, i16_madd_add, _mm256_add_epi32, hsum_epi32, 32, u8_pair,
                      s8_pair)
PYTPP_PEAK_BCAST_LOOP(pytpp_peak_int8_u7_avx2, 5, 2, __m256i, 8, LOAD_I, STORE_I,
                      _mm256_set1_epi32, u7_dot_add, _mm256_add_epi32, hsum_epi32, 64, u7_quad,
                      s8_quad)
