/* Fused scaled dot-product attention (attention.h), two loop structures: full score rows per
 * register block of queries (micro-kernel calls on packed K and V, a one-pass softmax row
 * kernel), and tiles with the online softmax (BRGEMMs, element-wise row kernels). No ISA code
 * here. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "pytpp/attention.h"
#include "pytpp/elem_access.h"
#include "pytpp/lookahead.h"
#include "pytpp/partition.h"
#include "pytpp/philox.h"
#include "pytpp/tuning.h"

/* queries per task (both structures); keys per tile: a 64 x 128 score block and a 64-row
 * accumulator stay in L1/L2 */
#define ATT_BQ 64
#define ATT_BK 128

typedef struct att_job {
    const pytpp_gemm_kernels *gk;
    const pytpp_ew_kernels *ew;
    int64_t L, S, E, Ev, esz;
    int dtype;
    const char *q, *k, *v, *mask;
    char *o;
    int64_t msb, msl, mss;
    int causal;
    double scale;
    const pytpp_sdpa_dropout *drop;   /* NULL: none */
} att_job;

/* Dropout of one row of probabilities (keys j0 ... j0 + bk of query i, batch entry b): the
 * Philox word of element (b, i, j) of the (batch, L, S) matrix in C order keeps it (scaled by
 * keep) when it is at least thresh, as pytpp.nn.dropout on that matrix. */
static void drop_row(const att_job *j, int64_t b, int64_t i, int64_t j0, int64_t bk, char *row)
{
    uint32_t w[ATT_BK];
    const pytpp_sdpa_dropout *dr = j->drop;
    for (int64_t c0 = 0; c0 < bk; c0 += ATT_BK) {   /* the full-row path passes whole rows */
        const int64_t n = imin(bk - c0, ATT_BK);
        pytpp_philox_fill(w, n, (uint64_t)((b * j->L + i) * j->S + j0 + c0), dr->seed);
        if (j->esz == 8) {
            double *r = (double *)row + c0;
            for (int64_t t = 0; t < n; ++t) r[t] = w[t] >= dr->thresh ? r[t] * dr->keep : 0.0;
        } else {
            float *r = (float *)row + c0;
            const float keep = (float)dr->keep;
            for (int64_t t = 0; t < n; ++t) r[t] = w[t] >= dr->thresh ? r[t] * keep : 0.0f;
        }
    }
}

/* row[0, n) += the mask of query i, keys j0 ... j0 + n, batch entry b */
static void add_mask(const att_job *j, int64_t b, int64_t i, int64_t j0, int64_t n, char *row)
{
    const int64_t esz = j->esz;
    const char *mr = j->mask + (b * j->msb + i * j->msl + j0 * j->mss) * esz;
    if (j->mss == 1)
        j->ew->binary[PYTPP_EW_ADD](n, row, mr, row, 0);
    else
        for (int64_t t = 0; t < n; ++t)
            pytpp_elem_put(esz, row, t, pytpp_elem_get(esz, row, t) +
                                            pytpp_elem_get(esz, mr, t * j->mss));
}

/* c (m x n, ldc) = alpha * a (m x kk, lda) b (kk x n, ldb) + beta * c, one thread */
static void gemm1(const att_job *j, int64_t m, int64_t n, int64_t kk, const char *a, int64_t lda,
                  const char *b, int64_t ldb, char *c, int64_t ldc, double alpha, double beta)
{
    const pytpp_gemm_desc d = {.m = m, .n = n, .k = kk, .rsa = lda, .csa = 1, .ldb = ldb,
                               .csb = 1, .ldc = ldc, .dtype = j->dtype, .alpha = alpha,
                               .beta = beta};
    const pytpp_batch bt = {.mode = PYTPP_BATCH_STRIDE, .count = 1};
    pytpp_brgemm(j->gk, NULL, &d, a, b, c, &bt, 1);
}

