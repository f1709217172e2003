/* FMA throughput loop at the AVX-512 level: 16 independent chains hide the FMA latency. */
#include <immintrin.h>
#include "pytpp/peak.h"

#define CHAINS 16
#define PEAK_LOOP(NAME, VEC, SET1, FMA, ADD, CVT_SUM, FLOPS_PER_OP)                  \
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
        *sink = CVT_SUM(s);                                                          \
        return (double)iters * CHAINS * (FLOPS_PER_OP);                              \
    }

PEAK_LOOP(pytpp_peak_fma_f64_avx512, __m512d, _mm512_set1_pd, _mm512_fmadd_pd, _mm512_add_pd,
          _mm512_reduce_add_pd, 16)
PEAK_LOOP(pytpp_peak_fma_f32_avx512, __m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps,
          _mm512_reduce_add_ps, 32)
