/* Widened bf16 on AVX2 with w in torch's layout (B^T: rows of k), two kernels of
 * pytpp_pk_kernels (gemm_goto.h):
 *
 *   pack_bt  rows of w into the widened panel layout (fp32 rows of k, each pair odd first);
 *   dot_bt   products of rows, C (+)= X W^T for a few rows of X (already widened): w is read
 *            once, a block of its rows at a time through a panel that L1 holds;
 *   dot_bn   the same for B with unit column stride (W as given, x @ W, or a PackedMatrix's
 *            bf16 panels): no transpose, 16 values of a row widened by two unpacks.
 *
 * Both move 8 rows x 8 k pairs of w at a time: a bf16 pair is one 32-bit word, so the tile is
 * an 8 x 8 transpose of 32-bit lanes (rows i and i + 4 loaded into the halves of one register,
 * so two rounds of in-lane unpacks do it), after which a vector holds pair q of 8 rows and
 * gives both fp32 values without a conversion (the odd element is the high half already: an
 * and; the even one: a shift). dot_bt runs, per output, the chain of FMAs the packed kernels
 * run (odd product, then even, pair by pair in k order, C first when accumulating; the caller
 * sets DAZ+FTZ): the same bits. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* t[p] = pair q + p of the 8 rows at r (row i at r + i * ldb), p < 8 */
static inline __attribute__((always_inline)) void
bf16w_tile_words(const uint16_t *r, int64_t ldb, int64_t q, __m256i t[8])
{
    __m256i x[8], u[4];
    for (int i = 0; i < 4; ++i)
        for (int h = 0; h < 2; ++h) {
            const uint16_t *lo = r + i * ldb + 2 * q + 8 * h, *hi = lo + 4 * ldb;
            x[i + 4 * h] = _mm256_inserti128_si256(
                _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)lo)),
                _mm_loadu_si128((const __m128i *)hi), 1);
        }
    /* x[i + 4h] = [row i, pairs 4h..4h+3 | row i + 4, the same pairs]: a 4 x 4 transpose of
     * each 128-bit lane */
    for (int h = 0; h < 8; h += 4) {
        u[0] = _mm256_unpacklo_epi32(x[h + 0], x[h + 1]);
        u[1] = _mm256_unpackhi_epi32(x[h + 0], x[h + 1]);
        u[2] = _mm256_unpacklo_epi32(x[h + 2], x[h + 3]);
        u[3] = _mm256_unpackhi_epi32(x[h + 2], x[h + 3]);
        t[h + 0] = _mm256_unpacklo_epi64(u[0], u[2]);
        t[h + 1] = _mm256_unpackhi_epi64(u[0], u[2]);
        t[h + 2] = _mm256_unpacklo_epi64(u[1], u[3]);
        t[h + 3] = _mm256_unpackhi_epi64(u[1], u[3]);
    }
}

/* the odd (high) and even (low) bf16 halves of 8 words as fp32 */
static inline __attribute__((always_inline)) __m256 bf16w_odd(__m256i words)
{
    return _mm256_castsi256_ps(_mm256_and_si256(words, _mm256_set1_epi32((int)0xFFFF0000u)));
}
static inline __attribute__((always_inline)) __m256 bf16w_even(__m256i words)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(words, 16));
}

/* pair q of 8 rows (row i at r + i * ldb): one 32-bit word each */
static inline __attribute__((always_inline)) __m256i bf16w_pair_words(const uint16_t *r,
                                                                      int64_t ldb, int64_t q)
{
    int32_t w[8];
    for (int i = 0; i < 8; ++i) memcpy(&w[i], r + i * ldb + 2 * q, 4);
    return _mm256_loadu_si256((const __m256i *)w);
}

/* the last element of 8 rows of odd length kcb, as the even half of a word */
static inline __attribute__((always_inline)) __m256i bf16w_last_words(const uint16_t *r,
                                                                      int64_t ldb, int64_t kcb)
{
    int32_t w[8];
    for (int i = 0; i < 8; ++i) w[i] = r[i * ldb + kcb - 1];
    return _mm256_loadu_si256((const __m256i *)w);
}

