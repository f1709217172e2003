/* FMA throughput at the AVX-512 level: 16 chains of zmm FMAs hide the FMA latency. */
#include <immintrin.h>
#include "pytpp/peak.h"
#include "pytpp/peak_loop.h"

PYTPP_PEAK_LOOP(pytpp_peak_fma_f64_avx512, 16, __m512d, _mm512_set1_pd, _mm512_fmadd_pd,
                _mm512_add_pd, _mm512_reduce_add_pd, 16)
PYTPP_PEAK_LOOP(pytpp_peak_fma_f32_avx512, 16, __m512, _mm512_set1_ps, _mm512_fmadd_ps,
                _mm512_add_ps, _mm512_reduce_add_ps, 32)

/* 8-bit GEMM rate without VNNI: vpmaddwd + vpaddd on int16 pairs (AVX-512BW): 64 ops. */
static __m512i i16_set1(double x) { return _mm512_set1_epi16((short)(x * 1000.0)); }
static __m512i i16_madd_add(__m512i acc, __m512i x, __m512i y)
{
    return _mm512_add_epi32(acc, _mm512_madd_epi16(x, y));
}
static double hsum_epi32(__m512i v) { return (double)_mm512_reduce_add_epi32(v); }
PYTPP_PEAK_LOOP(pytpp_peak_int8_madd_avx512, 16, __m512i, i16_set1, i16_madd_add,
                _mm512_add_epi32, hsum_epi32, 64)
