/* Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3",
 * SC 2011): the counter-based generator of dropout masks and random fills.
 *
 * A 128-bit counter and a 64-bit key (the seed) go through ten rounds of two 32x32->64-bit
 * multiplies; the four output words pass BigCrush and streams of different keys are
 * independent. Nothing is carried from one number to the next, so every number depends only on
 * (seed, element index): not on threads, ISA level or how a call is chunked.
 *
 * The stream of element indices: element e takes word (e >> 3) & 3 of the block for counter
 * (e >> 5) * 8 + (e & 7) (counter words 2 and 3 are zero). Thirty-two consecutive elements are
 * thus eight counters side by side, which 8-lane vectors compute with no shuffle; the portable
 * build computes the same words one counter at a time.
 *
 * Included by kernel sources of every level: the vector path is compiled where the file's flags
 * enable AVX2. */
#ifndef PYTPP_PHILOX_H
#define PYTPP_PHILOX_H
#include <stdint.h>
#include <string.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#define PYTPP_PHILOX_M0 0xD2511F53u
#define PYTPP_PHILOX_M1 0xCD9E8D57u
#define PYTPP_PHILOX_W0 0x9E3779B9u
#define PYTPP_PHILOX_W1 0xBB67AE85u
#define PYTPP_PHILOX_ROUNDS 10

/* The four words of one Philox4x32-10 block. */
static inline void pytpp_philox4x32(const uint32_t ctr_in[4], uint64_t key, uint32_t out[4])
{
    uint32_t c0 = ctr_in[0], c1 = ctr_in[1], c2 = ctr_in[2], c3 = ctr_in[3];
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int r = 0; r < PYTPP_PHILOX_ROUNDS; ++r) {
        if (r) {
            k0 += PYTPP_PHILOX_W0;
            k1 += PYTPP_PHILOX_W1;
        }
        const uint64_t p0 = (uint64_t)PYTPP_PHILOX_M0 * c0, p1 = (uint64_t)PYTPP_PHILOX_M1 * c2;
        const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        const uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

#if defined(__AVX2__)
/* hi and lo 32 bits of a * m in each of 8 lanes (m the same in every lane) */
static inline void pytpp_philox_mulhilo8(__m256i a, __m256i m, __m256i *hi, __m256i *lo)
{
    const __m256i even = _mm256_mul_epu32(a, m);
    const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
    *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
    *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}
#endif

/* The 32 words of elements 32 * blk ... 32 * blk + 31. */
static inline void pytpp_philox_block32(uint64_t seed, uint64_t blk, uint32_t out[32])
{
    const uint64_t base = blk * 8;   /* multiple of 8: base + lane never carries into bit 32 */
#if defined(__AVX2__)
    __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32((int32_t)(uint32_t)base),
                                  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256i c1 = _mm256_set1_epi32((int32_t)(uint32_t)(base >> 32));
    __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();
    const __m256i m0 = _mm256_set1_epi32((int32_t)PYTPP_PHILOX_M0);
    const __m256i m1 = _mm256_set1_epi32((int32_t)PYTPP_PHILOX_M1);
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < PYTPP_PHILOX_ROUNDS; ++r) {
        if (r) {
            k0 += PYTPP_PHILOX_W0;
            k1 += PYTPP_PHILOX_W1;
        }
        __m256i hi0, lo0, hi1, lo1;
        pytpp_philox_mulhilo8(c0, m0, &hi0, &lo0);
        pytpp_philox_mulhilo8(c2, m1, &hi1, &lo1);
        c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32((int32_t)k0));
        c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32((int32_t)k1));
        c1 = lo1;
        c3 = lo0;
    }
    _mm256_storeu_si256((__m256i *)out, c0);
    _mm256_storeu_si256((__m256i *)(out + 8), c1);
    _mm256_storeu_si256((__m256i *)(out + 16), c2);
    _mm256_storeu_si256((__m256i *)(out + 24), c3);
#else
    for (int lane = 0; lane < 8; ++lane) {
        const uint64_t c = base + (uint64_t)lane;
        const uint32_t ctr[4] = {(uint32_t)c, (uint32_t)(c >> 32), 0, 0};
        uint32_t w[4];
        pytpp_philox4x32(ctr, seed, w);
        for (int k = 0; k < 4; ++k) out[8 * k + lane] = w[k];
    }
#endif
}

/* out[i] = the word of element start + i, for i < n. */
static inline void pytpp_philox_fill(uint32_t *out, int64_t n, uint64_t start, uint64_t seed)
{
    uint32_t tmp[32];
    int64_t i = 0;
    while (i < n) {
        const uint64_t e = start + (uint64_t)i;
        const int64_t off = (int64_t)(e & 31), left = n - i;
        const int64_t take = 32 - off < left ? 32 - off : left;
        if (take == 32) {
            pytpp_philox_block32(seed, e >> 5, out + i);
        } else {
            pytpp_philox_block32(seed, e >> 5, tmp);
            memcpy(out + i, tmp + off, (size_t)take * sizeof(uint32_t));
        }
        i += take;
    }
}

#endif
