/* 8-bit GEMM shim for AVX2 (no VNNI): operands widened to int16 while packing, one vpmaddwd
 * (exact: |255 * -128| * 2 < 2^31) and one vpaddd per pair of k values and 8 columns. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include "pytpp/gemm_pk_shapes.h"

typedef __m256i ivec_t;
#define I8_VL 8
#if defined(PYTPP_I8_U7)
/* 7-bit A (0..127) x s8 B on raw quads: vpmaddubsw's int16 pair sums stay within
 * 2 * 127 * 128 < 32767, so they never saturate (exact), then vpmaddwd by ones and vpaddd:
 * 3 instructions per 32 products where the int16 kernels spend 4. */
#define PYTPP_ISA_NAME avx2_u7
#define I8_GROUP 4
#define V_I8_DOT(acc, a, b)                                                                  \
    _mm256_add_epi32((acc), _mm256_madd_epi16(_mm256_maddubs_epi16((a), (b)),                 \
                                              _mm256_set1_epi16(1)))
#else
#define PYTPP_ISA_NAME avx2
#define I8_GROUP 2
#define V_I8_DOT(acc, a, b) _mm256_add_epi32((acc), _mm256_madd_epi16((a), (b)))
#endif
static const int32_t pytpp_i8_avx2_mask[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                               0, 0, 0, 0, 0, 0, 0, 0};
#define I8_MASK(r) _mm256_loadu_si256((const __m256i *)(pytpp_i8_avx2_mask + 8 - (r)))
#define V_I8_ZERO() _mm256_setzero_si256()
#define V_I8_LOAD(p) _mm256_loadu_si256((const __m256i *)(p))
#define V_I8_LOADM(p, r) _mm256_maskload_epi32((const int *)(p), I8_MASK(r))
#define V_I8_STORE(p, v) _mm256_storeu_si256((__m256i *)(p), (v))
#define V_I8_STOREM(p, r, v) _mm256_maskstore_epi32((int *)(p), I8_MASK(r), (v))
#define V_I8_LOAD_B(p) _mm256_loadu_si256((const __m256i *)(p))
PYTPP_INLINE __m256i i8_bcast32(const uint8_t *p)
{
    int32_t x;
    memcpy(&x, p, 4);
    return _mm256_set1_epi32(x);
}
#define V_I8_BCAST_A(p) i8_bcast32(p)

/* 16 ymm: 6x2 accumulators + 2 B vectors + the broadcast + one product. */
#define I8_SHAPES(X) PYTPP_ROWS(6)(X, 1) PYTPP_ROWS(6)(X, 2)
#define I8_MR_MAIN 6
#define I8_NV_MAIN 2
