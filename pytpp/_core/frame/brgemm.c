/* BRGEMM loop driver: register-block tiling of C, batch chunking and threads. No ISA code here:
 * every instruction-set detail sits behind the micro-kernel table it is given. */
#include <stdlib.h>
#include <string.h>
#include "pytpp/gemm.h"
#include "pytpp/lookahead.h"
#include "pytpp/partition.h"
#include "pytpp/tuning.h"
#ifdef _OPENMP
#include <omp.h>
#endif

/* Pointers per batch chunk kept on the stack. */
#define CHUNK_MAX 512

typedef struct plan {
    const pytpp_gemm_kernels *kt;
    const pytpp_gemm_desc *d;
    size_t esz;
    /* C is split into n_ib x n_jb register blocks of near-equal size: rows into n_ib blocks,
     * vectors of columns into n_jb blocks (a 64-wide C on 16-lane vectors becomes 2+2 vectors,
     * not 3+1, so no block runs at a fraction of the main block's FMA density). */
    int64_t n_ib, n_jb;
    int64_t nvec;          /* vectors per row of C, the last one maybe partial */
    int64_t chunk;         /* batch elements per pass over C */
    int streaming;         /* operands exceed L2: fetched ahead by the LPF micro-kernels */
} plan;

static size_t dtype_size(int dtype) { return dtype == PYTPP_F64 ? 8 : 4; }

/* cold: the operands come from memory even if this product's fit L2 (one of many independent
 * products that together exceed it), so they are fetched as a streaming reduction's are */
static void make_plan(plan *p, const pytpp_gemm_kernels *kt, const pytpp_cache_info *ci,
                      const pytpp_gemm_desc *d, int64_t count, int cold)
{
    p->kt = kt;
    p->d = d;
    p->esz = dtype_size(d->dtype);
    p->nvec = (d->n + kt->vl - 1) / kt->vl;
    p->n_jb = (p->nvec + kt->nv_main - 1) / kt->nv_main;
    const int64_t nv_widest = (p->nvec + p->n_jb - 1) / p->n_jb;
    const int64_t mr = kt->mr_max[nv_widest];
    p->n_ib = (d->m + mr - 1) / mr;
    /* A long reduction would stream every A_i and B_i from memory once per register block of C
     * (LIBXSMM falls to 14% of peak there). Reduce in short chunks instead and sweep all of C per
     * chunk: each operand comes from memory once, and the fetch of a chunk spreads over the whole
     * sweep (each tile's kernel call fetches its share of the next chunk). One Zen 5 core, 2000
     * x 64^3 f64: chunks of 1/4 and 1/8 of L2 alike (97-104 GFLOP/s), 1/2 10% slower; f32 1/4
     * 4-8% faster than 1/8. */
    int64_t pair = (d->m * d->k + d->k * d->n) * (int64_t)p->esz;
    int64_t budget = (ci && ci->l2 > 0 ? ci->l2 : PYTPP_DEFAULT_L2) / 4;
    int64_t chunk = pair > 0 ? budget / pair : CHUNK_MAX;
    if (chunk < 2) chunk = 2;
    const double total = (double)pair * (double)count,
                 l2 = (double)(ci && ci->l2 > 0 ? ci->l2 : PYTPP_DEFAULT_L2);
    const int stream = total > l2 || cold;
    if (!stream) chunk = CHUNK_MAX;  /* all in L2: C stays in registers over the batch */
    p->streaming = stream;  /* (prefetching in-L2 operands measured 20% slower for fp64) */
    if (chunk > CHUNK_MAX) chunk = CHUNK_MAX;
    if (chunk > count) chunk = count;
    if (chunk < 1) chunk = 1;
    p->chunk = chunk;
}

static inline const void *batch_ptr(const pytpp_batch *bt, const void *base, int which,
                                    int64_t i, size_t esz)
{
    const char *b = (const char *)base;
    switch (bt->mode) {
    case PYTPP_BATCH_OFFSET:
        return b + (which ? bt->off_b[i] : bt->off_a[i]) * (int64_t)esz;
    case PYTPP_BATCH_ADDRESS:
        return which ? bt->ptr_b[i] : bt->ptr_a[i];
    default:
        return b + i * (which ? bt->stride_b : bt->stride_a) * (int64_t)esz;
    }
}

