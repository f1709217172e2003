/* Native bf16 products of rows on AVX512_BF16 (dot_bt of pytpp_pk_kernels, gemm_goto.h): C (m x
 * n) (+)= X W^T for a few rows of X against w in torch's layout (n rows of k), X as it lies (bf16
 * rows, pairs as 32-bit words; rows_raw = 1), w read once, in place.
 *
 * Each output is one lane, its k pairs in order, one vdpbf16ps per pair: the chain every bf16
 * kernel runs, so the same bits. A lane holds one row of w, so 16 rows x 16 pairs of w (16 lines)
 * go through a 16 x 16 transpose of 32-bit words in registers (64 shuffles), after which vector
 * q holds pair q of the 16 rows and meets every row of X through a broadcast of X's pair q:
 * straight from the registers for up to 4 rows of X, through a panel of transposed words in L1
 * for more (below). Past k, both sides load zeros (masked). */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* k values per panel */
#define BF16N_KC 256
/* up to this many rows of X run on the words in registers, without a panel (at 1-2 rows 1.3x
 * faster: the panel's stores and loads cost more than the one chain per output waits) */
#define BF16N_REG_MR 4
/* each row of w is fetched this many bytes ahead (up to 64 row streams at once) */
#define BF16N_PF_BYTES 512

/* r[q] = word q of the 16 rows r[0..15]: a 16 x 16 transpose of 32-bit words */
static inline __attribute__((always_inline)) void bf16n_transpose16(__m512i r[16])
{
    __m512i t[16], u[16];
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    /* u[4i + c], 128-bit lane l: word 4l + c of rows 4i..4i+3 */
    for (int i = 0; i < 4; ++i) {
        u[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    /* a 4 x 4 transpose of 128-bit lanes per c */
    for (int c = 0; c < 4; ++c) {
        const __m512i s0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88);
        const __m512i s1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xDD);
        const __m512i s2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88);
        const __m512i s3 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xDD);
        r[c] = _mm512_shuffle_i32x4(s0, s2, 0x88);
        r[4 + c] = _mm512_shuffle_i32x4(s1, s3, 0x88);
        r[8 + c] = _mm512_shuffle_i32x4(s0, s2, 0xDD);
        r[12 + c] = _mm512_shuffle_i32x4(s1, s3, 0xDD);
    }
}

/* r[q] = pair q of the nb (<= 16, zero rows past) rows of w (row stride ldb) over `rest` (<= 32,
 * zero past) values of k; each row's line BF16N_PF_BYTES ahead prefetched */
static inline __attribute__((always_inline)) void
bf16n_tile(const uint16_t *w, int64_t ldb, int64_t nb, int64_t rest, __m512i r[16])
{
    const __mmask32 km = rest >= 32 ? (__mmask32)~0u : (__mmask32)((1u << rest) - 1u);
    for (int i = 0; i < 16; ++i) {
        r[i] = _mm512_maskz_loadu_epi16(i < nb ? km : 0, w + i * ldb);
        if (i < nb) __builtin_prefetch(w + i * ldb + BF16N_PF_BYTES / 2, 0, 3);
    }
    bf16n_transpose16(r);
}

/* t[q] = pair q of the nb (<= 16, zero rows past) rows of w for kcb values of k (zero past) */
static void bf16n_panel(int64_t kcb, const uint16_t *w, int64_t ldb, int64_t nb, __m512i *t)
{
    for (int64_t p = 0; p < kcb; p += 32) {
        __m512i r[16];
        bf16n_tile(w + p, ldb, nb, kcb - p, r);
        for (int q = 0; q < 16; ++q) t[p / 2 + q] = r[q];
    }
}

static inline __attribute__((always_inline)) __m512bh bf16n_pair(const uint16_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return (__m512bh)_mm512_set1_epi32((int)v);
}

