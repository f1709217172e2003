/* FMA throughput at the AVX-512 level: 16 chains of zmm FMAs hide the FMA latency. */
#include <immintrin.h>
#include "pytpp/peak.h"
#include "pytpp/peak_loop.h"

PYTPP_PEAK_LOOP(pytpp_peak_fma_f64_avx512, 16, __m512d, _mm512_set1_pd, _mm512_fmadd_pd,
                _mm512_add_pd, _mm512_reduce_add_pd, 16)
PYTPP_PEAK_LOOP(pytpp_peak_fma_f32_avx512, 16, __m512, _mm512_set1_ps, _mm512_fmadd_ps,
                _mm512_add_ps, _mm512_reduce_add_ps, 32)