/* The next chunk's operands [c1, c1 + n2) for tiles [t0, t1) (their rows of A, all of B), to
 * be fetched into L2 one slice per tile of this chunk; elements past the helper's regions are
 * left to the hardware prefetchers. All B blocks first: the first tiles of the next chunk read
 * all of B, and stride batches of contiguous blocks then form two ranges, which the LPF
 * kernels fetch evenly paced (a short row's share is issued at once by the helper). */
static pytpp_ahead next_chunk(const plan *p, const void *a, const void *b, int64_t ldb,
                              const pytpp_batch *bt, int64_t c1, int64_t n2, int64_t t0,
                              int64_t t1)
{
    const pytpp_gemm_desc *d = p->d;
    const int64_t esz = (int64_t)p->esz;
    int64_t r0, mr0, r1, mr1;
    pytpp_split(d->m, p->n_ib, t0 / p->n_jb, &r0, &mr0);
    pytpp_split(d->m, p->n_ib, (t1 - 1) / p->n_jb, &r1, &mr1);
    pytpp_ahead ah = {.n = 0};
    for (int64_t i = 0; i < n2; ++i)
        pytpp_ahead_add(&ah, batch_ptr(bt, b, 1, c1 + i, p->esz), d->k, d->n * esz, ldb * esz);
    for (int64_t i = 0; i < n2; ++i) {
        const char *an = (const char *)batch_ptr(bt, a, 0, c1 + i, p->esz);
        if (d->csa == 1)
            pytpp_ahead_add(&ah, an + r0 * d->rsa * esz, r1 + mr1 - r0, d->k * esz, d->rsa * esz);
        else if (d->rsa == 1)
            pytpp_ahead_add(&ah, an + r0 * esz, d->k, (r1 + mr1 - r0) * esz, d->csa * esz);
    }
    pytpp_ahead_plan(&ah, t1 - t0);
    return ah;
}

/* The operands of the product a thread computes after this one (same batch layout) */
typedef struct successor {
    const void *a, *b;
} successor;

/* Computes tiles [t0, t1) (tile t = column block t / n_ib, row block t % n_ib) over the whole
 * batch. While streaming, the last chunk fetches the successor's first one, so consecutive
 * independent products stream as one long reduction does. */
static void run_tiles(const plan *p, const void *a, const void *b, int64_t ldb, void *c,
                      const pytpp_batch *bt, int64_t t0, int64_t t1, const successor *after)
{
    const pytpp_gemm_desc *d = p->d;
    const pytpp_gemm_kernels *kt = p->kt;
    const void *ap[CHUNK_MAX + 1], *bp[CHUNK_MAX + 1];   /* [nb]: the LPF kernels' range */
    const int64_t count = bt->count;
    int64_t c0 = 0;
    do { /* at least one pass, so that count == 0 still applies beta to C */
        const int64_t nb = count - c0 < p->chunk ? count - c0 : p->chunk;
        for (int64_t i = 0; i < nb; ++i) {
            ap[i] = batch_ptr(bt, a, 0, c0 + i, p->esz);
            bp[i] = batch_ptr(bt, b, 1, c0 + i, p->esz);
        }
        const double beta = c0 == 0 ? d->beta : 1.0;
        pytpp_ahead ah = {.n = 0};
        if (p->streaming) {
            /* the chunk after this one: the rest of this batch, else the successor's first */
            const int hand_on = c0 + nb >= count && after;
            const int64_t n0 = hand_on ? 0 : c0 + nb;
            ah = next_chunk(p, hand_on ? after->a : a, hand_on ? after->b : b, ldb, bt, n0,
                            imin(count - n0, p->chunk), t0, t1);
        }
        ap[nb] = bp[nb] = NULL;
        for (int64_t t = t0; t < t1; ++t) {
            if (p->streaming) pytpp_ahead_take(&ah, d->k * nb, &ap[nb], &bp[nb]);
            /* In cache, column blocks go outermost (a B panel is reused down all row blocks);
             * streaming, row blocks do, so consecutive tiles read whole B rows from memory. */
            const int64_t jb = p->streaming ? t % p->n_jb : t / p->n_ib;
            const int64_t ib = p->streaming ? t / p->n_jb : t % p->n_ib;
            int64_t i0, mr, v0, nv;
            pytpp_split(d->m, p->n_ib, ib, &i0, &mr);
            pytpp_split(p->nvec, p->n_jb, jb, &v0, &nv);
            const int64_t j0 = v0 * kt->vl;
            const int64_t n_last = (d->n < (v0 + nv) * kt->vl ? d->n : (v0 + nv) * kt->vl) -
                                   (v0 + nv - 1) * kt->vl;
            const int masked = n_last != kt->vl;
            char *cp = (char *)c + (i0 * d->ldc + j0) * (int64_t)p->esz;
            const pytpp_ukr_fn ukr = p->streaming ? kt->ukr_lpf[nv - 1][mr - 1][masked]
                                                  : kt->ukr[nv - 1][mr - 1][masked];
            ukr(d->k, nb, (const void *const *)ap, i0 * d->rsa,
                                            d->rsa, d->csa, (const void *const *)bp, j0, ldb, cp,
                                            d->ldc, d->alpha, beta, n_last);
        }
        c0 += nb;
    } while (c0 < count);
}