/* Queries [i0, i0 + bq) of batch entry b; kt: that entry's K^T (E x S). */
static void query_block(const att_job *j, int64_t b, int64_t i0, int64_t bq, const char *kt,
                        char *s, char *acc, double *m, double *l)
{
    const int64_t esz = j->esz, S = j->S, Ev = j->Ev;
    const char *qb = j->q + (b * j->L + i0) * j->E * esz;
    const char *vb = j->v + b * S * Ev * esz;
    memset(acc, 0, (size_t)(bq * Ev * esz));
    for (int64_t r = 0; r < bq; ++r) m[r] = -INFINITY, l[r] = 0.0;
    /* causal: keys beyond the block's last query are never kept */
    const int64_t s_end = j->causal && i0 + bq < S ? i0 + bq : S;
    for (int64_t j0 = 0; j0 < s_end; j0 += ATT_BK) {
        const int64_t bk = s_end - j0 < ATT_BK ? s_end - j0 : ATT_BK;
        gemm1(j, bq, bk, j->E, qb, j->E, kt + j0 * esz, S, s, ATT_BK, j->scale, 0.0);
        for (int64_t r = 0; r < bq; ++r) {
            char *row = s + r * ATT_BK * esz;
            const int64_t i = i0 + r;
            if (j->mask) add_mask(j, b, i, j0, bk, row);
            if (j->causal)
                for (int64_t t = i + 1 - j0 > 0 ? i + 1 - j0 : 0; t < bk; ++t)
                    pytpp_elem_put(esz, row, t, -INFINITY);
            const double mx = j->ew->reduce_row(bk, row, PYTPP_EW_RED_MAX, 0);
            const double mnew = mx > m[r] ? mx : m[r];
            if (mnew == -INFINITY) {        /* nothing kept yet in this row */
                memset(row, 0, (size_t)(bk * esz));
                continue;
            }
            const double corr = exp(m[r] - mnew);
            char neg[8];
            pytpp_elem_put(esz, neg, 0, mnew);
            j->ew->binary[PYTPP_EW_SUB](bk, row, neg, row, 2);      /* s - max (y scalar) */
            j->ew->unary[PYTPP_EW_EXP](bk, row, row);
            l[r] = l[r] * corr + j->ew->reduce_row(bk, row, PYTPP_EW_RED_SUM, 0);
            if (corr != 1.0) {
                char cf[8];
                pytpp_elem_put(esz, cf, 0, corr);
                char *ar = acc + r * Ev * esz;
                j->ew->binary[PYTPP_EW_MUL](Ev, ar, cf, ar, 2);
            }
            m[r] = mnew;
            if (j->drop) drop_row(j, b, i, j0, bk, row);   /* after the sum: P's own rows */
        }
        gemm1(j, bq, Ev, bk, s, ATT_BK, vb + j0 * Ev * esz, Ev, acc, Ev, 1.0, 1.0);
    }
    char *ob = j->o + (b * j->L + i0) * Ev * esz;
    for (int64_t r = 0; r < bq; ++r) {
        char inv[8];
        /* l == 0 (every key masked, or no keys): zeros, as torch's safe softmax gives */
        pytpp_elem_put(esz, inv, 0, l[r] == 0.0 ? 0.0 : 1.0 / l[r]);
        j->ew->binary[PYTPP_EW_MUL](Ev, acc + r * Ev * esz, inv, ob + r * Ev * esz, 2);
    }
}

/* kt (E x S) = K^T of batch entry b, in tiles of 16 keys (their rows stay in L1) */
#define ATT_TRANSPOSE(T)                                                                    \
    do {                                                                                    \
        const T *kb = (const T *)j->k + b * S * E;                                          \
        T *d = (T *)kt;                                                                     \
        for (int64_t s0 = 0; s0 < S; s0 += 16)                                              \
            for (int64_t e = 0; e < E; ++e)                                                 \
                for (int64_t s = s0; s < s0 + 16 && s < S; ++s) d[e * S + s] = kb[s * E + e]; \
    } while (0)

static void transpose_k(const att_job *j, int64_t b, char *kt)
{
    const int64_t S = j->S, E = j->E;
    if (j->esz == 8) ATT_TRANSPOSE(double); else ATT_TRANSPOSE(float);
}

/* ---- Full score rows. Per register block of query rows (6 with AVX2's 6 x 16 block): their
 * scores against every key by one micro-kernel call per panel of K^T, the softmax numerators of
 * each whole row in one pass while the rows are in L1 (no running maximum, no rescaling of an
 * accumulator), P @ V as one product with k = S written once into o, and its rows divided by the
 * sums. K and V are packed once per batch entry
 * into panels one register block wide (kp: K^T's columns, vp: V's columns), so that each
 * micro-kernel reads its B operand contiguously; read in place, K^T's rows lie 4 S bytes apart and
 * map to a few L1 sets. Per thread: the panels, O(S (E + Ev)), and the block's score rows. */

typedef struct att_panels {
    int64_t pw, mr, np, npv;   /* panel width (columns of a register block), rows per block,
                                * panels of K^T and of V */
    int nv;                    /* vectors per panel */
} att_panels;

static att_panels panels_of(const att_job *j)
{
    const pytpp_gemm_kernels *gk = j->gk;
    att_panels p = {.nv = gk->nv_main, .pw = (int64_t)gk->nv_main * gk->vl,
                    .mr = gk->mr_max[gk->nv_main]};
    p.np = cdiv(j->S, p.pw);
    p.npv = cdiv(j->Ev, p.pw);
    return p;
}

/* dst[p][e][c] = src[p pw + c][e] for src (rows x cols): panels of src^T, zero past rows */
static void pack_t(const att_job *j, int64_t pw, int64_t np, int64_t rows, int64_t cols,
                   const char *src, char *dst)
{
    const int64_t esz = j->esz;
    for (int64_t p = 0; p < np; ++p) {
        const int64_t w = imin(pw, rows - p * pw);
        char *d = dst + p * cols * pw * esz;
        j->ew->transpose(w, cols, src + p * pw * cols * esz, cols, d, pw);
        if (w < pw)
            for (int64_t e = 0; e < cols; ++e)
                memset(d + (e * pw + w) * esz, 0, (size_t)((pw - w) * esz));
    }
}

