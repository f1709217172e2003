/* Embedding-bag drivers (embedding.h): bags split over threads by their positions; the backward
 * groups the index positions by table row, each thread for the rows it owns, then writes its
 * rows once. No ISA code here: the kernels come from the table the caller picked. */
#include <stdlib.h>
#include <string.h>
#include "pytpp/embedding.h"
#include "pytpp/partition.h"
#include "pytpp/tuning.h"
#ifdef _OPENMP
#include <omp.h>
#endif

static int thread_count(int nthreads, int64_t work, int64_t parts)
{
    int nt = nthreads < 1 ? 1 : nthreads;
    if (work < PYTPP_EW_PAR_MIN_ELEMS) nt = 1;
    if (nt > parts) nt = (int)(parts > 0 ? parts : 1);
    return nt;
}

/* This thread's number and the region's thread count. */
static int thread_id(int *count)
{
    int t = 0, nt = 1;
#ifdef _OPENMP
    t = omp_get_thread_num();
    nt = omp_get_num_threads();
#endif
    *count = nt;
    return t;
}

/* Parts of the work per thread, taken dynamically: a thread slowed down (sharing its core)
 * leaves its parts to the others. Results do not depend on who takes a part. */
#define BAG_PARTS_PER_THREAD 8

/* The first bag of part t of nt: bags weigh their positions plus one (an empty bag still
 * writes a row), and part t starts at the first bag b with offsets[b] + b >= t/nt of the total. */
