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