/* Rows [0, MR) of X against the `nb` (<= 16) rows of w at w (columns of C at c, mask cm). */
static inline __attribute__((always_inline)) void
bf16n_block(const int MR, int64_t k, const uint16_t *x, int64_t ldx, const uint16_t *w,
            int64_t ldb, int64_t nb, float *c, int64_t ldc, __mmask16 cm, int accumulate)
{
    __m512 acc[BF16N_REG_MR];
    for (int i = 0; i < MR; ++i)
        acc[i] = accumulate ? _mm512_maskz_loadu_ps(cm, c + i * ldc) : _mm512_setzero_ps();
    int64_t p = 0;
    for (; p + 32 <= k; p += 32) {
        __m512i r[16];
        bf16n_tile(w + p, ldb, nb, 32, r);
        for (int q = 0; q < 16; ++q)
            for (int i = 0; i < MR; ++i)
                acc[i] = _mm512_dpbf16_ps(acc[i], (__m512bh)r[q],
                                          bf16n_pair(x + i * ldx + p + 2 * q));
    }
    if (p < k) {   /* the last k % 32 values, zeros past k on both sides */
        const int64_t rest = k - p;
        __m512i r[16];
        bf16n_tile(w + p, ldb, nb, rest, r);
        for (int64_t q = 0; 2 * q < rest; ++q)
            for (int i = 0; i < MR; ++i) {
                const uint16_t *xp = x + i * ldx + p + 2 * q;
                const uint32_t hi = 2 * q + 1 < rest ? (uint32_t)xp[1] << 16 : 0u;
                const uint32_t v = (uint32_t)xp[0] | hi;
                acc[i] = _mm512_dpbf16_ps(acc[i], (__m512bh)r[q],
                                          (__m512bh)_mm512_set1_epi32((int)v));
            }
    }
    for (int i = 0; i < MR; ++i) _mm512_mask_storeu_ps(c + i * ldc, cm, acc[i]);
}

/* MR rows of X against NB blocks of the panel (block b at t + b * ldt, its outputs at c + 16 b,
 * mask cm[b]) over kcb values of k: MR x NB accumulators, each a chain of its own */
static inline __attribute__((always_inline)) void
bf16n_rows(const int MR, const int NB, int64_t kcb, const uint16_t *x, int64_t ldx,
           const __m512i *t, int64_t ldt, float *c, int64_t ldc, const __mmask16 *cm,
           int accumulate)
{
    __m512 acc[16][2];
    for (int i = 0; i < MR; ++i)
        for (int b = 0; b < NB; ++b)
            acc[i][b] = accumulate ? _mm512_maskz_loadu_ps(cm[b], c + i * ldc + 16 * b)
                                   : _mm512_setzero_ps();
    const int64_t full = kcb / 2;
    for (int64_t q = 0; q < full; ++q)
        for (int i = 0; i < MR; ++i) {
            const __m512bh xq = bf16n_pair(x + i * ldx + 2 * q);
            for (int b = 0; b < NB; ++b)
                acc[i][b] = _mm512_dpbf16_ps(acc[i][b], (__m512bh)t[b * ldt + q], xq);
        }
    if (kcb & 1)   /* an odd k's last value, zero beside */
        for (int i = 0; i < MR; ++i) {
            const __m512bh xq = (__m512bh)_mm512_set1_epi32(x[i * ldx + 2 * full]);
            for (int b = 0; b < NB; ++b)
                acc[i][b] = _mm512_dpbf16_ps(acc[i][b], (__m512bh)t[b * ldt + full], xq);
        }
    for (int i = 0; i < MR; ++i)
        for (int b = 0; b < NB; ++b) _mm512_mask_storeu_ps(c + i * ldc + 16 * b, cm[b], acc[i][b]);
}

/* C (m x n, row stride ldc) (+)= X W^T: X (m <= 16 rows of k, bf16, row stride ldx), W (n x k,
 * bf16 rows of ldb). Up to 4 rows: 16 rows of w at a time, words in registers. More: 16 NB rows
 * of w at a time, NB = 2 up to 8 rows of X, else 1 (16 chains in flight at 8 and 16 rows: a
 * chain of vdpbf16ps waits on its own latency); per block of k the rows of w are transposed
 * once into the panel (16 KiB, L1), then every row of X reads it, C holding the sums between
 * blocks. flags: PYTPP_DOT_ACCUMULATE. */
