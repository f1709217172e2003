/* vpdpbusd throughput: each instruction does 64 u8 x s8 products summed into 16 int32 lanes. */
#include <immintrin.h>
#include "pytpp/peak.h"

#define CHAINS 16
double pytpp_peak_int8_dot_avx512(int64_t iters, double *sink)
{
    __m512i acc[CHAINS];
    const __m512i x = _mm512_set1_epi8(3), y = _mm512_set1_epi8(-2);
    _Pragma("GCC unroll 16") for (int j = 0; j < CHAINS; ++j) acc[j] = _mm512_set1_epi32(j);
    for (int64_t i = 0; i < iters; ++i) {
        _Pragma("GCC unroll 16") for (int j = 0; j < CHAINS; ++j)
            acc[j] = _mm512_dpbusd_epi32(acc[j], x, y);
    }
    __m512i s = acc[0];
    for (int j = 1; j < CHAINS; ++j) s = _mm512_add_epi32(s, acc[j]);
    *sink = (double)_mm512_reduce_add_epi32(s);
    return (double)iters * CHAINS * 128;
}
