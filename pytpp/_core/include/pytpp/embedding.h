/* Embedding bags (TPP paper 5.1.5, Algorithm 5): a gather-reduce over the rows of a table, one
 * bag of index positions per output row, and its backward, a scatter-add grouped by table row.
 *
 * Forward: per bag, the rows weight[indices[k]] are accumulated in vector registers of the
 * compute dtype (bfloat16 tables widened on load), never copied out first; the rows a few
 * positions ahead are prefetched (they are random rows of a table far beyond the caches). Bag
 * i holds positions [offsets[i], offsets[i + 1]) (the last one up to nidx); an empty bag gives
 * zeros in every mode. Per column the rows are added in position order (sum: acc + w, or
 * fma(psw[k], w, acc); mean: the sum divided by the bag's length; max: acc = w > acc ? w : acc,
 * torch's rule: the first maximum wins, a NaN in the first row stays), so a bag's result does
 * not depend on the thread count.
 *
 * Backward: the index positions are grouped by table row (a counting sort over the rows each
 * thread owns), then every output row is written once, with the sum of its contributions
 * (scale * grad_out[bag], in position order) or zeros: no two threads touch a row, and the
 * result does not depend on the thread count either. max sends grad_out[bag, c] to the row of
 * the bag's maximum in column c, recomputed by the forward kernel (positions within the bag,
 * as floats of the compute dtype: exact below 2^24 for float32). */
