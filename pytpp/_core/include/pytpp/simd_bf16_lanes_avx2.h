/* Widened-bf16 lane shim for AVX2 (gemm_lane.inc with G = 1): A rows and B panels hold the bf16
 * values widened to fp32 (exact), each k pair stored odd element first; one FMA per product in
 * that order, C first, under DAZ+FTZ: the bits of vdpbf16ps at the speed of fp32 FMAs, with A
 * read by rows (a widening copy, no panel transpose). */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include "pytpp/gemm_pk_shapes.h"

#define PYTPP_ISA_NAME avx2
#define I8_FAMILY bf16w
#define I8_C_T float
#define I8_GROUP 1
#define I8_K_PAD 2
#define I8_IN_SIZE 2
#define I8_FTZ 1
#define I8_SHIM_PACKERS
typedef __m256 ivec_t;
#define I8_VL 8
static const int32_t pytpp_bf16w_avx2_mask[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                  0, 0, 0, 0, 0, 0, 0, 0};
#define I8_MASK(r) _mm256_loadu_si256((const __m256i *)(pytpp_bf16w_avx2_mask + 8 - (r)))
#define V_I8_ZERO() _mm256_setzero_ps()
#define V_I8_LOAD(p) _mm256_loadu_ps(p)
#define V_I8_LOADM(p, r) _mm256_maskload_ps((p), I8_MASK(r))
#define V_I8_STORE(p, v) _mm256_storeu_ps((p), (v))
#define V_I8_STOREM(p, r, v) _mm256_maskstore_ps((p), I8_MASK(r), (v))
#define V_I8_LOAD_B(p) _mm256_loadu_ps((const float *)(p))
#define V_I8_BCAST_A(p) _mm256_broadcast_ss((const float *)(p))
#define V_I8_DOT(acc, a, b) _mm256_fmadd_ps((a), (b), (acc))

/* 16 ymm: 6x2 accumulators + 2 B vectors + the broadcast. */
#define I8_SHAPES(X) PYTPP_ROWS(6)(X, 1) PYTPP_ROWS(6)(X, 2)
#define I8_MR_MAIN 6
#define I8_NV_MAIN 2

PYTPP_INLINE float bf16w_widen(uint16_t h)
{
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* A: rows [0, rows) x k [0, kk) (bf16, element (i, p) at a[i*rsa + p*csa]) as fp32 rows of lda
 * values, pair-swapped (value p at p ^ 1), k zero-padded to pad (<= lda). */
static void pytpp_bf16w_pack_a_avx2(const uint8_t *a8, int64_t rsa, int64_t csa, int64_t rows,
                                    int64_t kk, int64_t lda, int64_t pad, int sgn, void *dst)
{
    (void)sgn;
    const uint16_t *a = (const uint16_t *)a8;
    float *d = (float *)dst;
    for (int64_t i = 0; i < rows; ++i) {
        const uint16_t *row = a + i * rsa;
        float *out = d + i * lda;
        int64_t p = 0;
        if (kk < pad || kk & 1) memset(out, 0, (size_t)pad * sizeof(float));
        if (csa == 1)
            for (; p + 1 < kk; p += 2) {
                out[p] = bf16w_widen(row[p + 1]);
                out[p + 1] = bf16w_widen(row[p]);
            }
        for (; p < kk; ++p) out[p ^ 1] = bf16w_widen(row[p * csa]);
    }
}

/* B: k [0, kk) x columns [0, cols) into one NR-column fp32 panel, row p at (p ^ 1) * NR;
 * element (p, j) read at b[(p/g)*rs_g + (p%g)*rs_e + j*cs] (g = 1 plain, 2 VNNI pairs). */
static void pytpp_bf16w_pack_b_avx2(const uint8_t *b8, int g, int64_t rs_g, int64_t rs_e,
                                    int64_t cs, int64_t kk, int64_t cols, int sgn, void *dst)
{
    (void)sgn;
    enum { NR = I8_NV_MAIN * I8_VL };
    const uint16_t *b = (const uint16_t *)b8;
    float *d = (float *)dst;
    const int64_t kp = (kk + 1) / 2 * 2;
    if (cols < NR || kk & 1) memset(d, 0, (size_t)(kp * NR) * sizeof(float));
    int64_t p = 0;
    if (g == 2 && rs_e == 1 && cs == 2) {
        /* VNNI pairs: one 32-bit word per column holds k rows 2q (low half) and 2q + 1 (high
         * half): the high half is already the fp32 of row 2q + 1, the low one shifted up is
         * row 2q's */
        for (; p + 1 < kk; p += 2) {
            const uint32_t *src = (const uint32_t *)(b + (p / 2) * rs_g);
            uint32_t *odd_first = (uint32_t *)(d + p * NR), *even = (uint32_t *)(d + (p + 1) * NR);
            for (int64_t j = 0; j < cols; ++j) {
                odd_first[j] = src[j] & 0xFFFF0000u;
                even[j] = src[j] << 16;
            }
        }
    }
    for (; p < kk; ++p) {
        const uint16_t *src = b + (p / g) * rs_g + (p % g) * rs_e;
        float *out = d + (p ^ 1) * NR;
        if (cs == 1)
            for (int64_t j = 0; j < cols; ++j) out[j] = bf16w_widen(src[j]);
        else
            for (int64_t j = 0; j < cols; ++j) out[j] = bf16w_widen(src[j * cs]);
    }
}
