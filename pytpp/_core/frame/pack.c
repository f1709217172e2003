/* Panel packing of the Goto GEMM (frame/gemm_goto.c): A blocks into MR-row panels, B blocks
 * into NR-column panels, for f32, f64, bf16 (pairs along k) and widened bf16 (fp32 panels in
 * vdpbf16ps order). Portable C, no ISA flags: the compiler vectorises the contiguous side. Full
 * panels of the tables' main register blocks (gemm_pk_shapes.h) take loops with compile-time
 * trip counts; edge panels and other widths the generic loops. */
#include <stdint.h>
#include <string.h>
#include "pytpp/gemm_goto.h"
#include "pytpp/gemm_pk_shapes.h"
#include "pytpp/pack.h"
#include "pytpp/partition.h"

static inline int64_t rup(int64_t a, int64_t b) { return cdiv(a, b) * b; }

/* B is packed row by row within a column window (nc columns of a long row): each row is a new
 * short stream to the hardware prefetchers, which then stall on its first lines. Fetching the
 * row this many rows ahead hides that. */
#define PACK_PF_ROWS 4

static inline void prefetch_span(const void *p, int64_t bytes)
{
    const char *c = (const char *)p;
    for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(c + o, 0, 3);
}

/* Full panels with the common register-block widths get loops whose trip counts are
 * compile-time constants (the compiler then keeps row pointers in registers and vectorises the
 * contiguous side); edge panels and unusual widths take the generic loops. */
#define PACK_A_FULL(T, MRC)                                                                    \
    do {                                                                                       \
        const T *rows[MRC];                                                                    \
        for (int i = 0; i < MRC; ++i) rows[i] = src + i * rsa;                                 \
        for (int64_t p = 0; p < kcb; ++p) {                                                    \
            T *d = dst + p * MRC;                                                              \
            for (int i = 0; i < MRC; ++i) d[i] = rows[i][p];                                   \
        }                                                                                      \
    } while (0)

/* A block rows [0, mcb) x k [0, kcb) (a points at its first element) into MR-row panels. */
#define DEFINE_PACK_A(NAME, T)                                                                 \
    static void NAME(const T *a, int64_t rsa, int64_t csa, int64_t mcb, int64_t kcb,           \
                     int64_t MR, T *dst)                                                       \
    {                                                                                          \
        for (int64_t r = 0; r < mcb; r += MR, dst += MR * kcb) {                               \
            const int64_t mrr = imin(MR, mcb - r);                                             \
            const T *src = a + r * rsa;                                                        \
            if (csa == 1 && mrr == MR && MR == PYTPP_PK_MR_AVX512) {                           \
                PACK_A_FULL(T, PYTPP_PK_MR_AVX512);                                            \
            } else if (csa == 1 && mrr == MR && MR == PYTPP_PK_MR_AVX2) {                      \
                PACK_A_FULL(T, PYTPP_PK_MR_AVX2);                                              \
            } else if (csa == 1) {                                                             \
                for (int64_t i = 0; i < mrr; ++i) {                                            \
                    const T *row = src + i * rsa;                                              \
                    T *d = dst + i;                                                            \
                    for (int64_t p = 0; p < kcb; ++p) d[p * MR] = row[p];                      \
                }                                                                              \
            } else if (rsa == 1 && mrr == MR && MR == PYTPP_PK_MR_AVX512) {                    \
                for (int64_t p = 0; p < kcb; ++p)                                              \
                    for (int i = 0; i < PYTPP_PK_MR_AVX512; ++i)                               \
                        dst[p * PYTPP_PK_MR_AVX512 + i] = src[p * csa + i];                    \
            } else if (rsa == 1 && mrr == MR && MR == PYTPP_PK_MR_AVX2) {                      \
                for (int64_t p = 0; p < kcb; ++p)                                              \
                    for (int i = 0; i < PYTPP_PK_MR_AVX2; ++i)                                 \
                        dst[p * PYTPP_PK_MR_AVX2 + i] = src[p * csa + i];                      \
            } else if (rsa == 1) {                                                             \
                for (int64_t p = 0; p < kcb; ++p)                                              \
                    for (int64_t i = 0; i < mrr; ++i) dst[p * MR + i] = src[p * csa + i];      \
            } else {                                                                           \
                for (int64_t p = 0; p < kcb; ++p)                                              \
                    for (int64_t i = 0; i < mrr; ++i) dst[p * MR + i] = src[i * rsa + p * csa]; \
            }                                                                                  \
        }                                                                                      \
    }