/* dst[p][r][c] = src[r][p pw + c] for src (rows x cols): column panels, zero past cols */
static void pack_cols(const att_job *j, int64_t pw, int64_t rows, int64_t cols, const char *src,
                      char *dst)
{
    const int64_t esz = j->esz;
    for (int64_t p = 0; p < cdiv(cols, pw); ++p) {
        const int64_t c0 = p * pw, w = imin(pw, cols - c0);
        char *d = dst + p * rows * pw * esz;
        const size_t used = (size_t)(w * esz), pad = (size_t)((pw - w) * esz);
        for (int64_t r = 0; r < rows; ++r) {
            char *dr = d + r * pw * esz;
            const char *sr = src + (r * cols + c0) * esz;
            if (used == 64)   /* a whole cache line a row: a constant-size copy, inlined */
                memcpy(dr, sr, 64);
            else
                memcpy(dr, sr, used);
            if (pad) memset(dr + used, 0, pad);
        }
    }
}

/* kp: K^T in panels (kp[p][e][c] = K[p pw + c][e]), vp: V in column panels (vp[p][s][c] =
 * V[s][p pw + c]), zero past S or Ev */
static void pack_kv(const att_job *j, const att_panels *pn, int64_t b, char *kp, char *vp)
{
    const int64_t S = j->S, E = j->E, Ev = j->Ev, esz = j->esz;
    pack_t(j, pn->pw, pn->np, S, E, j->k + b * S * E * esz, kp);
    pack_cols(j, pn->pw, S, Ev, j->v + b * S * Ev * esz, vp);
}

/* c (mr x nv vectors, ldc) = alpha a (mr x k, rows rsa apart) b (k x nv vectors, packed panel) */
static inline void ukr1(const att_job *j, int64_t mr, int64_t nv, int64_t n_last, int64_t k,
                        const char *a, int64_t rsa, const char *b, int64_t ldb, char *c,
                        int64_t ldc, double alpha)
{
    const void *ap[2] = {a, a}, *bp[2] = {b, b};
    j->gk->ukr[nv - 1][mr - 1][n_last != j->gk->vl](k, 1, ap, 0, rsa, 1, bp, 0, ldb, c, ldc,
                                                     alpha, 0.0, n_last);
}

/* Euclidean norm of the n elements at x (the table's sum of squares) */
static double norm2(const att_job *j, const char *x, int64_t n)
{
    return sqrt(j->ew->reduce_row(n, x, PYTPP_EW_RED_SUM, 1));
}

/* The largest norm of the rows of K of batch entry b: scale |q_i| times it bounds the scores of
 * query i (Cauchy-Schwarz) */
static double key_norm_max(const att_job *j, int64_t b)
{
    double mx = 0.0;
    for (int64_t t = 0; t < j->S; ++t) {
        const double nk = norm2(j, j->k + (b * j->S + t) * j->E * j->esz, j->E);
        mx = nk > mx || nk != nk ? nk : mx;
    }
    return mx;
}

/* The softmax numerators of query i (batch entry b, keys [0, n)) from its scores row (the mask
 * added to it first): prow = exp(row - shift), their sum returned; a row whose every key is
 * masked gives zeros and returns infinity (torch's safe softmax: P = 0, no gradient). The shift:
 * any value near the row's maximum. Without a mask, the bound |scale| |q_i| max_j |k_j| (qrow:
 * q_i, kmax: key_norm_max) saves the pass that finds the maximum; where it is loose enough that
 * the sum drops below 2^-50 (the largest numerator then below 2^-64: underflowed ones, below
 * 2^-126, are nothing beside it), or the sum is not finite, the row is redone from its maximum.
 * float32 takes the table's approximate exp (relative error 2.6e-6, beside the scores' own
 * ~E eps). */
static double row_numerators(const att_job *j, int64_t b, int64_t i, int64_t n,
                             const char *qrow, double kmax, char *row, char *prow)
{
    const int approx = j->esz == 4;
    double l = 0.0;
    if (j->mask) {
        add_mask(j, b, i, 0, n, row);
    } else {
        const double c = fabs(j->scale) * norm2(j, qrow, j->E) * kmax;
        l = j->ew->exp_sum(n, row, prow, c, approx);
    }
    if (!(l >= 0x1p-50 && l <= 0x1p100)) {
        const double mx = j->ew->reduce_row(n, row, PYTPP_EW_RED_MAX, 0);
        if (mx == -INFINITY) {
            memset(prow, 0, (size_t)(n * j->esz));
            return INFINITY;
        }
        l = j->ew->exp_sum(n, row, prow, mx, approx);
    }
    return l;
}

/* Queries [i0, i0 + mr) of batch entry b (one register block of rows); s: their mr x lds
 * scores, then as many rows of numerators exp(s - shift); kmax: key_norm_max of b */