static inline float bf16w_bits(uint16_t h)
{
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* ---- pack_bt ------------------------------------------------------------------------------ */

/* dst[p * ldd + j] = w[j][p ^ 1] as fp32 for j < ncb, p < kcb rounded up to even (the value
 * past an odd kcb is zero); w = bt with row stride ldb (elements). */
void tpp_bf16w_pack_bt_avx2(const void *btv, int64_t ldb, int64_t kcb, int64_t ncb, void *dstv,
                            int64_t ldd);
void tpp_bf16w_pack_bt_avx2(const void *btv, int64_t ldb, int64_t kcb, int64_t ncb, void *dstv,
                            int64_t ldd)
{
    const uint16_t *bt = (const uint16_t *)btv;
    float *dst = (float *)dstv;
    const int64_t kq = kcb / 2;
    int64_t j = 0;
    for (; j + 8 <= ncb; j += 8) {
        const uint16_t *r = bt + j * ldb;
        float *d = dst + j;
        int64_t q = 0;
        for (; q + 8 <= kq; q += 8) {
            __m256i x[8];
            bf16w_tile_words(r, ldb, q, x);
            for (int p = 0; p < 8; ++p) {
                _mm256_storeu_ps(d + 2 * (q + p) * ldd, bf16w_odd(x[p]));
                _mm256_storeu_ps(d + (2 * (q + p) + 1) * ldd, bf16w_even(x[p]));
            }
        }
        for (; q < kq; ++q) {
            const __m256i x = bf16w_pair_words(r, ldb, q);
            _mm256_storeu_ps(d + 2 * q * ldd, bf16w_odd(x));
            _mm256_storeu_ps(d + (2 * q + 1) * ldd, bf16w_even(x));
        }
        if (kcb & 1) {
            _mm256_storeu_ps(d + (kcb - 1) * ldd, _mm256_setzero_ps());
            _mm256_storeu_ps(d + kcb * ldd, bf16w_even(bf16w_last_words(r, ldb, kcb)));
        }
    }
    for (; j < ncb; ++j) {
        const uint16_t *r = bt + j * ldb;
        for (int64_t p = 0; p < kcb + (kcb & 1); ++p)
            dst[p * ldd + j] = (p ^ 1) < kcb ? bf16w_bits(r[p ^ 1]) : 0.0f;
    }
}

/* ---- dot_bt ------------------------------------------------------------------------------- */

/* Rows of x (from X0, row stride ldx; C from C0, row stride ldc) four at a time, each group
 * through ROWS(R, S) with the register shape S1..S4 of its R rows (xi, ci: the group's rows). */
#define BF16W_BY_ROWS(X0, C0, ROWS, S1, S2, S3, S4)                                           \
    for (int64_t i_ = 0; i_ < m; i_ += 4) {                                                   \
        const float *xi = (X0) + i_ * ldx;                                                    \
        float *ci = (C0) + i_ * ldc;                                                          \
        switch (m - i_ < 4 ? m - i_ : 4) {                                                    \
        case 1: ROWS(1, S1); break;                                                           \
        case 2: ROWS(2, S2); break;                                                           \
        case 3: ROWS(3, S3); break;                                                           \
        default: ROWS(4, S4); break;                                                          \
        }                                                                                     \
    }

/* The panel: 64 rows of w x 64 pairs (18 KiB: each pair's row padded by 8 words, which took a
 * tenth off the packing with a weight whose rows are a multiple of 4 KiB apart) */
enum { BF16W_NB = 64, BF16W_KQ = 64, BF16W_LDP = 72 };

/* panel[q * BF16W_LDP + j] = pair q of row j of w (rows at r, row stride ldb), q < kq (the pair
 * past an odd k: its even element alone), j < nb; columns nb..nb rounded up to 8 zero. */
static inline __attribute__((always_inline)) void
bf16w_panel(const uint16_t *r, int64_t ldb, int64_t kcb, int64_t nb, uint32_t *panel)
{
    const int64_t kq = kcb / 2;
    int64_t j = 0;
    for (; j + 8 <= nb; j += 8) {
        const uint16_t *rj = r + j * ldb;
        int64_t q = 0;
        for (; q + 8 <= kq; q += 8) {
            __m256i t[8];
            /* each row's line 512 bytes ahead, into L2: 64 row streams outrun the hardware
             * prefetchers (w from memory, one row of x: packing 2.75 -> 1.86 ms for 32 MiB) */
            if ((q & 15) == 0)
                for (int i = 0; i < 8; ++i)
                    __builtin_prefetch((const char *)(rj + i * ldb + 2 * q) + 512, 0, 1);
            bf16w_tile_words(rj, ldb, q, t);
            for (int p = 0; p < 8; ++p)
                _mm256_storeu_si256((__m256i *)(panel + (q + p) * BF16W_LDP + j), t[p]);
        }
        for (; q < kq; ++q)
            _mm256_storeu_si256((__m256i *)(panel + q * BF16W_LDP + j),
                                bf16w_pair_words(rj, ldb, q));
        if (kcb & 1)
            _mm256_storeu_si256((__m256i *)(panel + kq * BF16W_LDP + j),
                                bf16w_last_words(rj, ldb, kcb));
    }
    if (j < nb)
        for (int64_t q = 0; q < (kcb + 1) / 2; ++q)
            for (int64_t jj = j; jj < (nb + 7) / 8 * 8; ++jj) {
                uint32_t word = 0;
                if (jj < nb) {
                    const uint16_t *e = r + jj * ldb + 2 * q;
                    word = e[0] | (2 * q + 1 < kcb ? (uint32_t)e[1] << 16 : 0u);
                }
                panel[q * BF16W_LDP + jj] = word;
            }
}

/* x[0] in every lane, loaded where it is used: with three or four rows of x the broadcasts of a
 * pair, if the compiler keeps them for every vector, outnumber the free registers and spill */
static inline __attribute__((always_inline)) __m256 bf16w_bcast(const float *x)
{
    __m256 v;
    __asm__ volatile("vbroadcastss %1, %0" : "=x"(v) : "m"(*x));
    return v;
}

/* C[r][j0 + 8v ...] (+)= rows r < R of x (widened: pair q at x[2q] (odd), x[2q + 1]) times the
 * panel's columns j0 + 8v, v < V, over kq pairs; `last` valid columns in vector V - 1. */
static inline __attribute__((always_inline)) void
bf16w_panel_dot(const int R, const int V, int64_t kq, const float *x, int64_t ldx,
                const uint32_t *panel, float *c, int64_t ldc, int accumulate, int64_t last)
{
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)last),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256 acc[4][8];
    PYTPP_UNROLL for (int r = 0; r < R; ++r)
        PYTPP_UNROLL for (int v = 0; v < V; ++v) {
            float *cp = c + r * ldc + 8 * v;
            acc[r][v] = !accumulate ? _mm256_setzero_ps()
                        : v == V - 1 ? _mm256_maskload_ps(cp, mask) : _mm256_loadu_ps(cp);
        }
    for (int64_t q = 0; q < kq; ++q) {
        PYTPP_UNROLL for (int v = 0; v < V; ++v) {
            const __m256i wq = _mm256_load_si256((const __m256i *)(panel + q * BF16W_LDP + 8 * v));
            const __m256 o = bf16w_odd(wq), e = bf16w_even(wq);
            PYTPP_UNROLL for (int r = 0; r < R; ++r) {
                const float *xq = x + r * ldx + 2 * q;
                const __m256 xo = R <= 2 ? _mm256_broadcast_ss(xq) : bf16w_bcast(xq);
                const __m256 xe = R <= 2 ? _mm256_broadcast_ss(xq + 1) : bf16w_bcast(xq + 1);
                acc[r][v] = _mm256_fmadd_ps(xo, o, acc[r][v]);
                acc[r][v] = _mm256_fmadd_ps(xe, e, acc[r][v]);
            }
        }
    }
    PYTPP_UNROLL for (int r = 0; r < R; ++r)
        PYTPP_UNROLL for (int v = 0; v < V; ++v) {
            float *cp = c + r * ldc + 8 * v;
            if (v == V - 1) _mm256_maskstore_ps(cp, mask, acc[r][v]);
            else _mm256_storeu_ps(cp, acc[r][v]);
        }
}