static int64_t bag_split(const pytpp_bag_index *ix, int64_t t, int64_t nt)
{
    if (t <= 0) return 0;
    if (t >= nt) return ix->nbags;
    const int64_t total = ix->nidx + ix->nbags;
    const int64_t target = (int64_t)((__int128)total * t / nt);
    int64_t lo = 0, hi = ix->nbags;        /* weight(nbags) = total >= target */
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (ix->offsets[mid] + mid >= target) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

static inline int64_t bag_end(const pytpp_bag_index *ix, int64_t b)
{
    return b + 1 < ix->nbags ? ix->offsets[b + 1] : ix->nidx;
}

int pytpp_embedding_bag_forward(const pytpp_embedding_kernels *kt, const pytpp_bag_index *ix,
                                int64_t dim, const void *w, int w_bf16, int64_t ldw, void *y,
                                int y_bf16, int nthreads)
{
    if (ix->nbags <= 0 || dim <= 0) return 0;
    const int nt = thread_count(nthreads, (ix->nidx + ix->nbags) * dim, ix->nbags);
    const int64_t yrow = dim * (y_bf16 ? 2 : kt->esz);
    const int64_t parts = nt > 1 ? (int64_t)nt * BAG_PARTS_PER_THREAD : 1;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
    for (int64_t c = 0; c < parts; ++c) {
        const int64_t b0 = bag_split(ix, c, parts), b1 = bag_split(ix, c + 1, parts);
        kt->bag_fwd(ix, b0, b1, dim, w, w_bf16, ldw, (char *)y + b0 * yrow, y_bf16, dim, NULL);
    }
    return 0;
}

/* max: the forward recomputed (into y, nbags x dim) for the position in its bag of each
 * column's maximum (am), computed in parallel; both NULL for the other modes. */
typedef struct bag_argmax {
    char *am, *y;
} bag_argmax;

static int argmax_alloc(const pytpp_embedding_kernels *kt, const pytpp_bag_index *ix,
                        int64_t dim, bag_argmax *a)
{
    a->am = a->y = NULL;
    if (ix->mode != PYTPP_BAG_MAX) return 0;
    const size_t bytes = (size_t)ix->nbags * (size_t)dim * (size_t)kt->esz;
    if (!(a->am = malloc(2 * bytes + 1))) return -1;
    a->y = a->am + bytes;
    return 0;
}

/* Inside a parallel region, by all its threads: the bags' argmax (ends with a barrier). */
static void argmax_fill(const pytpp_embedding_kernels *kt, const pytpp_bag_index *ix, int64_t dim,
                        const void *w, int w_bf16, int64_t ldw, const bag_argmax *a)
{
    if (!a->am) return;
    int T;
    thread_id(&T);
    const int64_t parts = (int64_t)T * BAG_PARTS_PER_THREAD;
#pragma omp for schedule(dynamic, 1)
    for (int64_t c = 0; c < parts; ++c) {
        const int64_t b0 = bag_split(ix, c, parts), b1 = bag_split(ix, c + 1, parts);
        const int64_t off = b0 * dim * kt->esz;
        kt->bag_fwd(ix, b0, b1, dim, w, w_bf16, ldw, a->y + off, 0, dim, a->am + off);
    }
}

static inline int64_t row_at(const int I64, const void *idx, int64_t k)
{
    return I64 ? ((const int64_t *)idx)[k] : (int64_t)((const int32_t *)idx)[k];
}

/* Counting sort of the positions whose row is in [r0, r0 + nr), by row, in position order
 * within a row: cnt (nr) gets each row's end relative to this part's first entry, at pos + base
 * (with pbag, each entry's bag); base, the entries of the parts before, is known after a barrier.
 * totals[t]: this part's entries. */
PYTPP_INLINE void
group_rows(const int I64, const pytpp_bag_index *ix, int64_t r0, int64_t nr, int64_t *cnt,
           int64_t *pos, int64_t *pbag, int64_t *totals, int t)
{
    memset(cnt, 0, (size_t)nr * sizeof(int64_t));
    for (int64_t k = 0; k < ix->nidx; ++k) {
        const uint64_t r = (uint64_t)(row_at(I64, ix->idx, k) - r0);
        if (r < (uint64_t)nr) ++cnt[r];
    }
    int64_t run = 0;
    for (int64_t i = 0; i < nr; ++i) {
        const int64_t c = cnt[i];
        cnt[i] = run;
        run += c;
    }
    totals[t] = run;
#pragma omp barrier
    int64_t base = 0;
    for (int u = 0; u < t; ++u) base += totals[u];
    int64_t *pk = pos + base, *pb = pbag + base;
    for (int64_t b = 0; b < ix->nbags; ++b)      /* positions in order, bag by bag */
        for (int64_t k = ix->offsets[b], e = bag_end(ix, b); k < e; ++k) {
            const uint64_t r = (uint64_t)(row_at(I64, ix->idx, k) - r0);
            if (r < (uint64_t)nr) {
                const int64_t at = cnt[r]++;
                pk[at] = k;
                pb[at] = b;
            }
        }
}

int pytpp_embedding_bag_backward(const pytpp_embedding_kernels *kt, const pytpp_bag_index *ix,
                                 int64_t dim, const void *g, const void *w, int w_bf16,
                                 int64_t ldw, void *out, int out_bf16, int64_t nrows,
                                 int nthreads)
{
    if (nrows <= 0 || dim <= 0) return 0;
    const int64_t orow = dim * (out_bf16 ? 2 : kt->esz);
    const int nt = thread_count(nthreads, (nrows + ix->nidx) * dim, nrows);
    /* every row is written once: beyond the caches by streaming stores, when the rows are whole
     * aligned cache lines (no partial line left to a write-combining flush) */
    const int stream = (uintptr_t)out % 64 == 0 && orow % 64 == 0 &&
                       nrows * orow >= PYTPP_EW_STREAM_MIN_BYTES;
    bag_argmax a;
    if (argmax_alloc(kt, ix, dim, &a)) return -1;
    int64_t *ends = malloc(((size_t)nrows + 2 * (size_t)ix->nidx + (size_t)nt) * sizeof(int64_t));
    if (!ends) {
        free(a.am);
        return -1;
    }
    int64_t *pos = ends + nrows, *pbag = pos + ix->nidx, *totals = pbag + ix->nidx;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int T;
        const int t = thread_id(&T);
        argmax_fill(kt, ix, dim, w, w_bf16, ldw, &a);
        int64_t r0, nr;
        pytpp_split(nrows, T, t, &r0, &nr);
        if (ix->idx64) group_rows(1, ix, r0, nr, ends + r0, pos, pbag, totals, t);
        else group_rows(0, ix, r0, nr, ends + r0, pos, pbag, totals, t);
#pragma omp barrier
        /* the rows, in parts taken dynamically; each part inside one thread's group */
        const int64_t parts = T > 1 ? BAG_PARTS_PER_THREAD : 1;
#pragma omp for schedule(dynamic, 1)
        for (int64_t c = 0; c < (int64_t)T * parts; ++c) {
            const int u = (int)(c / parts);
            int64_t u0, un, c0, cn, base = 0;
            pytpp_split(nrows, T, u, &u0, &un);
            pytpp_split(un, parts, c % parts, &c0, &cn);
            for (int v = 0; v < u; ++v) base += totals[v];
            if (cn > 0)
                kt->bag_bwd(ix, cn, dim, c0 == 0 ? 0 : ends[u0 + c0 - 1], ends + u0 + c0,
                            pos + base, pbag + base, g, a.am, (char *)out + (u0 + c0) * orow,
                            out_bf16, dim, stream);
        }
    }
    free(ends);
    free(a.am);
    return 0;
}