static void row_block_full(const att_job *j, const att_panels *pn, int64_t b, int64_t i0,
                           int64_t mr, const char *kp, const char *vp, char *s, int64_t lds,
                           double kmax)
{
    const int64_t esz = j->esz, S = j->S, E = j->E, Ev = j->Ev, pw = pn->pw;
    const int64_t vl = j->gk->vl;
    const char *qr = j->q + (b * j->L + i0) * E * esz;
    char *pr = s + mr * lds * esz;
    /* causal: keys beyond the block's last query are never kept */
    const int64_t s_end = j->causal ? imin(S, i0 + mr) : S;
    for (int64_t p = 0; p < cdiv(s_end, pw); ++p)
        ukr1(j, mr, pn->nv, vl, E, qr, E, kp + p * E * pw * esz, pw, s + p * pw * esz, lds,
             j->scale);
    double inv[PYTPP_MR_MAX];
    for (int64_t r = 0; r < mr; ++r) {
        char *row = s + r * lds * esz, *prow = pr + r * lds * esz;
        const int64_t i = i0 + r, n = j->causal ? imin(i + 1, S) : S;
        inv[r] = 1.0 / row_numerators(j, b, i, n, qr + r * E * esz, kmax, row, prow);
        if (n < s_end) memset(prow + n * esz, 0, (size_t)((s_end - n) * esz));
        if (j->drop) drop_row(j, b, i, 0, n, prow);   /* after the sum: P's own rows */
    }
    char *orow = j->o + (b * j->L + i0) * Ev * esz;
    for (int64_t p = 0; p < pn->npv; ++p) {
        const int64_t w = imin(pw, Ev - p * pw), nv = cdiv(w, vl);
        ukr1(j, mr, nv, w - (nv - 1) * vl, s_end, pr, lds, vp + p * S * pw * esz, pw,
             orow + p * pw * esz, Ev, 1.0);
    }
    for (int64_t r = 0; r < mr; ++r) {   /* the softmax's denominators */
        char f[8];
        pytpp_elem_put(esz, f, 0, inv[r]);
        j->ew->binary[PYTPP_EW_MUL](Ev, orow + r * Ev * esz, f, orow + r * Ev * esz, 2);
    }
}

/* Auto picks full rows up to this many keys: measured faster than the tiles at every length up
 * to there (1 thread, E = Ev = 64: 1.26x at 4096, 1.37x at 8192, 1.48x at 16384; the panels,
 * 512 bytes a key, then come from L3). Beyond, unmeasured, the tiles keep the per-thread
 * buffers at K^T's size. */
#define ATT_FULL_MAX_S 16384

int pytpp_sdpa_forward(const pytpp_gemm_kernels *gk, const pytpp_ew_kernels *ew, int64_t batch,
                       int64_t L, int64_t S, int64_t E, int64_t Ev, const void *q, const void *k,
                       const void *v, void *o, const void *mask, int64_t msb, int64_t msl,
                       int64_t mss, int causal, double scale, const pytpp_sdpa_dropout *drop,
                       int path, int nthreads)
{
    if (batch <= 0 || L <= 0 || Ev <= 0) return 0;
    const int64_t esz = ew->dtype == PYTPP_EW_F64 ? 8 : 4;
    const att_job j = {.gk = gk, .ew = ew, .L = L, .S = S, .E = E, .Ev = Ev, .esz = esz,
                       .dtype = esz == 8 ? PYTPP_F64 : PYTPP_F32, .q = q, .k = k, .v = v,
                       .mask = mask, .o = o, .msb = msb, .msl = msl, .mss = mss,
                       .causal = causal, .scale = scale, .drop = drop};
    const att_panels pn = panels_of(&j);
    /* no keys: the tiled path's empty sums give the zero rows */
    const int full = S > 0 && (path == PYTPP_SDPA_FULL_ROWS ||
                               (path == PYTPP_SDPA_AUTO && S <= ATT_FULL_MAX_S));
    /* a 64-byte pad between score rows: rows a power of two apart share L1 sets */
    const int64_t lds = pn.np * pn.pw + 64 / esz;
    const int64_t qblocks = (L + ATT_BQ - 1) / ATT_BQ, tasks = batch * qblocks;
    int nt = nthreads < 1 ? 1 : nthreads;
    if ((double)batch * L * S * (E + Ev) * 2.0 < (double)(1 << 20)) nt = 1;
    if (nt > tasks) nt = (int)tasks;
    int err = 0;
#pragma omp parallel num_threads(nt) if (nt > 1) reduction(| : err)
    {
        int64_t t0, len;
        pytpp_thread_part(tasks, &t0, &len);
        /* full: packed K, packed V, a row block's scores; tiled: K^T, the scores, the
         * accumulator */
        const size_t kb = (size_t)((full ? pn.np * pn.pw : (S > 0 ? S : 1)) * E * esz) + 64;
        const size_t vb = full ? (size_t)(pn.npv * pn.pw * S * esz) + 64 : 0;
        const size_t sb = (size_t)(full ? 2 * pn.mr * lds * esz
                                        : (ATT_BQ * ATT_BK + ATT_BQ * Ev) * esz);
        char *buf = malloc(kb + vb + sb + 256);   /* alignments and the accumulator's pad */
        double *ml = malloc(2 * ATT_BQ * sizeof(double));
        if (!buf || !ml) {
            err |= 1;
        } else {
            /* each buffer on a cache line */
            char *kt = (char *)(((uintptr_t)buf + 63) & ~(uintptr_t)63);
            char *vp = kt + ((kb + 63) & ~(size_t)63), *s = vp + ((vb + 63) & ~(size_t)63);
            char *acc = s + ATT_BQ * ATT_BK * esz + 64;
            int64_t have = -1;
            double kmax = 0.0;
            pytpp_ahead ahead = {.n = 0};
            for (int64_t t = t0; t < t0 + len; ++t) {
                const int64_t b = t / qblocks, i0 = (t % qblocks) * ATT_BQ;
                const int64_t bq = L - i0 < ATT_BQ ? L - i0 : ATT_BQ;
                if (full) {
                    if (b != have) {
                        pack_kv(&j, &pn, b, kt, vp);
                        kmax = key_norm_max(&j, b);
                        have = b;
                        /* the next entry's K and V into L2 while this one computes, when
                         * this thread takes it (lookahead.h; B = 8, H = 12, L = 128, E = 64 on
                         * one Zen 4 core exposing AVX2: 1.05-1.08x, L = 512 1.00-1.015x) */
                        ahead = (pytpp_ahead){.n = 0};
                        if ((b + 1) * qblocks < t0 + len) {
                            pytpp_ahead_add(&ahead, j.k + (b + 1) * S * E * esz, 1,
                                            S * E * esz, 0);
                            pytpp_ahead_add(&ahead, j.v + (b + 1) * S * Ev * esz, 1,
                                            S * Ev * esz, 0);
                        }
                        pytpp_ahead_plan(&ahead, cdiv(L, pn.mr));
                    }
                    /* near-equal blocks: 64 = 9 x 6 + 2 x 5 */
                    const int64_t nrb = cdiv(bq, pn.mr);
                    for (int64_t rb = 0; rb < nrb; ++rb) {
                        int64_t r0, mr;
                        pytpp_split(bq, nrb, rb, &r0, &mr);
                        row_block_full(&j, &pn, b, i0 + r0, mr, kt, vp, s, lds, kmax);
                        pytpp_ahead_step(&ahead);
                    }
                } else {
                    if (b != have) transpose_k(&j, b, kt), have = b;
                    query_block(&j, b, i0, bq, kt, s, acc, ml, ml + ATT_BQ);
                }
            }
        }
        free(buf);
        free(ml);
    }
    return err ? -1 : 0;
}