/* Rows r < R of x over the panel's nb columns in register blocks of V vectors (8 FMA chains or
 * more in flight: one row over 8 vectors, two over 4, three over 4, four over 2); the rest of
 * the columns as one block of as many vectors as they need (up to V, the last one masked: 57
 * to 63 columns left for one row take 8). */
#define BF16W_PANEL_REST(R, U)                                                                \
    case U:                                                                                   \
        bf16w_panel_dot(R, U, kq, xi, ldx, panel + j_, ci + j_, ldc, acc, left_ - 8 * (U - 1)); \
        break;
#define BF16W_PANEL_ROWS(R, V)                                                                \
    do {                                                                                      \
        for (int64_t j_ = 0; j_ < nb; j_ += 8 * (V)) {                                        \
            const int64_t left_ = nb - j_;                                                    \
            if (left_ >= 8 * (V))                                                             \
                bf16w_panel_dot(R, V, kq, xi, ldx, panel + j_, ci + j_, ldc, acc, 8);         \
            else                                                                              \
                switch ((left_ + 7) / 8) {                                                    \
                    BF16W_PANEL_REST(R, 1) BF16W_PANEL_REST(R, 2) BF16W_PANEL_REST(R, 3)      \
                    BF16W_PANEL_REST(R, 4) BF16W_PANEL_REST(R, 5) BF16W_PANEL_REST(R, 6)      \
                    BF16W_PANEL_REST(R, 7) BF16W_PANEL_REST(R, 8)                             \
                default: break;                                                               \
                }                                                                             \
        }                                                                                     \
    } while (0)

