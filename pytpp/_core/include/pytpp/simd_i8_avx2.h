/* 8-bit GEMM shim for AVX2 (no VNNI): operands widened to int16 while packing, one vpmaddwd
 * (exact: |255 * -128| * 2 < 2^31) and one vpaddd per pair of k values and 8 columns. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include "pytpp/gemm_pk_shapes.h"

#define PYTPP_ISA_NAME avx2
typedef __m256i ivec_t;
#define I8_VL 8
#define I8_GROUP 2
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
#define V_I8_DOT(acc, a, b) _mm256_add_epi32((acc), _mm256_madd_epi16((a), (b)))

/* 16 ymm: 6x2 accumulators + 2 B vectors + the broadcast + one product. */
#define I8_SHAPES(X) PYTPP_ROWS(6)(X, 1) PYTPP_ROWS(6)(X, 2)
#define I8_MR_MAIN 6
#define I8_NV_MAIN 2