/* ---- Backward (pytpp_sdpa_backward). Per batch entry and block of queries (bwd_query_block:
 * its P and dS rows within about half of L2), two phases, every product by the micro-kernels
 * on operands packed once per entry into panels one register block wide (as the forward):
 * 1. rows: per register block of queries, the scores against every key (K^T in panels),
 *    P = softmax (safe), dP = dO V^T (V^T in panels), the dropout keep bits drawn once per row,
 *    D = rowsum(dP keep * P) (= rowsum(dO O), no P V again), dS = P (dP keep - D), and dQ's rows
 *    = scale dS K (K in column panels) while dS's rows are in L1; dS and P keep stored for the
 *    block;
 * 2. keys: per register block of keys, dK += scale dS^T Q and dV += (P keep)^T dO over the
 *    block's queries, the transposed operand read in place (A's strides (1, lds): each k step
 *    reads a few consecutive elements of one stored row; causal: only queries i >= the key
 *    block's first).
 * Threads take whole batch entries (each writes its own dK and dV), or query blocks of every
 * entry with per-thread partial dK, dV summed after a barrier. */

/* c (mr x cols, ldc) = alpha a (mr x k, strides rsa, csa) b (k x cols, column panels of pw,
 * panel p at b + p * ldp elements) */
static void ukr_rows(const att_job *j, const att_panels *pn, int64_t mr, int64_t cols, int64_t k,
                     const char *a, int64_t rsa, int64_t csa, const char *b, int64_t ldp,
                     char *c, int64_t ldc, double alpha, double beta)
{
    const int64_t esz = j->esz, pw = pn->pw, vl = j->gk->vl;
    for (int64_t p = 0; p < cdiv(cols, pw); ++p) {
        const int64_t w = imin(pw, cols - p * pw), nv = cdiv(w, vl), n_last = w - (nv - 1) * vl;
        const void *ap[2] = {a, a}, *bp[2] = {b + p * ldp * esz, b + p * ldp * esz};
        j->gk->ukr[nv - 1][mr - 1][n_last != vl](k, 1, ap, 0, rsa, csa, bp, 0, pw,
                                                  c + p * pw * esz, ldc, alpha, beta, n_last);
    }
}

typedef struct att_bwd_bufs {
    char *kp, *vp;      /* K^T and V^T in panels */
    char *kc, *qc, *gc; /* K, Q and dO in column panels */
    char *p, *ds;       /* (L x lds): P (then P keep), the scores (then dP, then dS) */
    uint8_t *bits;      /* one row's keep bits */
    int64_t lds;
} att_bwd_bufs;