#ifndef PYTPP_EMBEDDING_H
#define PYTPP_EMBEDDING_H
#include <stdint.h>
#include "pytpp/tuning.h"
#include "pytpp/kernel_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How many index positions ahead table rows of rowb bytes are prefetched: about `bytes` of rows
 * in flight (the table's prefetch_bytes), at least PYTPP_BAG_PREFETCH_ROWS, at most 4x. */
static inline int64_t pytpp_bag_prefetch_rows(int64_t rowb, int64_t bytes)
{
    const int64_t r = bytes / (rowb > 0 ? rowb : 1);
    return r < PYTPP_BAG_PREFETCH_ROWS ? PYTPP_BAG_PREFETCH_ROWS
         : r > 4 * PYTPP_BAG_PREFETCH_ROWS ? 4 * PYTPP_BAG_PREFETCH_ROWS : r;
}

/* Asks for every cache line of the `bytes` bytes from p to come into L2 (prefetcht1, for
 * reading). Into L2 rather than L1: random table rows are latency-bound, and L1's few miss
 * buffers capped the rows in flight (bags of 1M x 64 float32 rows, one Zen 3 core: 16 rows
 * ahead into L2 gathered 1.4x faster than 8 ahead into L1; 16 into L1 did not help). */
static inline void pytpp_prefetch_bytes(const void *p, int64_t bytes)
{
    const char *c = (const char *)p;
    for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(c + o, 0, 2);
    __builtin_prefetch(c + bytes - 1, 0, 2);
}

enum pytpp_bag_mode { PYTPP_BAG_SUM = 0, PYTPP_BAG_MEAN = 1, PYTPP_BAG_MAX = 2 };

/* The index positions and bags of one call: bag b holds [offsets[b], offsets[b + 1]) (the
 * last bag up to nidx); indices int64 when idx64, else int32, all in range (checked by the
 * caller); psw: per-position weights of the compute dtype (sum only), or NULL. */
typedef struct pytpp_bag_index {
    const void *idx;
    int idx64;
    int64_t nidx;
    const int64_t *offsets;
    int64_t nbags;
    int mode;
    const void *psw;
} pytpp_bag_index;

/* Bags [b0, b1) of `ix` from the table w (row stride ldw elements of its storage dtype: the
 * compute dtype, or bfloat16 when w_bf16), dim columns, into y (row of bag b0 first, stride
 * ldy elements of the compute dtype, or of bfloat16 when y_bf16: rounded once). am (max only,
 * may be NULL): the position within the bag of each column's maximum (-1 for an empty bag),
 * compute dtype, stride dim. */
typedef void (*pytpp_bag_fwd_fn)(const pytpp_bag_index *ix, int64_t b0, int64_t b1, int64_t dim,
                                 const void *w, int w_bf16, int64_t ldw, void *y, int y_bf16,
                                 int64_t ldy, void *am);
/* Output rows s = 0 .. nslots - 1 (stride ldo elements of the compute dtype, or of bfloat16
 * when out_bf16), each the sum of the contributions of the index positions
 * pos[begin_s .. ends[s]) (begin_0 = first, then ends[s - 1]); rows without any are zeros.
 * pbag[p]: the bag of position pos[p]; g: grad_out, nbags x dim, compute dtype; am: max only,
 * as the forward's. stream: compute-dtype rows and zero rows by streaming stores (the caller
 * checked that every row is whole, aligned cache lines). */
typedef void (*pytpp_bag_bwd_fn)(const pytpp_bag_index *ix, int64_t nslots, int64_t dim,
                                 int64_t first, const int64_t *ends, const int64_t *pos,
                                 const int64_t *pbag, const void *g, const void *am,
                                 void *out, int out_bf16, int64_t ldo, int stream);

typedef struct pytpp_embedding_kernels {
    const char *name;          /* ISA level */
    pytpp_table_info info;
    int esz;                   /* compute element size: 4 (f32) or 8 (f64) */
    int prefetch_bytes;        /* table rows in flight while gathering (tuning.h) */
    pytpp_bag_fwd_fn bag_fwd;
    pytpp_bag_bwd_fn bag_bwd;
} pytpp_embedding_kernels;

/* Drivers (frame/embedding.c), over up to nthreads threads. w_bf16, y_bf16, out_bf16: that
 * operand is stored as bfloat16 (float32 tables only), else in the compute dtype. Return 0, or
 * -1 when scratch memory cannot be allocated. */
/* y: nbags x dim, contiguous. */
int pytpp_embedding_bag_forward(const pytpp_embedding_kernels *kt, const pytpp_bag_index *ix,
                                int64_t dim, const void *w, int w_bf16, int64_t ldw, void *y,
                                int y_bf16, int nthreads);
/* The dense gradient, nrows x dim, contiguous (every row written). w, w_bf16, ldw: the table,
 * read by mode max only. g: grad_out, nbags x dim, contiguous, compute dtype. */
int pytpp_embedding_bag_backward(const pytpp_embedding_kernels *kt, const pytpp_bag_index *ix,
                                 int64_t dim, const void *g, const void *w, int w_bf16,
                                 int64_t ldw, void *out, int out_bf16, int64_t nrows,
                                 int nthreads);
/* The row-sparse gradient: nslots rows (compute dtype, nslots x dim, contiguous), row s from
 * the positions pos[ends[s - 1] .. ends[s]) (from 0 for s = 0) of the bags pbag[..]: the
 * positions grouped by table row by the caller. */
int pytpp_embedding_bag_backward_rows(const pytpp_embedding_kernels *kt,
                                      const pytpp_bag_index *ix, int64_t dim, const void *g,
                                      const void *w, int w_bf16, int64_t ldw, int64_t nslots,
                                      const int64_t *ends, const int64_t *pos,
                                      const int64_t *pbag, void *out, int nthreads);
/* out[i] = w[idx[i]] for n rows of row_bytes bytes (w rows ldw_bytes apart; out contiguous),
 * about prefetch_bytes of rows in flight (a table's prefetch_bytes). */
void pytpp_embedding_gather(const void *w, int64_t row_bytes, int64_t ldw_bytes, const void *idx,
                            int idx64, int64_t n, void *out, int64_t prefetch_bytes, int nthreads);

extern const pytpp_embedding_kernels pytpp_embedding_f64_ref, pytpp_embedding_f32_ref;
extern const pytpp_embedding_kernels pytpp_embedding_f64_avx2, pytpp_embedding_f32_avx2;
extern const pytpp_embedding_kernels pytpp_embedding_f64_avx512, pytpp_embedding_f32_avx512;

#ifdef __cplusplus
}
#endif
#endif