void tpp_bf16n_dot_bt_avx512_bf16(int64_t m, int64_t n, int64_t k, const void *xv, int64_t ldx,
                                  const void *wv, int64_t ldb, float *c, int64_t ldc, int flags);
void tpp_bf16n_dot_bt_avx512_bf16(int64_t m, int64_t n, int64_t k, const void *xv, int64_t ldx,
                                  const void *wv, int64_t ldb, float *c, int64_t ldc, int flags)
{
    const uint16_t *x = (const uint16_t *)xv, *w = (const uint16_t *)wv;
    if (m <= BF16N_REG_MR) {
        for (int64_t j = 0; j < n; j += 16) {
            const int64_t nb = n - j < 16 ? n - j : 16;
            const __mmask16 cm = (__mmask16)((1u << nb) - 1u);
            const int a = (flags & PYTPP_DOT_ACCUMULATE) != 0;
            switch (m) {
#define BF16N_RCASE(R)                                                                         \
            case R: bf16n_block(R, k, x, ldx, w + j * ldb, ldb, nb, c + j, ldc, cm, a); break;
            BF16N_RCASE(1) BF16N_RCASE(2) BF16N_RCASE(3) BF16N_RCASE(4)
#undef BF16N_RCASE
            default: break;
            }
        }
        return;
    }
    const int nblk = m <= 8 ? 2 : 1, rows = 16 / nblk;
    const int64_t ldt = BF16N_KC / 2;
    _Alignas(64) __m512i panel[2 * (BF16N_KC / 2)];
    for (int64_t j = 0; j < n; j += 16 * nblk) {
        __mmask16 cm[2];
        int64_t nb[2];
        for (int b = 0; b < nblk; ++b) {
            const int64_t left = n - j - 16 * b;
            nb[b] = left < 0 ? 0 : left < 16 ? left : 16;
            cm[b] = (__mmask16)((1u << nb[b]) - 1u);
        }
        for (int64_t p = 0; p < k; p += BF16N_KC) {
            const int64_t kcb = k - p < BF16N_KC ? k - p : BF16N_KC;
            for (int b = 0; b < nblk; ++b)
                if (nb[b])
                    bf16n_panel(kcb, w + (j + 16 * b) * ldb + p, ldb, nb[b], panel + b * ldt);
            const int a = (flags & PYTPP_DOT_ACCUMULATE) || p > 0;
            for (int64_t i0 = 0; i0 < m; i0 += rows) {
                const uint16_t *xi = x + i0 * ldx + p;
                float *ci = c + i0 * ldc + j;
                const int64_t mr = m - i0 < rows ? m - i0 : rows;
                switch (nblk * 100 + (int)mr) {
#define BF16N_CASE(NB, R)                                                                      \
                case NB * 100 + R:                                                             \
                    bf16n_rows(R, NB, kcb, xi, ldx, panel, ldt, ci, ldc, cm, a);               \
                    break;
                BF16N_CASE(2, 1) BF16N_CASE(2, 2) BF16N_CASE(2, 3) BF16N_CASE(2, 4)
                BF16N_CASE(2, 5) BF16N_CASE(2, 6) BF16N_CASE(2, 7) BF16N_CASE(2, 8)
                BF16N_CASE(1, 1) BF16N_CASE(1, 2) BF16N_CASE(1, 3) BF16N_CASE(1, 4)
                BF16N_CASE(1, 5) BF16N_CASE(1, 6) BF16N_CASE(1, 7) BF16N_CASE(1, 8)
                BF16N_CASE(1, 9) BF16N_CASE(1, 10) BF16N_CASE(1, 11) BF16N_CASE(1, 12)
                BF16N_CASE(1, 13) BF16N_CASE(1, 14) BF16N_CASE(1, 15) BF16N_CASE(1, 16)
#undef BF16N_CASE
                default: break;
                }
            }
        }
    }
}