/* Phase 1 for queries [i0, i0 + mr) of batch entry b */
static void bwd_row_block(const att_job *j, const att_panels *pn, const att_bwd_bufs *bf,
                          int64_t b, int64_t q0, int64_t i0, int64_t mr, const char *go, char *dq,
                          double kmax)
{
    const int64_t esz = j->esz, S = j->S, E = j->E, Ev = j->Ev, pw = pn->pw, lds = bf->lds;
    const int64_t vl = j->gk->vl;
    const char *qr = j->q + (b * j->L + i0) * E * esz;
    const char *gr = go + (b * j->L + i0) * Ev * esz;
    char *sc = bf->ds + (i0 - q0) * lds * esz, *pr = bf->p + (i0 - q0) * lds * esz;
    const int64_t s_end = j->causal ? imin(S, i0 + mr) : S;
    const int64_t npe = cdiv(s_end, pw);
    for (int64_t p = 0; p < npe; ++p)
        ukr1(j, mr, pn->nv, vl, E, qr, E, bf->kp + p * E * pw * esz, pw, sc + p * pw * esz,
             lds, j->scale);
    for (int64_t r = 0; r < mr; ++r) {   /* P, as the forward's full rows */
        char *row = sc + r * lds * esz, *prow = pr + r * lds * esz;
        const int64_t i = i0 + r, n = j->causal ? imin(i + 1, S) : S;
        const double l = row_numerators(j, b, i, n, qr + r * E * esz, kmax, row, prow);
        char f[8];
        pytpp_elem_put(esz, f, 0, 1.0 / l);
        j->ew->binary[PYTPP_EW_MUL](n, prow, f, prow, 2);
        if (n < S) memset(prow + n * esz, 0, (size_t)((S - n) * esz));
    }
    /* dP = dO V^T over the same keys, into the score rows */
    for (int64_t p = 0; p < npe; ++p)
        ukr1(j, mr, pn->nv, vl, Ev, gr, Ev, bf->vp + p * Ev * pw * esz, pw, sc + p * pw * esz,
             lds, 1.0);
    const pytpp_sdpa_dropout *dr = j->drop;
    for (int64_t r = 0; r < mr; ++r) {
        char *row = sc + r * lds * esz, *prow = pr + r * lds * esz;
        const int64_t i = i0 + r, n = j->causal ? imin(i + 1, S) : S;
        if (dr)   /* dP keep, the bits kept for P keep below */
            j->ew->dropout(n, row, row, bf->bits, (uint64_t)((b * j->L + i) * S), dr->seed,
                           dr->thresh, dr->keep);
        /* dS = P dPk - D P with D = sum(P dPk) */
        j->ew->binary[PYTPP_EW_MUL](n, row, prow, row, 0);
        char d[8];
        pytpp_elem_put(esz, d, 0, j->ew->reduce_row(n, row, PYTPP_EW_RED_SUM, 0));
        j->ew->ternary[PYTPP_EW_NMULADD](n, d, prow, row, row, 1);
        if (n < S) memset(row + n * esz, 0, (size_t)((S - n) * esz));
        if (dr) j->ew->dropout_inv(n, prow, prow, bf->bits, dr->keep);
    }
    /* dQ's rows while dS's are in L1 (keys past s_end: zeros) */
    ukr_rows(j, pn, mr, E, s_end, sc, lds, 1, bf->kc, S * pw, dq + (b * j->L + i0) * E * esz, E,
             j->scale, 0.0);
}

/* Phase 2 for keys [s0, s0 + mr) of batch entry b */
/* dk, dv: batch entry b's (S x E) and (S x Ev) gradients; first: the first query block they
 * see (written, later ones added) */
static void bwd_key_block(const att_job *j, const att_panels *pn, const att_bwd_bufs *bf,
                          int64_t q0, int64_t qn, int64_t s0, int64_t mr, char *dk, char *dv,
                          int first)
{
    const int64_t esz = j->esz, L = j->L, E = j->E, Ev = j->Ev, lds = bf->lds, pw = pn->pw;
    /* causal: query i sees key s only when i >= s */
    const int64_t i0 = j->causal ? imax(q0, s0) : q0, k = q0 + qn - i0;
    const double beta = first ? 0.0 : 1.0;
    char *dkr = dk + s0 * E * esz, *dvr = dv + s0 * Ev * esz;
    if (k <= 0) {
        if (first) {
            memset(dkr, 0, (size_t)(mr * E * esz));
            memset(dvr, 0, (size_t)(mr * Ev * esz));
        }
        return;
    }
    const int64_t off = (i0 - q0) * lds + s0;
    ukr_rows(j, pn, mr, E, k, bf->ds + off * esz, 1, lds, bf->qc + i0 * pw * esz, L * pw, dkr, E,
             j->scale, beta);
    ukr_rows(j, pn, mr, Ev, k, bf->p + off * esz, 1, lds, bf->gc + i0 * pw * esz, L * pw, dvr, Ev,
             1.0, beta);
}

/* Query rows per block of the backward: P and dS of a block, 2 qb x lds elements, within
 * about half of L2, where the key phase reads them back (1 thread, L = S = 2048: 2.7x faster
 * than blocks of all L rows); independent of the thread count, so that dK and dV are summed
 * over the same blocks in the same order */
#define ATT_BWD_BLOCK_BYTES (256 * 1024)

static int64_t bwd_query_block(const att_job *j, int64_t lds)
{
    int64_t qb = ATT_BWD_BLOCK_BYTES / (2 * lds * j->esz) / ATT_BQ * ATT_BQ;
    qb = imax(qb, ATT_BQ);
    return imin(qb, cdiv(j->L, ATT_BQ) * ATT_BQ);
}

/* One batch entry's buffers (att_bwd_bufs without bits) carved from one allocation, P and dS
 * of qb query rows; NULL when it cannot be had */