/* B with a non-unit column stride is copied once into row-major scratch (count x k x n). */
static void *pack_b(const pytpp_gemm_desc *d, const void *b, const pytpp_batch *bt, size_t esz,
                    pytpp_batch *packed_bt)
{
    const int64_t per = d->k * d->n, count = bt->count;
    char *buf = malloc((size_t)(per * (count > 0 ? count : 1)) * esz);
    if (!buf) return NULL;
    for (int64_t i = 0; i < count; ++i) {
        const char *src = batch_ptr(bt, b, 1, i, esz);
        char *dst = buf + i * per * (int64_t)esz;
        for (int64_t p = 0; p < d->k; ++p)
            for (int64_t j = 0; j < d->n; ++j)
                memcpy(dst + (p * d->n + j) * (int64_t)esz,
                       src + (p * d->ldb + j * d->csb) * (int64_t)esz, esz);
    }
    *packed_bt = *bt;
    return buf;
}

static void serial_or_parallel(const plan *p, const void *a, const void *b, int64_t ldb, void *c,
                               const pytpp_batch *bt, int nthreads, const successor *after)
{
    const int64_t ntiles = p->n_ib * p->n_jb;
    const double flops = 2.0 * p->d->m * p->d->n * p->d->k * (double)bt->count;
    if (nthreads <= 1 || ntiles < 2 || flops < PYTPP_BRGEMM_PAR_MIN_FLOPS) {
        run_tiles(p, a, b, ldb, c, bt, 0, ntiles, after);
        return;
    }
    if (nthreads > ntiles) nthreads = (int)ntiles;
    #pragma omp parallel num_threads(nthreads)
    {
        /* split by the team OpenMP delivered, which may be smaller than asked (OMP_DYNAMIC,
         * thread limits, a nested region) */
        int64_t tid = 0, team = 1;
#ifdef _OPENMP
        tid = omp_get_thread_num();
        team = omp_get_num_threads();
#endif
        const int64_t t0 = ntiles * tid / team, t1 = ntiles * (tid + 1) / team;
        run_tiles(p, a, b, ldb, c, bt, t0, t1, after);
    }
}

