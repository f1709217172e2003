/* bf16 shim for AVX2 + FMA: the paper's emulation without masks (and/shift make fp32 of the
 * bf16 halves), two FP32 FMAs per pair under MXCSR DAZ+FTZ, vmaskmov for C tails. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define BF16_ISA_NAME avx2
typedef __m256 bacc_t;
typedef __m256 bvec_t;
typedef __m256i bmask_t;
#define BVL 8
#define B_ZERO() _mm256_setzero_ps()
#define B_LOADC(p) _mm256_loadu_ps(p)
#define B_LOADCM(p, m) _mm256_maskload_ps((p), (m))
#define B_STOREC(p, v) _mm256_storeu_ps((p), (v))
#define B_STORECM(p, m, v) _mm256_maskstore_ps((p), (m), (v))
static const int32_t pytpp_bf16_avx2_mask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
#define B_MASK(r) _mm256_loadu_si256((const __m256i *)(pytpp_bf16_avx2_mask + 8 - (r)))

#define B_ENTER() const unsigned bf16_csr_ = _mm_getcsr(); _mm_setcsr(bf16_csr_ | 0x8040u)
#define B_LEAVE() _mm_setcsr(bf16_csr_)
#define BF16_HI_MASK _mm256_set1_epi32((int)0xFFFF0000u)
#define B_PREP_B(p, o, e)                                                                   \
    do {                                                                                    \
        const __m256i raw_ = _mm256_loadu_si256((const __m256i *)(p));                      \
        (o) = _mm256_castsi256_ps(_mm256_and_si256(raw_, BF16_HI_MASK));                    \
        (e) = _mm256_castsi256_ps(_mm256_slli_epi32(raw_, 16));                             \
    } while (0)
#define B_PREP_A(p, o, e)                                                                   \
    do {                                                                                    \
        int32_t x_;                                                                         \
        memcpy(&x_, (p), 4);                                                                \
        const __m256i pair_ = _mm256_set1_epi32(x_);                                        \
        (o) = _mm256_castsi256_ps(_mm256_and_si256(pair_, BF16_HI_MASK));                   \
        (e) = _mm256_castsi256_ps(_mm256_slli_epi32(pair_, 16));                            \
    } while (0)
#define B_DOT(acc, ao, ae, bo, be) _mm256_fmadd_ps((ae), (be), _mm256_fmadd_ps((ao), (bo), (acc)))

/* 16 ymm: 6x2 accumulators + 4 B halves + 2 A halves. */
#define BF16_SHAPES(X) PYTPP_ROWS(6)(X, 1) PYTPP_ROWS(6)(X, 2)
#define BF16_MR_MAIN PYTPP_PK_MR_AVX2
#define BF16_NV_MAIN PYTPP_PK_NV
