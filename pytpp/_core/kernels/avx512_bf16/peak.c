/* vdpbf16ps throughput: each instruction does 32 bf16 pair products summed into 16 fp32 lanes. */
#include <immintrin.h>
#include "pytpp/peak.h"

#define CHAINS 16
double pytpp_peak_bf16_dot_avx512(int64_t iters, double *sink)
{
    __m512 acc[CHAINS];
    const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3380);
    _Pragma("GCC unroll 16") for (int j = 0; j < CHAINS; ++j) acc[j] = _mm512_set1_ps((float)j);
    for (int64_t i = 0; i < iters; ++i) {
        _Pragma("GCC unroll 16") for (int j = 0; j < CHAINS; ++j)
            acc[j] = _mm512_dpbf16_ps(acc[j], x, y);
    }
    __m512 s = acc[0];
    for (int j = 1; j < CHAINS; ++j) s = _mm512_add_ps(s, acc[j]);
    *sink = _mm512_reduce_add_ps(s);
    return (double)iters * CHAINS * 64;
}