static int brgemm_impl(const pytpp_gemm_kernels *kt, const pytpp_cache_info *ci,
                       const pytpp_gemm_desc *d, const void *a, const void *b, void *c,
                       const pytpp_batch *bt, int nthreads, int cold, const successor *after)
{
    if (d->m <= 0 || d->n <= 0) return 0;
    pytpp_batch none;
    if (d->k == 0 && bt->count > 0) {
        /* every product is empty: C = beta * C, once (not once per batch element) */
        none = *bt;
        none.count = 0;
        bt = &none;
    }
    plan p;
    make_plan(&p, kt, ci, d, bt->count, cold);
    if (d->csb == 1 || d->k == 0 || bt->count == 0) {
        serial_or_parallel(&p, a, b, d->ldb, c, bt, nthreads, after);
        return 0;
    }
    /* Transposed / strided B: pack, then address B_i as scratch + i*k*n. A keeps its mode. */
    pytpp_batch pb;
    void *scratch = pack_b(d, b, bt, p.esz, &pb);
    if (!scratch) return -1;
    const int64_t per = d->k * d->n;
    const void **bptrs = malloc((size_t)bt->count * sizeof(void *));
    if (!bptrs) { free(scratch); return -1; }
    for (int64_t i = 0; i < bt->count; ++i) bptrs[i] = (char *)scratch + i * per * (int64_t)p.esz;
    /* Resolve A to addresses too, so one ADDRESS batch describes both sides. */
    const void **aptrs = malloc((size_t)bt->count * sizeof(void *));
    if (!aptrs) { free(bptrs); free(scratch); return -1; }
    for (int64_t i = 0; i < bt->count; ++i) aptrs[i] = batch_ptr(bt, a, 0, i, p.esz);
    pb.mode = PYTPP_BATCH_ADDRESS;
    pb.ptr_a = aptrs;
    pb.ptr_b = bptrs;
    serial_or_parallel(&p, a, scratch, d->n, c, &pb, nthreads, NULL);
    free(aptrs);
    free(bptrs);
    free(scratch);
    return 0;
}

int pytpp_brgemm(const pytpp_gemm_kernels *kt, const pytpp_cache_info *ci,
                 const pytpp_gemm_desc *d, const void *a, const void *b, void *c,
                 const pytpp_batch *batch, int nthreads)
{
    return brgemm_impl(kt, ci, d, a, b, c, batch, nthreads, 0, NULL);
}

/* Products [o0, o0 + len) of pytpp_brgemm_many, in order, each handing its successor on */
static int run_products(const pytpp_gemm_kernels *kt, const pytpp_cache_info *ci,
                        const pytpp_gemm_desc *d, const char *a, const char *b, char *c,
                        const pytpp_batch *batch, int64_t o0, int64_t len, int64_t outer_a,
                        int64_t outer_b, int64_t outer_c, int nthreads, int cold)
{
    const int64_t esz = (int64_t)dtype_size(d->dtype);
    int err = 0;
    for (int64_t o = o0; o < o0 + len && !err; ++o) {
        const int last = o + 1 == o0 + len;
        const successor after = {last ? NULL : a + (o + 1) * outer_a * esz,
                                 last ? NULL : b + (o + 1) * outer_b * esz};
        err = brgemm_impl(kt, ci, d, a + o * outer_a * esz, b + o * outer_b * esz,
                          c + o * outer_c * esz, batch, nthreads, cold, last ? NULL : &after);
    }
    return err;
}

int pytpp_brgemm_many(const pytpp_gemm_kernels *kt, const pytpp_cache_info *ci,
                      const pytpp_gemm_desc *d, const void *a, const void *b, void *c,
                      const pytpp_batch *batch, int64_t many,
                      int64_t outer_a, int64_t outer_b, int64_t outer_c, int nthreads)
{
    const int64_t esz = (int64_t)dtype_size(d->dtype);
    if (many <= 0) return 0;
    /* 64 products of 16 x 64^3 (32 MiB), one Zen 5 core: f32 159 -> 228 GFLOP/s, f64 72 -> 87
     * fetched as streaming reductions (AVX2: 87 -> 98, 36 -> 49) */
    const double all = (double)many * (double)batch->count * (double)esz *
                       (double)(d->m * d->k + d->k * d->n);
    const int cold = all > (double)(ci && ci->l2 > 0 ? ci->l2 : PYTPP_DEFAULT_L2);
    const double flops = 2.0 * d->m * d->n * d->k * (double)batch->count * (double)many;
    if (many < nthreads || nthreads <= 1 || flops < PYTPP_BRGEMM_PAR_MIN_FLOPS)
        /* few independent products: let each one use the threads itself */
        return run_products(kt, ci, d, a, b, c, batch, 0, many, outer_a, outer_b, outer_c,
                            many < nthreads ? nthreads : 1, cold);
    int err = 0;
    /* one contiguous range per thread, so each product knows the one after it */
    #pragma omp parallel num_threads(nthreads) reduction(| : err)
    {
        int64_t o0, len;
        pytpp_thread_part(many, &o0, &len);
        err |= run_products(kt, ci, d, a, b, c, batch, o0, len, outer_a, outer_b, outer_c, 1,
                            cold);
    }
    return err ? -1 : 0;
}