static char *bwd_alloc(const att_job *j, const att_panels *pn, int64_t lds, int64_t qb,
                       att_bwd_bufs *bf)
{
    const int64_t esz = j->esz, pw = pn->pw, L = j->L, S = j->S;
    const size_t szs[7] = {(size_t)(pn->np * pw * j->E * esz), (size_t)(pn->np * pw * j->Ev * esz),
                           (size_t)(S * cdiv(j->E, pw) * pw * esz),
                           (size_t)(L * cdiv(j->E, pw) * pw * esz),
                           (size_t)(L * cdiv(j->Ev, pw) * pw * esz), (size_t)(qb * lds * esz),
                           (size_t)(qb * lds * esz)};
    size_t tot = 64;
    for (int t = 0; t < 7; ++t) tot += (szs[t] + 63) & ~(size_t)63;
    char *buf = malloc(tot), *ptr[7];
    if (!buf) return NULL;
    char *at = (char *)(((uintptr_t)buf + 63) & ~(uintptr_t)63);
    for (int t = 0; t < 7; ++t) ptr[t] = at, at += (szs[t] + 63) & ~(size_t)63;
    *bf = (att_bwd_bufs){.kp = ptr[0], .vp = ptr[1], .kc = ptr[2], .qc = ptr[3], .gc = ptr[4],
                         .p = ptr[5], .ds = ptr[6], .bits = NULL, .lds = lds};
    return buf;
}

/* batch entry b's operands packed into bf; returns kmax (key_norm_max, without a mask) */
static double bwd_pack(const att_job *j, const att_panels *pn, const att_bwd_bufs *bf, int64_t b,
                       const char *go)
{
    const int64_t esz = j->esz, pw = pn->pw, L = j->L, S = j->S, E = j->E, Ev = j->Ev;
    const char *kb = j->k + b * S * E * esz;
    pack_t(j, pw, pn->np, S, E, kb, bf->kp);
    pack_t(j, pw, pn->np, S, Ev, j->v + b * S * Ev * esz, bf->vp);
    pack_cols(j, pw, S, E, kb, bf->kc);
    pack_cols(j, pw, L, E, j->q + b * L * E * esz, bf->qc);
    pack_cols(j, pw, L, Ev, go + b * L * Ev * esz, bf->gc);
    return j->mask ? 0.0 : key_norm_max(j, b);
}

/* The backward's look-ahead (lookahead.h): entry b's q, k, v and grad_out when `take` (a
 * backward over B = 8, H = 12, L = 128: 1.04-1.05x), over the register blocks of `qblocks` query
 * blocks of qb rows */
static pytpp_ahead bwd_ahead(const att_job *j, const att_panels *pn, int64_t b, int take,
                             const char *go, int64_t qblocks, int64_t qb)
{
    const int64_t esz = j->esz, L = j->L, S = j->S, E = j->E, Ev = j->Ev;
    pytpp_ahead a = {.n = 0};
    if (take) {
        pytpp_ahead_add(&a, j->q + b * L * E * esz, 1, L * E * esz, 0);
        pytpp_ahead_add(&a, j->k + b * S * E * esz, 1, S * E * esz, 0);
        pytpp_ahead_add(&a, j->v + b * S * Ev * esz, 1, S * Ev * esz, 0);
        pytpp_ahead_add(&a, go + b * L * Ev * esz, 1, L * Ev * esz, 0);
    }
    pytpp_ahead_plan(&a, qblocks * (cdiv(imin(qb, L), pn->mr) + cdiv(S, pn->mr)));
    return a;
}

/* Of batch entry b, its query block [q0, q0 + qn): the rows (P, dS, dQ), then the keys' dK
 * and dV (the entry's, or a thread's partial sums: dk, dv) */
static void bwd_query_block_run(const att_job *j, const att_panels *pn, const att_bwd_bufs *bf,
                                int64_t b, int64_t q0, int64_t qn, const char *go, char *dq,
                                char *dk, char *dv, double kmax, int first, pytpp_ahead *ah)
{
    for (int64_t c0 = q0; c0 < q0 + qn; c0 += ATT_BQ) {
        const int64_t bn = imin(q0 + qn - c0, ATT_BQ), nrb = cdiv(bn, pn->mr);
        for (int64_t r = 0; r < nrb; ++r) {   /* near-equal blocks: 64 = 9 x 6 + 2 x 5 */
            int64_t r0, mr;
            pytpp_split(bn, nrb, r, &r0, &mr);
            bwd_row_block(j, pn, bf, b, q0, c0 + r0, mr, go, dq, kmax);
            pytpp_ahead_step(ah);
        }
    }
    for (int64_t c0 = 0; c0 < j->S; c0 += ATT_BQ) {
        const int64_t bn = imin(j->S - c0, ATT_BQ), nrb = cdiv(bn, pn->mr);
        for (int64_t r = 0; r < nrb; ++r) {
            int64_t r0, mr;
            pytpp_split(bn, nrb, r, &r0, &mr);
            bwd_key_block(j, pn, bf, q0, qn, c0 + r0, mr, dk, dv, first);
            pytpp_ahead_step(ah);
        }
    }
}