/* C (m x n, row stride ldc) (+)= X W^T: X (m x k) widened (fp32 rows of ldx, each pair odd
 * first, k padded to even), W (n x k, bf16 rows of ldb). Blocks of 64 rows of w, 128 values of
 * k at a time, go through the panel once for all rows of X (four at a time); filling the panel
 * prefetches each row 512 bytes ahead (bf16w_panel). flags: PYTPP_DOT_ACCUMULATE. */
void tpp_bf16w_dot_bt_avx2(int64_t m, int64_t n, int64_t k, const void *xv, int64_t ldx,
                           const void *wv, int64_t ldb, float *c, int64_t ldc, int flags);
void tpp_bf16w_dot_bt_avx2(int64_t m, int64_t n, int64_t k, const void *xv, int64_t ldx,
                           const void *wv, int64_t ldb, float *c, int64_t ldc, int flags)
{
    const float *x = (const float *)xv;
    const uint16_t *w = (const uint16_t *)wv;
    _Alignas(64) uint32_t panel[BF16W_LDP * BF16W_KQ];
    for (int64_t j = 0; j < n; j += BF16W_NB) {
        const int64_t nb = n - j < BF16W_NB ? n - j : BF16W_NB;
        for (int64_t p = 0; p < k; p += 2 * BF16W_KQ) {
            const int64_t kcb = k - p < 2 * BF16W_KQ ? k - p : 2 * BF16W_KQ;
            const int64_t kq = (kcb + 1) / 2;
            const int acc = (flags & PYTPP_DOT_ACCUMULATE) || p > 0;
            bf16w_panel(w + j * ldb + p, ldb, kcb, nb, panel);
            BF16W_BY_ROWS(x + p, c + j, BF16W_PANEL_ROWS, 8, 4, 4, 2);
        }
    }
}
#undef BF16W_PANEL_ROWS
#undef BF16W_PANEL_REST

/* ---- dot_bn ------------------------------------------------------------------------------- */

/* fp32 of 16 bf16 values: columns 0-3, 8-11 (lo) and 4-7, 12-15 (hi), by 16-bit unpacks with
 * zero (a bf16 value is the high half of its fp32) */
static inline __attribute__((always_inline)) void bf16w_widen16(const uint16_t *p, __m256 *lo,
                                                                __m256 *hi)
{
    const __m256i v = _mm256_loadu_si256((const __m256i *)p), z = _mm256_setzero_si256();
    *lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(z, v));
    *hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(z, v));
}

