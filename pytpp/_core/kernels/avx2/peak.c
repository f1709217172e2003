/* FMA throughput at the AVX2 level: 12 chains of ymm FMAs (two pipes x latency 4, plus slack). */
#include <immintrin.h>
#include "pytpp/peak.h"
#include "pytpp/peak_loop.h"

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

/* 8-bit GEMM rate without VNNI: vpmaddwd + vpaddd on int16 pairs (16 products per pair of
 * instructions; the AVX2 8-bit kernels' inner step). 32 ops: 16 multiplies and 16 adds. */
static __m256i i16_set1(double x) { return _mm256_set1_epi16((short)(x * 1000.0)); }
static __m256i i16_madd_add(__m256i acc, __m256i x, __m256i y)
{
    return _mm256_add_epi32(acc, _mm256_madd_epi16(x, y));
}
static double hsum_epi32(__m256i v)
{
    int32_t t[8];
    _mm256_storeu_si256((__m256i *)t, v);
    return (double)t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
PYTPP_PEAK_LOOP(pytpp_peak_int8_madd_avx2, 12, __m256i, i16_set1, i16_madd_add, _mm256_add_epi32,
                hsum_epi32, 32)
