/* float32 rows stored as bf16 with vcvtneps2bf16 (AVX512_BF16): the to_bf16 of the native bf16
 * table (gemm_goto.h). Round to nearest even, NaN to a quiet NaN keeping sign and upper payload
 * (the emulated converter's bits); a denormal input becomes a signed zero, so callers feed it
 * values computed under DAZ + FTZ, where the two converters agree on every input. */
#include <immintrin.h>
#include <stdint.h>

static void tpp_bf16n_to_bf16_avx512_bf16(int64_t n, const void *xv, void *yv)
{
    const float *x = (const float *)xv;
    uint16_t *y = (uint16_t *)yv;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(void *)(y + i),
                            (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        _mm256_mask_storeu_epi16(y + i, m,
                                 (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i)));
    }
}