DEFINE_PACK_A(pack_a_f32, float)
DEFINE_PACK_A(pack_a_f64, double)

/* Copies of one panel row, NR elements: constant sizes become vector moves. */
#define PANEL_ROW_COPY(T, NR, dst, src)                                                        \
    do {                                                                                       \
        switch ((NR) * (int64_t)sizeof(T)) {                                                   \
        case 32: memcpy((dst), (src), 32); break;                                              \
        case 64: memcpy((dst), (src), 64); break;                                              \
        case 128: memcpy((dst), (src), 128); break;                                            \
        default: memcpy((dst), (src), (size_t)(NR) * sizeof(T));                               \
        }                                                                                      \
    } while (0)

/* B block k [0, kcb) x columns [0, ncb) into NR-column panels, zero-padded to NR. */
#define DEFINE_PACK_B(NAME, T)                                                                 \
    static void NAME(const T *b, int64_t rsb, int64_t csb, int64_t kcb, int64_t ncb,           \
                     int64_t NR, T *dst)                                                       \
    {                                                                                          \
        const int64_t nfull = csb == 1 ? ncb / NR : 0;                                         \
        if (nfull) { /* B rows read front to back, one write stream per panel */               \
            for (int64_t p = 0; p < kcb; ++p) {                                                \
                const T *row = b + p * rsb;                                                    \
                T *d = dst + p * NR;                                                           \
                if (p + PACK_PF_ROWS < kcb)                                                    \
                    prefetch_span(row + PACK_PF_ROWS * rsb, nfull * NR * (int64_t)sizeof(T));  \
                for (int64_t q = 0; q < nfull; ++q)                                            \
                    PANEL_ROW_COPY(T, NR, d + q * NR * kcb, row + q * NR);                     \
            }                                                                                  \
            dst += nfull * NR * kcb;                                                           \
        }                                                                                      \
        for (int64_t q = nfull * NR; q < ncb; q += NR, dst += NR * kcb) {                      \
            const int64_t nrr = imin(NR, ncb - q);                                             \
            const T *src = b + q * csb;                                                        \
            if (csb == 1) {                                                                    \
                for (int64_t p = 0; p < kcb; ++p) {                                            \
                    memcpy(dst + p * NR, src + p * rsb, (size_t)nrr * sizeof(T));              \
                    for (int64_t j = nrr; j < NR; ++j) dst[p * NR + j] = 0;                    \
                }                                                                              \
            } else if (rsb == 1) { /* B^T: each column front to back */                      \
                for (int64_t j = 0; j < nrr; ++j) {                                            \
                    const T *col = src + j * csb;                                              \
                    for (int64_t p = 0; p < kcb; ++p) dst[p * NR + j] = col[p * rsb];          \
                }                                                                              \
                for (int64_t p = 0; p < kcb; ++p)                                              \
                    for (int64_t j = nrr; j < NR; ++j) dst[p * NR + j] = 0;                    \
            } else { /* both strides past 1: row by row (down a column, every element was a   \
                      * line of its own: B[:, ::2] of 2048 rows 12.7x the unit-stride time) */ \
                for (int64_t p = 0; p < kcb; ++p) {                                            \
                    for (int64_t j = 0; j < nrr; ++j) dst[p * NR + j] = src[p * rsb + j * csb]; \
                    for (int64_t j = nrr; j < NR; ++j) dst[p * NR + j] = 0;                    \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }
DEFINE_PACK_B(pack_b_f32, float)
DEFINE_PACK_B(pack_b_f64, double)

/* bf16 A: pairs along k per row, k padded to even with zeros. */
static void pack_a_bf16(const uint16_t *a, int64_t rsa, int64_t csa, int64_t mcb, int64_t kcb,
                        int64_t MR, uint16_t *dst)
{
    const int64_t kcp = rup(kcb, 2);
    for (int64_t r = 0; r < mcb; r += MR, dst += MR * kcp) {
        const int64_t mrr = imin(MR, mcb - r);
        if (csa == 1 && mrr == MR && MR == PYTPP_PK_MR_AVX512) {
            /* a k pair is one 32-bit word: a 32-bit transpose of the rows */
            const uint16_t *rows[PYTPP_PK_MR_AVX512];
            for (int i = 0; i < PYTPP_PK_MR_AVX512; ++i) rows[i] = a + (r + i) * rsa;
            const int64_t kq = kcb / 2;
            for (int64_t q = 0; q < kq; ++q) {
                uint32_t w[PYTPP_PK_MR_AVX512];
                for (int i = 0; i < PYTPP_PK_MR_AVX512; ++i) memcpy(&w[i], rows[i] + 2 * q, 4);
                memcpy(dst + q * 2 * PYTPP_PK_MR_AVX512, w, sizeof w);
            }
            if (kcb & 1)
                for (int i = 0; i < PYTPP_PK_MR_AVX512; ++i) {
                    dst[kq * 2 * PYTPP_PK_MR_AVX512 + 2 * i] = rows[i][kcb - 1];
                    dst[kq * 2 * PYTPP_PK_MR_AVX512 + 2 * i + 1] = 0;
                }
            continue;
        }
        if (csa != 1 && rsa == 1) {
            /* a column-major A: each column's rows of the panel at once (walked along a row,
             * every value was a line of its own: 2048^3 1.8x the row-major A's time) */
            const uint16_t *src = a + r;
            for (int64_t p = 0; p < kcb; ++p) {
                uint16_t *d = dst + (p & ~(int64_t)1) * MR + (p & 1);
                for (int64_t i = 0; i < mrr; ++i) d[2 * i] = src[p * csa + i];
            }
            if (kcb & 1)
                for (int64_t i = 0; i < mrr; ++i) dst[(kcb - 1) * MR + 2 * i + 1] = 0;
            continue;
        }
        for (int64_t i = 0; i < mrr; ++i) {
            const uint16_t *row = a + (r + i) * rsa;
            uint16_t *d = dst + 2 * i;
            int64_t p = 0;
            for (; p + 1 < kcb; p += 2) {
                d[p * MR] = row[p * csa];
                d[p * MR + 1] = row[(p + 1) * csa];
            }
            if (p < kcb) {
                d[p * MR] = row[p * csa];
                d[p * MR + 1] = 0;
            }
        }
    }
}

/* bf16 B: VNNI pairs (B[p][j], B[p+1][j]) in 32-bit lanes, NR columns per panel, zero-padded. */
static void pack_b_bf16(const uint16_t *b, int64_t rsb, int64_t csb, int64_t kcb, int64_t ncb,
                        int64_t NR, uint16_t *dst)
{
    enum { W = PYTPP_PK_NR_AVX512_F32 };   /* the AVX-512 bf16 panel width */
    const int64_t kcp = rup(kcb, 2);
    const int64_t nfull = csb == 1 && NR == PYTPP_PK_NR_AVX512_F32 ? ncb / NR : 0;
    if (nfull) { /* row pairs read front to back; a VNNI pair is (r0 | r1 << 16) */
        const int64_t kq = kcb / 2;
        for (int64_t pq = 0; pq < kq; ++pq) {
            const uint16_t *r0 = b + 2 * pq * rsb, *r1 = r0 + rsb;
            if (2 * pq + PACK_PF_ROWS + 1 < kcb) {
                prefetch_span(r0 + PACK_PF_ROWS * rsb, nfull * 2 * W);
                prefetch_span(r1 + PACK_PF_ROWS * rsb, nfull * 2 * W);
            }
            for (int64_t q = 0; q < nfull; ++q) {
                uint32_t w[W];
                for (int j = 0; j < W; ++j)
                    w[j] = (uint32_t)r0[q * W + j] | (uint32_t)r1[q * W + j] << 16;
                memcpy(dst + q * W * kcp + pq * 2 * W, w, sizeof w);
            }
        }
        if (kcb & 1) {
            const uint16_t *r0 = b + (kcb - 1) * rsb;
            for (int64_t q = 0; q < nfull; ++q) {
                uint32_t w[W];
                for (int j = 0; j < W; ++j) w[j] = (uint32_t)r0[q * W + j];
                memcpy(dst + q * W * kcp + kq * 2 * W, w, sizeof w);
            }
        }
        dst += nfull * NR * kcp;
        b += nfull * NR;
        ncb -= nfull * NR;
    }
    if (rsb == 1 && csb != 1) { /* B^T contiguous (x @ w.T): each row of w front to back */
        for (int64_t q = 0; q < ncb; q += NR, dst += NR * kcp) {
            const int64_t nrr = imin(NR, ncb - q);
            for (int64_t j = 0; j < NR; ++j) {
                const uint16_t *s = b + (q + j) * csb;
                for (int64_t p = 0; p < kcp; p += 2) {
                    dst[p * NR + 2 * j] = j < nrr ? s[p] : 0;
                    dst[p * NR + 2 * j + 1] = j < nrr && p + 1 < kcb ? s[p + 1] : 0;
                }
            }
        }
        return;
    }
    for (int64_t q = 0; q < ncb; q += NR, dst += NR * kcp) {
        const int64_t nrr = imin(NR, ncb - q);
        const uint16_t *src = b + q * csb;
        for (int64_t p = 0; p < kcp; p += 2) {
            uint16_t *d = dst + p * NR;
            const uint16_t *r0 = src + p * rsb;
            const uint16_t *r1 = src + (p + 1) * rsb;
            const int odd_pad = p + 1 >= kcb;
            for (int64_t j = 0; j < nrr; ++j) {
                d[2 * j] = r0[j * csb];
                d[2 * j + 1] = odd_pad ? 0 : r1[j * csb];
            }
            for (int64_t j = nrr; j < NR; ++j) d[2 * j] = d[2 * j + 1] = 0;
        }
    }
}

/* ---- widened bf16: fp32 panels in vdpbf16ps order (gemm_goto.h) ---------------------------- */

static inline float bf16_bits_to_f32(uint32_t hi_bits)
{
    float f;
    memcpy(&f, &hi_bits, 4);
    return f;
}
#define BF16_WIDEN(h) bf16_bits_to_f32((uint32_t)(h) << 16)
#define BF16_KEEP(h) (h)

/* A block into MR-row fp32 panels, k padded to even, each pair's odd element first. */
static void pack_a_bf16w(const uint16_t *a, int64_t rsa, int64_t csa, int64_t mcb, int64_t kcb,
                         int64_t MR, float *dst)
{
    const int64_t kcp = rup(kcb, 2), kq = kcb / 2;
    for (int64_t r = 0; r < mcb; r += MR, dst += MR * kcp) {
        const int64_t mrr = imin(MR, mcb - r);
        if (csa == 1 && mrr == MR && (MR == PYTPP_PK_MR_AVX2 || MR == PYTPP_PK_MR_AVX512)) {
            /* full panel: per k pair one 32-bit word of each row, two whole fp32 panel rows out */
            const uint16_t *rows[12];
            for (int64_t i = 0; i < MR; ++i) rows[i] = a + (r + i) * rsa;
            for (int64_t q = 0; q < kq; ++q) {
                float *d = dst + 2 * q * MR;
                for (int64_t i = 0; i < MR; ++i) {
                    uint32_t w;
                    memcpy(&w, rows[i] + 2 * q, 4);
                    d[i] = bf16_bits_to_f32(w & 0xFFFF0000u);
                    d[MR + i] = bf16_bits_to_f32(w << 16);
                }
            }
            if (kcb & 1)
                for (int64_t i = 0; i < MR; ++i) {
                    dst[(kcb - 1) * MR + i] = 0.0f;
                    dst[kcb * MR + i] = BF16_WIDEN(rows[i][kcb - 1]);
                }
            continue;
        }
        for (int64_t i = 0; i < mrr; ++i) {
            const uint16_t *row = a + (r + i) * rsa;
            float *d = dst + i;
            if (csa == 1) {
                for (int64_t q = 0; q < kq; ++q) { /* one 32-bit word: even | odd << 16 */
                    uint32_t w;
                    memcpy(&w, row + 2 * q, 4);
                    d[2 * q * MR] = bf16_bits_to_f32(w & 0xFFFF0000u);
                    d[(2 * q + 1) * MR] = bf16_bits_to_f32(w << 16);
                }
            } else {
                for (int64_t q = 0; q < kq; ++q) {
                    d[2 * q * MR] = BF16_WIDEN(row[(2 * q + 1) * csa]);
                    d[(2 * q + 1) * MR] = BF16_WIDEN(row[2 * q * csa]);
                }
            }
            if (kcb & 1) {
                d[(kcb - 1) * MR] = 0.0f;
                d[kcb * MR] = BF16_WIDEN(row[(kcb - 1) * csa]);
            }
        }
    }
}

/* B block into NR-column panels with k rows pair-swapped (row p' holds k row p' ^ 1), k padded
 * to even, columns zero-padded: fp32 (CONV = BF16_WIDEN) for a call's packing buffer, bf16
 * (CONV = BF16_KEEP) for a PackedMatrix. Rows are read front to back. */
#define DEFINE_PACK_B_PAIRSWAP(NAME, OUT_T, CONV)                                              \
    static void NAME(const uint16_t *b, int64_t rsb, int64_t csb, int64_t kcb, int64_t ncb,    \
                     int64_t NR, OUT_T *dst)                                                   \
    {                                                                                          \
        const int64_t kcp = rup(kcb, 2), npan = cdiv(ncb, NR);                                 \
        if (rsb == 1 && csb != 1) { /* B^T contiguous (x @ w.T): each row of w front to back */ \
            for (int64_t t = 0; t < npan; ++t) {                                               \
                const int64_t nrr = imin(NR, ncb - t * NR);                                    \
                OUT_T *o = dst + t * NR * kcp;                                                 \
                for (int64_t j = 0; j < NR; ++j) {                                             \
                    const uint16_t *s = b + (t * NR + j) * csb;                                \
                    for (int64_t p = 0; p < kcp; ++p)                                          \
                        o[p * NR + j] = j < nrr && (p ^ 1) < kcb ? CONV(s[p ^ 1]) : 0;         \
                }                                                                              \
            }                                                                                  \
            return;                                                                            \
        }                                                                                      \
        for (int64_t p = 0; p < kcp; ++p) {                                                    \
            const int64_t src_p = p ^ 1;                                                       \
            OUT_T *d = dst + p * NR;                                                           \
            if (src_p >= kcb) {                                                                \
                for (int64_t t = 0; t < npan; ++t)                                             \
                    for (int64_t j = 0; j < NR; ++j) d[t * NR * kcp + j] = 0;                  \
                continue;                                                                      \
            }                                                                                  \
            const uint16_t *row = b + src_p * rsb;                                             \
            if (src_p + PACK_PF_ROWS < kcb && csb == 1)                                        \
                prefetch_span(row + PACK_PF_ROWS * rsb, ncb * 2);                              \
            for (int64_t t = 0; t < npan; ++t) {                                               \
                const int64_t nrr = imin(NR, ncb - t * NR);                                    \
                const uint16_t *s = row + t * NR * csb;                                        \
                OUT_T *o = d + t * NR * kcp;                                                   \
                if (csb == 1 && nrr == NR && NR == PYTPP_PK_NR_AVX2_F32) {                     \
                    for (int j = 0; j < PYTPP_PK_NR_AVX2_F32; ++j) o[j] = CONV(s[j]);          \
                } else if (csb == 1) {                                                         \
                    for (int64_t j = 0; j < nrr; ++j) o[j] = CONV(s[j]);                       \
                } else {                                                                       \
                    for (int64_t j = 0; j < nrr; ++j) o[j] = CONV(s[j * csb]);                 \
                }                                                                              \
                for (int64_t j = nrr; j < NR; ++j) o[j] = 0;                                   \
            }                                                                                  \
        }                                                                                      \
    }
DEFINE_PACK_B_PAIRSWAP(pack_b_bf16w, float, BF16_WIDEN)
DEFINE_PACK_B_PAIRSWAP(pack_b_bf16s, uint16_t, BF16_KEEP)

/* ---- entry points ------------------------------------------------------------------------- */

void pytpp_pack_widen(const uint16_t *src, int64_t count, float *dst)
{
    for (int64_t i = 0; i < count; ++i) dst[i] = BF16_WIDEN(src[i]);
}

void pytpp_pack_rows_bf16w(const uint16_t *a, int64_t rsa, int64_t csa, int64_t rows, int64_t k,
                           float *dst, int64_t ld)
{
    for (int64_t i = 0; i < rows; ++i) {
        const uint16_t *row = a + i * rsa;
        float *d = dst + i * ld;
        for (int64_t p = 0; p < k; ++p) d[p ^ 1] = BF16_WIDEN(row[p * csa]);
        if (k & 1) d[k - 1] = 0.0f;
    }
}

void pytpp_pack_a(int dtype, int widen, const void *a, int64_t rsa, int64_t csa, int64_t mcb,
                  int64_t kcb, int64_t mr, void *dst)
{
    if (dtype == PYTPP_F32) pack_a_f32((const float *)a, rsa, csa, mcb, kcb, mr, dst);
    else if (dtype == PYTPP_F64) pack_a_f64((const double *)a, rsa, csa, mcb, kcb, mr, dst);
    else if (widen) pack_a_bf16w((const uint16_t *)a, rsa, csa, mcb, kcb, mr, dst);
    else pack_a_bf16((const uint16_t *)a, rsa, csa, mcb, kcb, mr, dst);
}

void pytpp_pack_b(int dtype, int widen, const void *b, int64_t rsb, int64_t csb, int64_t kcb,
                  int64_t ncb, int64_t nr, void *dst)
{
    if (dtype == PYTPP_F32) pack_b_f32((const float *)b, rsb, csb, kcb, ncb, nr, dst);
    else if (dtype == PYTPP_F64) pack_b_f64((const double *)b, rsb, csb, kcb, ncb, nr, dst);
    else if (widen) pack_b_bf16w((const uint16_t *)b, rsb, csb, kcb, ncb, nr, dst);
    else pack_b_bf16((const uint16_t *)b, rsb, csb, kcb, ncb, nr, dst);
}

void pytpp_pack_b_bf16_kept(const uint16_t *b, int64_t rsb, int64_t csb, int64_t kcb, int64_t ncb,
                            int64_t nr, uint16_t *dst)
{
    pack_b_bf16s(b, rsb, csb, kcb, ncb, nr, dst);
}
