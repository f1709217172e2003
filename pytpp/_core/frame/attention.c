/* Tiled scaled dot-product attention (attention.h): BRGEMMs for the two products, the
 * element-wise row kernels for the online softmax. No ISA code here. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "pytpp/attention.h"
#include "pytpp/elem_access.h"
#include "pytpp/partition.h"
#include "pytpp/philox.h"
#include "pytpp/tuning.h"

/* queries and keys per tile: a 64 x 128 score block and a 64-row accumulator stay in L1/L2 */
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
    pytpp_philox_fill(w, bk, (uint64_t)((b * j->L + i) * j->S + j0), dr->seed);
    if (j->esz == 8) {
        double *r = (double *)row;
        for (int64_t t = 0; t < bk; ++t) r[t] = w[t] >= dr->thresh ? r[t] * dr->keep : 0.0;
    } else {
        float *r = (float *)row;
        const float keep = (float)dr->keep;
        for (int64_t t = 0; t < bk; ++t) r[t] = w[t] >= dr->thresh ? r[t] * keep : 0.0f;
    }
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
            if (j->mask) {
                const char *mr = j->mask + (b * j->msb + i * j->msl + j0 * j->mss) * esz;
                if (j->mss == 1)
                    j->ew->binary[PYTPP_EW_ADD](bk, row, mr, row, 0);
                else
                    for (int64_t t = 0; t < bk; ++t)
                        pytpp_elem_put(esz, row, t, pytpp_elem_get(esz, row, t) +
                                                        pytpp_elem_get(esz, mr, t * j->mss));
            }
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
        /* l == 0 (every key masked): NaN, as softmax gives */
        pytpp_elem_put(esz, inv, 0, l[r] == 0.0 ? NAN : 1.0 / l[r]);
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

int pytpp_sdpa_forward(const pytpp_gemm_kernels *gk, const pytpp_ew_kernels *ew, int64_t batch,
                       int64_t L, int64_t S, int64_t E, int64_t Ev, const void *q, const void *k,
                       const void *v, void *o, const void *mask, int64_t msb, int64_t msl,
                       int64_t mss, int causal, double scale, const pytpp_sdpa_dropout *drop,
                       int nthreads)
{
    if (batch <= 0 || L <= 0 || Ev <= 0) return 0;
    const int64_t esz = ew->dtype == PYTPP_EW_F64 ? 8 : 4;
    const att_job j = {.gk = gk, .ew = ew, .L = L, .S = S, .E = E, .Ev = Ev, .esz = esz,
                       .dtype = esz == 8 ? PYTPP_F64 : PYTPP_F32, .q = q, .k = k, .v = v,
                       .mask = mask, .o = o, .msb = msb, .msl = msl, .mss = mss,
                       .causal = causal, .scale = scale, .drop = drop};
    const int64_t qblocks = (L + ATT_BQ - 1) / ATT_BQ, tasks = batch * qblocks;
    int nt = nthreads < 1 ? 1 : nthreads;
    if ((double)batch * L * S * (E + Ev) * 2.0 < (double)(1 << 20)) nt = 1;
    if (nt > tasks) nt = (int)tasks;
    int err = 0;
#pragma omp parallel num_threads(nt) if (nt > 1) reduction(| : err)
    {
        int64_t t0, len;
        pytpp_thread_part(tasks, &t0, &len);
        const size_t kt_bytes = (size_t)(E * (S > 0 ? S : 1) * esz) + 64;
        char *buf = malloc(kt_bytes + (size_t)(ATT_BQ * ATT_BK + ATT_BQ * Ev) * esz + 128);
        double *ml = malloc(2 * ATT_BQ * sizeof(double));
        if (!buf || !ml) {
            err |= 1;
        } else {
            char *kt = buf, *s = buf + kt_bytes, *acc = s + ATT_BQ * ATT_BK * esz + 64;
            int64_t have = -1;
            for (int64_t t = t0; t < t0 + len; ++t) {
                const int64_t b = t / qblocks, i0 = (t % qblocks) * ATT_BQ;
                if (b != have) transpose_k(&j, b, kt), have = b;
                query_block(&j, b, i0, L - i0 < ATT_BQ ? L - i0 : ATT_BQ, kt, s, acc, ml,
                            ml + ATT_BQ);
            }
        }
        free(buf);
        free(ml);
    }
    return err ? -1 : 0;
}