int pytpp_sdpa_backward(const pytpp_gemm_kernels *gk, const pytpp_ew_kernels *ew, int64_t batch,
                        int64_t L, int64_t S, int64_t E, int64_t Ev, const void *q,
                        const void *k, const void *v, const void *go, void *dq, void *dk,
                        void *dv, const void *mask, int64_t msb, int64_t msl, int64_t mss,
                        int causal, double scale, const pytpp_sdpa_dropout *drop, int nthreads)
{
    if (batch <= 0) return 0;
    const int64_t esz = ew->dtype == PYTPP_EW_F64 ? 8 : 4;
    if (L <= 0 || S <= 0 || E <= 0 || Ev <= 0) {   /* empty sums: zero gradients */
        memset(dq, 0, (size_t)(batch * L * E * esz));
        memset(dk, 0, (size_t)(batch * S * E * esz));
        memset(dv, 0, (size_t)(batch * S * Ev * esz));
        return 0;
    }
    const att_job j = {.gk = gk, .ew = ew, .L = L, .S = S, .E = E, .Ev = Ev, .esz = esz,
                       .dtype = esz == 8 ? PYTPP_F64 : PYTPP_F32, .q = q, .k = k, .v = v,
                       .mask = mask, .o = NULL, .msb = msb, .msl = msl, .mss = mss,
                       .causal = causal, .scale = scale, .drop = drop};
    const att_panels pn = panels_of(&j);
    /* a 64-byte pad between rows: rows a power of two apart share L1 sets */
    const int64_t lds = pn.np * pn.pw + 64 / esz;
    const int64_t qb = bwd_query_block(&j, lds), nqb = cdiv(L, qb);
    int nt = nthreads < 1 ? 1 : nthreads;
    if ((double)batch * L * S * (E + Ev) * 4.0 < (double)(1 << 20)) nt = 1;
    /* Whole entries per thread, unless that leaves threads idle or unevenly loaded (fewer
     * than 4 entries each, not a multiple) and an entry has query blocks for every thread:
     * then each thread takes query blocks of every entry (its own packing), summing dK and dV
     * into its own partials, added after a barrier (rows split among the threads). */
    const int split = nt > 1 && batch % nt != 0 && batch < 4 * (int64_t)nt && nqb >= nt;
    if (!split && nt > batch) nt = (int)batch;
    const size_t bitsz = (size_t)cdiv(S, 8) + 64;
    const size_t partsz = split ? (size_t)(S * (E + Ev) * esz) : 0;
    char **parts = split ? calloc((size_t)nt, sizeof(char *)) : NULL;
    if (split && !parts) return -1;
    int err = 0;
#pragma omp parallel num_threads(nt) if (nt > 1) reduction(| : err)
    {
        att_bwd_bufs bf;
        char *buf = bwd_alloc(&j, &pn, lds, qb, &bf);
        uint8_t *bits = malloc(bitsz + partsz + 64);
        bf.bits = bits;
        const int ok = bits && buf;
        if (!ok) err |= 1;
        if (split) {
            int64_t me = 0, team = 1;
#ifdef _OPENMP
            me = omp_get_thread_num();
            team = omp_get_num_threads();
#endif
            /* every thread takes part in every barrier, failed or not */
            char *pk = ok ? (char *)(((uintptr_t)bits + bitsz + 63) & ~(uintptr_t)63) : NULL;
            char *pv = pk ? pk + S * E * esz : NULL;
            parts[me] = pk;
            for (int64_t b = 0; b < batch; ++b) {
                if (ok) {
                    const double km = bwd_pack(&j, &pn, &bf, b, go);
                    pytpp_ahead ah = bwd_ahead(&j, &pn, b + 1, b + 1 < batch, go,
                                             cdiv(nqb - me, team), qb);
                    for (int64_t t = me; t < nqb; t += team)
                        bwd_query_block_run(&j, &pn, &bf, b, t * qb, imin(qb, L - t * qb), go, dq,
                                            pk, pv, km, t == me, &ah);
                }
#pragma omp barrier
                /* dK, dV of entry b: the partials summed in thread order, rows split */
                int64_t r0, rn;
                pytpp_split(S, team, me, &r0, &rn);
                char *dkb = (char *)dk + b * S * E * esz, *dvb = (char *)dv + b * S * Ev * esz;
                for (int64_t t = 0; t < team && rn > 0; ++t) {
                    if (!parts[t]) continue;
                    const char *tk = parts[t] + r0 * E * esz;
                    const char *tv = parts[t] + (S * E + r0 * Ev) * esz;
                    char *ok_ = dkb + r0 * E * esz, *ov = dvb + r0 * Ev * esz;
                    if (t == 0) {
                        memcpy(ok_, tk, (size_t)(rn * E * esz));
                        memcpy(ov, tv, (size_t)(rn * Ev * esz));
                    } else {
                        ew->binary[PYTPP_EW_ADD](rn * E, ok_, tk, ok_, 0);
                        ew->binary[PYTPP_EW_ADD](rn * Ev, ov, tv, ov, 0);
                    }
                }
#pragma omp barrier
            }
        } else if (ok) {
            int64_t b0, len;
            pytpp_thread_part(batch, &b0, &len);
            for (int64_t b = b0; b < b0 + len; ++b) {
                const double km = bwd_pack(&j, &pn, &bf, b, go);
                pytpp_ahead ah = bwd_ahead(&j, &pn, b + 1, b + 1 < b0 + len, go, nqb, qb);
                for (int64_t q0 = 0; q0 < L; q0 += qb)
                    bwd_query_block_run(&j, &pn, &bf, b, q0, imin(qb, L - q0), go, dq,
                                        (char *)dk + b * S * E * esz,
                                        (char *)dv + b * S * Ev * esz, km, q0 == 0, &ah);
            }
        }
        free(buf);
        free(bits);
    }
    free(parts);
    return err ? -1 : 0;
}