int pytpp_embedding_bag_backward_rows(const pytpp_embedding_kernels *kt,
                                      const pytpp_bag_index *ix, int64_t dim, const void *g,
                                      const void *w, int w_bf16, int64_t ldw, int64_t nslots,
                                      const int64_t *ends, const int64_t *pos,
                                      const int64_t *pbag, void *out, int nthreads)
{
    if (nslots <= 0 || dim <= 0) return 0;
    const int nt = thread_count(nthreads, (nslots + ix->nidx) * dim, nslots);
    bag_argmax a;
    if (argmax_alloc(kt, ix, dim, &a)) return -1;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int T;
        thread_id(&T);
        argmax_fill(kt, ix, dim, w, w_bf16, ldw, &a);
        const int64_t parts = T > 1 ? (int64_t)T * BAG_PARTS_PER_THREAD : 1;
#pragma omp for schedule(dynamic, 1)
        for (int64_t c = 0; c < parts; ++c) {
            int64_t s0, ns;
            pytpp_split(nslots, parts, c, &s0, &ns);
            if (ns > 0)
                kt->bag_bwd(ix, ns, dim, s0 == 0 ? 0 : ends[s0 - 1], ends + s0, pos, pbag, g,
                            a.am, (char *)out + s0 * dim * kt->esz, 0, dim, 0);
        }
    }
    free(a.am);
    return 0;
}

void pytpp_embedding_gather(const void *w, int64_t row_bytes, int64_t ldw_bytes, const void *idx,
                            int idx64, int64_t n, void *out, int64_t prefetch_bytes, int nthreads)
{
    if (n <= 0 || row_bytes <= 0) return;
    const int nt = thread_count(nthreads, n * row_bytes / 4, n);
    const char *wb = (const char *)w;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int64_t i0, len;
        pytpp_thread_part(n, &i0, &len);
        const int64_t *i64 = (const int64_t *)idx;
        const int32_t *i32 = (const int32_t *)idx;
        const int64_t dist = pytpp_bag_prefetch_rows(row_bytes, prefetch_bytes);
        for (int64_t i = i0; i < i0 + len; ++i) {
            const int64_t ahead = i + dist;
            if (ahead < i0 + len)
                pytpp_prefetch_bytes(wb + (idx64 ? i64[ahead] : i32[ahead]) * ldw_bytes, row_bytes);
            memcpy((char *)out + i * row_bytes, wb + (idx64 ? i64[i] : i32[i]) * ldw_bytes,
                   (size_t)row_bytes);
        }
    }
}
