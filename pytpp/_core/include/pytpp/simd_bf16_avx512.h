/* bf16 shims for AVX-512: native (AVX512_BF16: one vdpbf16ps per pair of products) and the
 * paper's emulation (Fig. 4) for AVX-512 without BF16. Define PYTPP_BF16_NATIVE for the former. */
#define PYTPP_DT_F32   /* C and its accumulators are fp32: the fp32 shim's V_* */
#include "pytpp/simd_avx512.h"
#include <stdint.h>
#include <string.h>

static inline __m512i bf16_bcast_pair(const uint16_t *p)
{
    int32_t x;
    memcpy(&x, p, 4);
    return _mm512_set1_epi32(x);
}

#if defined(PYTPP_BF16_NATIVE)
#undef PYTPP_ISA_NAME
#define PYTPP_ISA_NAME avx512_bf16
typedef __m512i bvec_t;
#define V_BF16_ENTER() ((void)0)
#define V_BF16_LEAVE() ((void)0)
#define V_BF16_PREP_B(p, o, e) ((o) = _mm512_loadu_si512((const void *)(p)), (e) = (o))
#define V_BF16_PREP_A(p, o, e) ((o) = bf16_bcast_pair(p), (e) = (o))
#define V_BF16_PREP_BM(p, m, o, e) ((o) = _mm512_maskz_loadu_epi32((m), (const void *)(p)), (e) = (o))
#define V_BF16_DOT(acc, ao, ae, bo, be) _mm512_dpbf16_ps((acc), (__m512bh)(ao), (__m512bh)(bo))
#else
typedef __m512 bvec_t;
/* DAZ + FTZ for the FMAs, as vdpbf16ps has them; MXCSR is per thread and restored on exit. */
#define V_BF16_ENTER() const unsigned bf16_csr_ = _mm_getcsr(); _mm_setcsr(bf16_csr_ | 0x8040u)
#define V_BF16_LEAVE() _mm_setcsr(bf16_csr_)
/* odd (upper) halves: a zero-masked 16-bit load keeps them in the fp32 high bits; even (lower)
 * halves: a plain load shifted left by 16. */
#define V_BF16_PREP_B(p, o, e)                                                              \
    ((o) = _mm512_castsi512_ps(_mm512_maskz_loadu_epi16((__mmask32)0xAAAAAAAAu, (p))),      \
     (e) = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_loadu_si512((const void *)(p)), 16)))
#define V_BF16_PREP_A(p, o, e)                                                              \
    do {                                                                                    \
        const __m512i pair_ = bf16_bcast_pair(p);                                           \
        (o) = _mm512_castsi512_ps(_mm512_maskz_mov_epi16((__mmask32)0xAAAAAAAAu, pair_));   \
        (e) = _mm512_castsi512_ps(_mm512_slli_epi32(pair_, 16));                            \
    } while (0)
/* the pairs of a masked 32-bit load (lanes past the mask zero) */
#define V_BF16_PREP_BM(p, m, o, e)                                                          \
    do {                                                                                    \
        const __m512i raw_ = _mm512_maskz_loadu_epi32((m), (const void *)(p));              \
        (o) = _mm512_castsi512_ps(_mm512_maskz_mov_epi16((__mmask32)0xAAAAAAAAu, raw_));    \
        (e) = _mm512_castsi512_ps(_mm512_slli_epi32(raw_, 16));                             \
    } while (0)
#define V_BF16_DOT(acc, ao, ae, bo, be) _mm512_fmadd_ps((ae), (be), _mm512_fmadd_ps((ao), (bo), (acc)))
#endif

#define BF16_SHAPES(X) PYTPP_ROWS(12)(X, 1) PYTPP_ROWS(12)(X, 2)
#define BF16_MR_MAIN PYTPP_PK_MR_AVX512
#define BF16_NV_MAIN PYTPP_PK_NV
