/* VEX vpdpbusd throughput (AVX-VNNI): each instruction does 32 u8 x s8 products summed into 8
 * int32 lanes; measured on the 6 x 2 block of the kernels (broadcast A lanes, two B vectors),
 * as the AVX2 level's 8-bit rates are. */
#include <immintrin.h>
#include "pytpp/peak.h"
#include "pytpp/peak_loop.h"
#include "pytpp/peak_ymm_i32.h"

static __m256i dot_add(__m256i acc, __m256i x, __m256i y)
{
    return _mm256_dpbusd_avx_epi32(acc, x, y);
}
PYTPP_PEAK_BCAST_LOOP(pytpp_peak_int8_dot_avx_vnni, 6, 2, __m256i, 8, LOAD_I, STORE_I,
                      _mm256_set1_epi32, dot_add, _mm256_add_epi32, hsum_epi32, 64, u8_quad,
                      s8_quad)
