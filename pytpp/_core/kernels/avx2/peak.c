/* FMA throughput loop at the AVX2 level: 12 chains of ymm FMAs (two pipes x latency 4, plus slack). */
#include <immintrin.h>
#include "pytpp/peak.h"

#define CHAINS 12
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
#define PEAK_LOOP(NAME, VEC, SET1, FMA, ADD, HSUM, FLOPS_PER_OP)                     \
    double NAME(int64_t iters, double *sink)                                         \
    {                                                                                \
        VEC acc[CHAINS];                                                             \
        const VEC x = SET1(0.999999), y = SET1(1e-7);                                \
        _Pragma("GCC unroll 16") for (int j = 0; j < CHAINS; ++j) acc[j] = SET1(j);  \
        for (int64_t i = 0; i < iters; ++i) {                                        \
            _Pragma("GCC unroll 16") for (int j = 0; j < CHAINS; ++j)                \
                acc[j] = FMA(acc[j], x, y);                                          \
        }                                                                            \
        VEC s = acc[0];                                                              \
        for (int j = 1; j < CHAINS; ++j) s = ADD(s, acc[j]);                         \
        *sink = HSUM(s);                                                             \
        return (double)iters * CHAINS * (FLOPS_PER_OP);                              \
    }

PEAK_LOOP(pytpp_peak_fma_f64_avx2, __m256d, _mm256_set1_pd, _mm256_fmadd_pd, _mm256_add_pd, hsum_pd, 8)
PEAK_LOOP(pytpp_peak_fma_f32_avx2, __m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, hsum_ps, 16)
