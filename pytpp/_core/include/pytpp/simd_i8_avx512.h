/* 8-bit GEMM shims for AVX-512: vpdpbusd on raw u8 x s8 quads (AVX512_VNNI; define
 * PYTPP_I8_VNNI), else AVX-512BW on operands widened to int16 pairs (vpmaddwd + vpaddd, exact).
 * Masked C tails through __mmask16. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include "pytpp/gemm_pk_shapes.h"

typedef __m512i ivec_t;
#define I8_VL 16
#define I8_MASK(r) ((__mmask16)((1u << (r)) - 1u))
#define V_I8_ZERO() _mm512_setzero_si512()
#define V_I8_LOAD(p) _mm512_loadu_si512((const void *)(p))
#define V_I8_LOADM(p, r) _mm512_maskz_loadu_epi32(I8_MASK(r), (const void *)(p))
#define V_I8_STORE(p, v) _mm512_storeu_si512((void *)(p), (v))
#define V_I8_STOREM(p, r, v) _mm512_mask_storeu_epi32((void *)(p), I8_MASK(r), (v))
#define V_I8_LOAD_B(p) _mm512_loadu_si512((const void *)(p))
PYTPP_INLINE __m512i i8_bcast32(const uint8_t *p)
{
    int32_t x;
    memcpy(&x, p, 4);
    return _mm512_set1_epi32(x);
}
#define V_I8_BCAST_A(p) i8_bcast32(p)
#if defined(PYTPP_I8_VNNI)
#define PYTPP_ISA_NAME avx512_vnni
#define I8_GROUP 4
#define V_I8_DOT(acc, a, b) _mm512_dpbusd_epi32((acc), (a), (b))
/* 32 zmm: 12x2 accumulators + 2 B vectors + the broadcast. */
#define I8_SHAPES(X) PYTPP_ROWS(12)(X, 1) PYTPP_ROWS(12)(X, 2)
#define I8_MR_MAIN 12
#else
#define PYTPP_ISA_NAME avx512
#define I8_GROUP 2
#define V_I8_DOT(acc, a, b) _mm512_add_epi32((acc), _mm512_madd_epi16((a), (b)))
/* 32 zmm: 12x2 accumulators + 2 B vectors + the broadcast + one product. */
#define I8_SHAPES(X) PYTPP_ROWS(12)(X, 1) PYTPP_ROWS(12)(X, 2)
#define I8_MR_MAIN 12
#endif
#define I8_NV_MAIN 2