/* 16 columns of C <-> the (lo, hi) order of bf16w_widen16; `cols` < 16 go through a buffer */
static inline __attribute__((always_inline)) void bf16w_load16(const float *c, int64_t cols,
                                                               __m256 *lo, __m256 *hi)
{
    float t[16] = {0};
    if (cols < 16) memcpy(t, c, (size_t)cols * sizeof(float));
    const float *s = cols < 16 ? t : c;
    const __m256 a = _mm256_loadu_ps(s), b = _mm256_loadu_ps(s + 8);
    *lo = _mm256_permute2f128_ps(a, b, 0x20);
    *hi = _mm256_permute2f128_ps(a, b, 0x31);
}
static inline __attribute__((always_inline)) void bf16w_store16(float *c, int64_t cols, __m256 lo,
                                                                __m256 hi)
{
    float t[16];
    float *d = cols < 16 ? t : c;
    _mm256_storeu_ps(d, _mm256_permute2f128_ps(lo, hi, 0x20));
    _mm256_storeu_ps(d + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
    if (cols < 16) memcpy(c, t, (size_t)cols * sizeof(float));
}

/* C[r][16g ...] (+)= rows r < R of x (widened) times groups g < G of 16 columns of B over the k
 * steps p < kp of the widened order: step p takes B's row p ^ swap (rows >= krows are zero),
 * row i of group g at b + i * ldrow + g * ldgroup. `last` valid columns in group G - 1 (fewer
 * than 16: its rows are copied to a buffer, a raw W may end there). */
static inline __attribute__((always_inline)) void
bf16w_bn_block(const int R, const int G, int64_t kp, int64_t krows, int swap, const float *x,
               int64_t ldx, const uint16_t *b, int64_t ldrow, int64_t ldgroup, float *c,
               int64_t ldc, int accumulate, int64_t last)
{
    __m256 acc[4][4][2];
    PYTPP_UNROLL for (int r = 0; r < R; ++r)
        PYTPP_UNROLL for (int g = 0; g < G; ++g) {
            if (accumulate)
                bf16w_load16(c + r * ldc + 16 * g, g == G - 1 ? last : 16, &acc[r][g][0],
                             &acc[r][g][1]);
            else
                acc[r][g][0] = acc[r][g][1] = _mm256_setzero_ps();
        }
    for (int64_t p = 0; p < kp; ++p) {
        const int64_t row = p ^ swap;
        PYTPP_UNROLL for (int g = 0; g < G; ++g) {
            __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
            const uint16_t *src = b + row * ldrow + g * ldgroup;
            if (row < krows) {
                if (g == G - 1 && last < 16) {
                    uint16_t t[16] = {0};
                    memcpy(t, src, (size_t)last * 2);
                    bf16w_widen16(t, &lo, &hi);
                } else {
                    bf16w_widen16(src, &lo, &hi);
                }
            }
            PYTPP_UNROLL for (int r = 0; r < R; ++r) {
                const float *xp = x + r * ldx + p;
                const __m256 xv = R <= 2 ? _mm256_broadcast_ss(xp) : bf16w_bcast(xp);
                acc[r][g][0] = _mm256_fmadd_ps(xv, lo, acc[r][g][0]);
                acc[r][g][1] = _mm256_fmadd_ps(xv, hi, acc[r][g][1]);
            }
        }
    }
    PYTPP_UNROLL for (int r = 0; r < R; ++r)
        PYTPP_UNROLL for (int g = 0; g < G; ++g)
            bf16w_store16(c + r * ldc + 16 * g, g == G - 1 ? last : 16, acc[r][g][0],
                          acc[r][g][1]);
}

/* Rows r < R of x over all n columns: blocks of G groups of 16, then single groups. */
#define BF16W_BN_ROWS(R, G)                                                                   \
    do {                                                                                      \
        int64_t j_ = 0;                                                                       \
        for (; j_ + 16 * (G) <= n; j_ += 16 * (G))                                            \
            bf16w_bn_block(R, G, kp, k, swap, xi, ldx, b + (j_ / 16) * ldgroup, ldrow,        \
                           ldgroup, ci + j_, ldc, acc, 16);                                   \
        for (; j_ < n; j_ += 16)                                                              \
            bf16w_bn_block(R, 1, kp, k, swap, xi, ldx, b + (j_ / 16) * ldgroup, ldrow,        \
                           ldgroup, ci + j_, ldc, acc, n - j_ < 16 ? n - j_ : 16);            \
    } while (0)

/* C (m x n, row stride ldc) (+)= X B for X widened (as for dot_bt) and B (k x n) bf16 with unit
 * column stride in groups of 16 columns: row i of the group of column j at b + i * ldrow +
 * (j / 16) * ldgroup. swapped: B's rows are in the widened order already (a PackedMatrix
 * block, k padded to even: ldrow 16, ldgroup 16 x its depth); else they are in k order (W as
 * given: ldrow its row stride, ldgroup 16). Each output's FMA chain is the packed kernels'.
 * Rows of X four at a time: one over 4 groups (8 chains), two over 2, three over 2, four over
 * 1. flags: PYTPP_DOT_ACCUMULATE. */
void tpp_bf16w_dot_bn_avx2(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                           const void *bv, int64_t ldrow, int64_t ldgroup, int swapped, float *c,
                           int64_t ldc, int flags);
void tpp_bf16w_dot_bn_avx2(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                           const void *bv, int64_t ldrow, int64_t ldgroup, int swapped, float *c,
                           int64_t ldc, int flags)
{
    const uint16_t *b = (const uint16_t *)bv;
    const int64_t kp = k + (k & 1);
    const int swap = !swapped, acc = (flags & PYTPP_DOT_ACCUMULATE) != 0;
    if (swapped) k = kp; /* a packed block's padding rows are there (zero) */
    BF16W_BY_ROWS(x, c, BF16W_BN_ROWS, 4, 2, 2, 1);
}
#undef BF16W_BN_ROWS
#undef BF16W_BY_ROWS
