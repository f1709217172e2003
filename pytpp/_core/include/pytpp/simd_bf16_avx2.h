/* bf16 shim for AVX2 + FMA: the paper's emulation without masks (and/shift make fp32 of the
 * bf16 halves), two FP32 FMAs per pair under MXCSR DAZ+FTZ, vmaskmov for C tails. */
#define PYTPP_DT_F32   /* C and its accumulators are fp32: the fp32 shim's V_* */
#include "pytpp/simd_avx2.h"
#include <stdint.h>
#include <string.h>

typedef __m256 bvec_t;

#define V_BF16_ENTER() const unsigned bf16_csr_ = _mm_getcsr(); _mm_setcsr(bf16_csr_ | 0x8040u)
#define V_BF16_LEAVE() _mm_setcsr(bf16_csr_)
#define BF16_HI_MASK _mm256_set1_epi32((int)0xFFFF0000u)
#define V_BF16_PREP_B(p, o, e)                                                              \
    do {                                                                                    \
        const __m256i raw_ = _mm256_loadu_si256((const __m256i *)(p));                      \
        (o) = _mm256_castsi256_ps(_mm256_and_si256(raw_, BF16_HI_MASK));                    \
        (e) = _mm256_castsi256_ps(_mm256_slli_epi32(raw_, 16));                             \
    } while (0)
/* the pairs of a masked 32-bit load (mask_t: the fp32 shim's lane mask; lanes past it zero) */
#define V_BF16_PREP_BM(p, m, o, e)                                                          \
    do {                                                                                    \
        const __m256i raw_ = _mm256_maskload_epi32((const int *)(p), (m));                  \
        (o) = _mm256_castsi256_ps(_mm256_and_si256(raw_, BF16_HI_MASK));                    \
        (e) = _mm256_castsi256_ps(_mm256_slli_epi32(raw_, 16));                             \
    } while (0)
#define V_BF16_PREP_A(p, o, e)                                                              \
    do {                                                                                    \
        int32_t x_;                                                                         \
        memcpy(&x_, (p), 4);                                                                \
        const __m256i pair_ = _mm256_set1_epi32(x_);                                        \
        (o) = _mm256_castsi256_ps(_mm256_and_si256(pair_, BF16_HI_MASK));                   \
        (e) = _mm256_castsi256_ps(_mm256_slli_epi32(pair_, 16));                            \
    } while (0)
#define V_BF16_DOT(acc, ao, ae, bo, be) _mm256_fmadd_ps((ae), (be), _mm256_fmadd_ps((ao), (bo), (acc)))

/* 16 ymm: 6x2 accumulators + 4 B halves + 2 A halves. */
#define BF16_SHAPES(X) PYTPP_ROWS(6)(X, 1) PYTPP_ROWS(6)(X, 2)
#define BF16_MR_MAIN PYTPP_PK_MR_AVX2
#define BF16_NV_MAIN PYTPP_PK_NV
