/* VEX vpdpbusd throughput (AVX-VNNI): each instruction does 32 u8 x s8 products summed into 8
 * int32 lanes; measured on the 6 x 2 block of the kernels (broadcast A lanes, two B vectors),
 * as the AVX2 level's 8-bit rates are. */
#include <immintrin.h>
#include "pytpp/peak.h"
#include "pytpp/peak_loop.h"

static __m256i dot_add(__m256i acc, __m256i x, __m256i y)
{
    return _mm256_dpbusd_avx_epi32(acc, x, y);
}
static double hsum_epi32(__m256i v)
{
    int32_t t[8];
    _mm256_storeu_si256((__m256i *)t, v);
    return (double)t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
static int32_t u8_quad(uint32_t j) { return (int32_t)(j * 0x25135b07u); }
static int32_t s8_quad(uint32_t j) { return (int32_t)(j * 0x9e3779b1u); }
#define LOAD_I(p) _mm256_loadu_si256((const __m256i *)(p))
#define STORE_I(p, v) _mm256_storeu_si256((__m256i *)(p), (v))
PYTPP_PEAK_BCAST_LOOP(pytpp_peak_int8_dot_avx_vnni, 6, 2, __m256i, 8, LOAD_I, STORE_I,
                      _mm256_set1_epi32, dot_add, _mm256_add_epi32, hsum_epi32, 64, u8_quad,
                      s8_quad)
