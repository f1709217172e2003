/* Block-sparse x dense driver (sparse.h): both products are one loop over output groups (block
 * rows of A @ B, block columns of X @ W). A group's output panel is cut into register tiles and
 * each tile is ONE call of a BRGEMM micro-kernel whose batch is the group's non-empty blocks (one
 * A and one B address per block): the tile's accumulators stay in registers over the whole
 * block row and C is written once. The kernels: the level's float BRGEMM table (gemm_ukr.inc),
 * or for bf16 pairs the direct kernels of the bf16 table (gemm_bf16.inc). No ISA code here. */
#include <stdlib.h>
#include <string.h>
#include "pytpp/sparse.h"
#include "pytpp/brd_tiles.h"
#include "pytpp/fpmode.h"
#include "pytpp/partition.h"
#include "pytpp/tuning.h"
#ifdef _OPENMP
#include <omp.h>
#endif

/* Parts of near-equal work per thread (see run_walk). */
#define PARTS_PER_THREAD 8

/* How a group's output panel (rows x cols) is tiled, and how its blocks map to ukr operands. */
typedef struct walk {
    const pytpp_gemm_kernels *kt;   /* float kernels (PLAIN, WIDENED) */
    const pytpp_brd_table *brd;     /* bf16 direct kernels (PAIRS), else NULL */
    int vl, nv_main;                /* the kernels' lanes per vector and main block width */
    int mr_max[PYTPP_NV_MAX + 1];   /* largest register block height for nv = 1..NV_MAX */
    int ftz;                        /* run under DAZ+FTZ */
    const pytpp_bsparse *s;
    size_t esz;               /* bytes of a C element (and of the float kernels' operands) */
    int64_t sesz, desz;       /* bytes per unit of the sparse data's / the dense operand's steps */
    int64_t a_esz, b_esz;     /* PAIRS: bytes per unit of the A strides / of B's row stride and
                               * offsets (a column of B is one word) */
    int64_t rows, cols;       /* the group's output panel */
    int64_t k;                /* kernel steps of one block (PAIRS: words of two k values) */
    int64_t rsa, csa, ldb;    /* ukr A strides, B row stride */
    int64_t nvec;             /* vectors per panel row, the last maybe partial */
    int64_t n_rt, n_ct;       /* register tiles down and across the panel */
    int cols_outer;           /* tile order: column tiles outer (B panel reused down the rows) */
    /* the operands: row walk A = blocks, B = dense; column walk A = dense, B = blocks */
    int sparse_is_a;
    const char *dense;        /* B (row walk) or X (column walk) */
    int64_t dense_step;       /* elements between consecutive inner blocks of the dense operand */
    char *c;
    int64_t ldc;
    int64_t group_c_step;     /* elements of C between consecutive groups */
    int64_t tile_a_row;       /* A offset of one panel row */
    int64_t chunk;            /* blocks per pass over a cache panel */
    int64_t tiles_per_panel;  /* tiles of a cache panel */
    int prefetch;             /* use the prefetching micro-kernels */
    /* B packed in column panels (row walk): panel ct holds B[:, ct*pw : ct*pw + pw] as a
     * K x pw row-major block at b_panel_stride * ct; 0: B read in place */
    int64_t b_panel_stride;
    int64_t pw_vec;           /* vectors per packed panel (= per column tile) */
} walk;

/* Register block for a rows x cols panel with reduction k per block. Candidates: the table's
 * main block width (nv_main, the shape the dense kernels are tuned for), a wider one only when
 * it needs no more row tiles, a narrower one when the panel is narrower than the main block, or
 * when it holds all the rows in one tile where the main block's tiles would hold fewer than 5
 * (8-row blocks on AVX-512: 8 x 3 vectors, not 4 x 4 twice; BERT-base FFN pruned to 20% in 8 x 8
 * blocks, 384 tokens, one Zen 5 core: 768 -> 3072 1969 -> 1881 us, 3072 -> 768 2233 -> 2068;
 * 16-row blocks keep 6 x 4: 8 x 3 was 12% slower). Among them, the fewest estimated cycles per
 * block: FMA-bound at 2 per cycle or load-bound at 3 per cycle, plus a fixed cost per tile and
 * block for the call, the pointers and the C store. (Measured, f32 AVX2, 4096^2, density 0.1,
 * N 256: for 16 x 16 blocks the 6 x 16 block in rows of 6+5+5 ran 72 effective GFLOP/s and
 * 4 x 24 in rows of 4 x 4 ran 53, though the FMA count favours 4 x 24; for 4 x 4 and 8 x 8
 * blocks, where 4 x 24 needs no more row tiles, it won: 51 to 43, 59-68 to 53-59.) */
static void choose_tiles(walk *w)
{
    w->nvec = (w->cols + w->vl - 1) / w->vl;
    const int main_nv = w->mr_max[w->nv_main] > 0 ? w->nv_main : 1;
    const int64_t main_rt = (w->rows + w->mr_max[main_nv] - 1) / w->mr_max[main_nv];
    const int64_t main_mrt = (w->rows + main_rt - 1) / main_rt;
    double best = -1.0;
    for (int nv = 1; nv <= PYTPP_NV_MAX; ++nv) {
        const int mr = w->mr_max[nv];
        if (mr <= 0) continue;
        const int64_t n_ct = (w->nvec + nv - 1) / nv, n_rt = (w->rows + mr - 1) / mr;
        if (nv > main_nv && n_rt > main_rt) continue;
        if (nv < main_nv && w->nvec >= main_nv && !(main_mrt < 5 && n_rt == 1)) continue;
        const int64_t nvt = (w->nvec + n_ct - 1) / n_ct, mrt = (w->rows + n_rt - 1) / n_rt;
        const double fma = 0.5 * (double)(mrt * nvt), ld = (double)(mrt + nvt) / 3.0;
        const double cost = (double)(n_rt * n_ct) *
                            ((double)w->k * (fma > ld ? fma : ld) + 6.0 +
                             0.5 * (double)(mrt * nvt));
        if (best < 0 || cost < best) {
            best = cost;
            w->n_ct = n_ct;
            w->n_rt = n_rt;
        }
    }
}

/* Cache panels and prefetch. Measured on Zen 3 (f32, 4096^2, blocks 4-16, density 0.1, N 32 and
 * 256, CPU time of one thread): reducing a whole block row per tile (one chunk, one panel) was
 * as fast as or faster than chunks of 1-16 blocks over panels of 12 tiles; the prefetching
 * micro-kernels (the next block's B rows while this one is multiplied) gained 5-40% on the row
 * walk from 4-deep blocks (B streams from L3 there) and lost ~10% on 1 x 1 blocks and on the
 * column walk. The knobs stay for other machines. */
static void choose_panels(walk *w)
{
    w->chunk = INT64_MAX;
    w->tiles_per_panel = w->n_rt * w->n_ct;
    w->prefetch = 0;  /* the row walk turns it on for a B that streams (pytpp_spmm_rows) */
}

/* Output tiles [t0, t1) of group g. Tiles go in cache panels (runs of tiles_per_panel); a panel
 * is reduced over the group's blocks `chunk` blocks at a time, every tile of the panel per chunk,
 * so the chunk's operands stay in L1 while all of the panel's tiles use them (the tile's partial
 * sums go through C, in L1, between chunks). */
static void run_group(const walk *w, int64_t g, int64_t t0, int64_t t1, const void **ap,
                      const void **bp)
{
    const pytpp_bsparse *s = w->s;
    const int64_t vl = w->vl;
    const int64_t p0 = s->indptr[g], nb = s->indptr[g + 1] - p0;
    const char *blocks = (const char *)s->data;
    const int64_t bbytes = s->bstride * w->sesz, dbytes = w->dense_step * w->desz;
    const void **blk = w->sparse_is_a ? ap : bp, **den = w->sparse_is_a ? bp : ap;
    for (int64_t i = 0; i < nb; ++i) {
        blk[i] = blocks + (p0 + i) * bbytes;
        den[i] = w->dense + (int64_t)s->idx[p0 + i] * dbytes;
    }
    /* one past the batch, for the prefetching variants (read, never multiplied) */
    ap[nb] = nb ? ap[nb - 1] : (const void *)blocks;
    bp[nb] = nb ? bp[nb - 1] : (const void *)w->dense;
    char *cg = w->c + g * w->group_c_step * (int64_t)w->esz;
    for (int64_t tp = t0; tp < t1; tp += w->tiles_per_panel) {
        const int64_t te = tp + w->tiles_per_panel < t1 ? tp + w->tiles_per_panel : t1;
        int64_t c0 = 0;
        do { /* at least once: an empty group writes zeros */
            const int64_t nbc = nb - c0 < w->chunk ? nb - c0 : w->chunk;
            const double beta = c0 == 0 ? 0.0 : 1.0;
            for (int64_t t = tp; t < te; ++t) {
                const int64_t ct = w->cols_outer ? t / w->n_rt : t % w->n_ct;
                const int64_t rt = w->cols_outer ? t % w->n_rt : t / w->n_ct;
                int64_t r0, mr, v0, nv;
                pytpp_split(w->rows, w->n_rt, rt, &r0, &mr);
                if (w->b_panel_stride) { /* packed: fixed-width panels, the last narrower */
                    v0 = ct * w->pw_vec;
                    nv = w->nvec - v0 < w->pw_vec ? w->nvec - v0 : w->pw_vec;
                } else {
                    pytpp_split(w->nvec, w->n_ct, ct, &v0, &nv);
                }
                const int64_t j0 = v0 * vl;
                const int64_t end = (v0 + nv) * vl < w->cols ? (v0 + nv) * vl : w->cols;
                const int64_t n_last = end - (v0 + nv - 1) * vl;
                const int masked = n_last != vl;
                /* row walk: A offset = tile rows inside the blocks, B offset = tile columns of
                 * B; column walk: A offset = tile rows of X, B offset = columns in the blocks */
                const int64_t b_off = w->b_panel_stride ? ct * w->b_panel_stride : j0;
                char *ct0 = cg + (r0 * w->ldc + j0) * (int64_t)w->esz;
                if (w->brd) {
                    (*w->brd)[nv - 1][mr - 1][masked](
                        w->k, nbc, (const char *const *)(ap + c0), r0 * w->tile_a_row * w->a_esz,
                        w->rsa * w->a_esz, (const char *const *)(bp + c0), b_off * w->b_esz,
                        w->ldb * w->b_esz, ct0, w->ldc, beta != 0.0, n_last, NULL);
                    continue;
                }
                const pytpp_gemm_kernels *kt = w->kt;
                const pytpp_ukr_fn ukr = w->prefetch ? kt->ukr_pf[nv - 1][mr - 1][masked]
                                                     : kt->ukr[nv - 1][mr - 1][masked];
                ukr(w->k, nbc, (const void *const *)(ap + c0), r0 * w->tile_a_row, w->rsa,
                    w->csa, (const void *const *)(bp + c0), b_off, w->ldb, ct0, w->ldc, 1.0,
                    beta, n_last);
            }
            c0 += nbc;
        } while (c0 < nb);
    }
}

/* Work of one group in the units the balance uses: every block is k steps of every tile, and
 * each tile costs about two steps more to start and store. */
static inline double group_weight(const walk *w, int64_t g)
{
    const int64_t nb = w->s->indptr[g + 1] - w->s->indptr[g];
    return (double)(w->n_rt * w->n_ct) * (double)(nb * w->k + 2);
}

/* Splits groups x panels into `team` runs of near-equal weight; bounds[t]..bounds[t+1] are the
 * units of thread t (unit u = group u / npanel, panel u % npanel). A unit goes to the thread in
 * whose share of the total its midpoint falls, so the runs are contiguous. */
static void balance(const walk *w, int64_t npanel, int64_t team, double total, int64_t *bounds)
{
    const int64_t nunits = w->s->ngroups * npanel;
    int64_t t = 1;
    double acc = 0.0;
    bounds[0] = 0;
    for (int64_t u = 0; u < nunits && t < team; ++u) {
        const double wu = group_weight(w, u / npanel) / (double)npanel;
        int64_t owner = (int64_t)((acc + 0.5 * wu) * team / total);
        if (owner > team - 1) owner = team - 1;
        while (t <= owner) bounds[t++] = u;
        acc += wu;
    }
    while (t <= team) bounds[t++] = nunits;
}

static int run_walk(const walk *w, int nthreads)
{
    const pytpp_bsparse *s = w->s;
    const int64_t ng = s->ngroups, ntiles = w->n_rt * w->n_ct;
    if (ng <= 0 || w->rows <= 0 || w->cols <= 0) return 0;
    int64_t maxnb = 0;
    double total = 0.0, maxw = 0.0;
    for (int64_t g = 0; g < ng; ++g) {
        const int64_t nb = s->indptr[g + 1] - s->indptr[g];
        if (nb > maxnb) maxnb = nb;
        const double wg = group_weight(w, g);
        total += wg;
        if (wg > maxw) maxw = wg;
    }
    const double flops = 2.0 * (double)s->indptr[ng] * (double)(s->bm * s->bk) *
                         (double)(w->sparse_is_a ? w->cols : w->rows);
    if (nthreads > 1 && flops < PYTPP_BRGEMM_PAR_MIN_FLOPS) nthreads = 1;
    /* Work is cut into PARTS_PER_THREAD x threads runs of consecutive output blocks of
     * near-equal weight (stored blocks, not rows), which the threads take in turn (dynamic):
     * equal parts balance a skewed matrix, and more parts than threads absorb a core that runs
     * slower for a while (another process, a frequency drop). A group heavier than half a part
     * is cut into panels of its tiles, still disjoint outputs. */
    const int64_t nparts = nthreads > 1 ? (int64_t)nthreads * PARTS_PER_THREAD : 1;
    int64_t npanel = 1;
    if (nparts > 1 && total > 0.0) {
        npanel = (int64_t)(2.0 * (double)nparts * maxw / total) + 1;
        if (npanel > ntiles) npanel = ntiles;
    }
    int64_t *bounds = malloc(sizeof(int64_t) * (size_t)(nparts + 1));
    if (!bounds) return -1;
    balance(w, npanel, nparts, total, bounds);
    const size_t nptr = (size_t)(maxnb + 1);
    int err = 0;
    #pragma omp parallel num_threads(nthreads) if (nthreads > 1) reduction(| : err)
    {
        const void **ap = malloc(2 * nptr * sizeof(void *));
        if (!ap) err = 1;
        const unsigned fp_mode = w->ftz ? pytpp_ftz_enter() : 0;
        #pragma omp for schedule(dynamic, 1)
        for (int64_t part = 0; part < nparts; ++part) {
            if (!ap) continue;
            for (int64_t u = bounds[part]; u < bounds[part + 1]; ++u) {
                const int64_t g = u / npanel, p = u % npanel;
                run_group(w, g, ntiles * p / npanel, ntiles * (p + 1) / npanel, ap, ap + nptr);
            }
        }
        if (w->ftz) pytpp_ftz_leave(fp_mode);
        free(ap);
    }
    free(bounds);
    return err ? -1 : 0;
}

/* Row r of column panel p of the packed dense B: pw units (an element of B for PLAIN, a widened
 * float for WIDENED, a word of two bf16 for PAIRS) at dst + (p * R + r) * pw units, from B
 * (ninner * kb rows, row stride ldb in its elements). R rows per panel: ninner * kb (PLAIN),
 * ninner * kd (WIDENED: row i * kd + q of block i holds B row i * kb + (q ^ 1), pairs odd
 * first, zero past kb) or ninner * kd / 2 (PAIRS: row i * kd / 2 + q holds the words of B rows
 * i * kb + 2q and + 2q + 1, the even one in the low half, zero past kb). The last panel is
 * zero-padded. The packer walks panel by panel, so that it writes one stream and reads each
 * source line once (4096 x 256 bf16, one Zen 5 core: 10.5% -> 7.3% of the product's time; row
 * by row, the writes of a row went to every panel, panels a multiple of 4 KiB apart). */
static void pack_piece(const char *b, int mode, int64_t kb, int64_t kd, int64_t n, int64_t ldb,
                       int64_t pw, int64_t R, size_t esz, int64_t p, int64_t r, char *dst)
{
    const size_t usz = mode == PYTPP_SPMM_PLAIN ? esz : 4;
    const int64_t j0 = p * pw, len = n - j0 < pw ? n - j0 : pw;
    char *d = dst + (p * R + r) * pw * (int64_t)usz;
    const char *src = NULL, *src1 = NULL;     /* the B rows this row is made of (NULL: zero) */
    if (mode == PYTPP_SPMM_PLAIN) {
        src = b + r * ldb * (int64_t)esz;
    } else if (mode == PYTPP_SPMM_BF16_WIDENED) {
        const int64_t q = (r % kd) ^ 1;
        if (q < kb) src = b + ((r / kd) * kb + q) * ldb * 2;
    } else {
        const int64_t kh = kd / 2, q = 2 * (r % kh), row = (r / kh) * kb + q;
        src = b + row * ldb * 2;
        if (q + 1 < kb) src1 = src + ldb * 2;
    }
    if (!src) {
        memset(d, 0, (size_t)pw * usz);
        return;
    }
    if (mode == PYTPP_SPMM_PLAIN) {
        memcpy(d, src + j0 * (int64_t)esz, (size_t)len * esz);
    } else {
        const uint16_t *s0 = (const uint16_t *)src + j0;
        const uint16_t *s1 = src1 ? (const uint16_t *)src1 + j0 : NULL;
        uint32_t *d32 = (uint32_t *)d;
        if (mode == PYTPP_SPMM_BF16_WIDENED)
            for (int64_t j = 0; j < len; ++j) d32[j] = (uint32_t)s0[j] << 16;
        else if (s1)
            for (int64_t j = 0; j < len; ++j) d32[j] = (uint32_t)s0[j] | (uint32_t)s1[j] << 16;
        else
            for (int64_t j = 0; j < len; ++j) d32[j] = (uint32_t)s0[j];
    }
    if (len < pw) memset(d + len * (int64_t)usz, 0, (size_t)(pw - len) * usz);
}

int pytpp_spmm_bf16_pairs(const pytpp_pk_kernels *bf)
{
    return bf && !bf->bf16_widened && bf->brd[0][0][0] != NULL;
}

/* The walk's kernels: the float table kt, or (PAIRS) bf's direct kernels; per call of the bf16
 * modes, DAZ+FTZ where the kernels' bits need it. */
static void set_kernels(walk *w, const pytpp_gemm_kernels *kt, const pytpp_pk_kernels *bf,
                        int mode, int dtype)
{
    w->esz = dtype == PYTPP_F64 ? 8 : 4;
    if (mode == PYTPP_SPMM_BF16_PAIRS) {
        w->brd = &bf->brd;
        w->vl = bf->vl;
        w->nv_main = bf->nv_main;
        for (int nv = 1; nv <= PYTPP_NV_MAX; ++nv)
            w->mr_max[nv] = nv <= bf->nv_main && bf->brd[nv - 1][0][0] ? bf->mr_main : 0;
        w->ftz = bf->ftz;
        w->sesz = w->desz = 2;   /* bf16 blocks, a bf16 dense operand */
        w->a_esz = 2;            /* A's strides count bf16 elements */
        w->b_esz = 4;            /* B's count words: one per column */
        w->esz = 4;
    } else {
        w->kt = kt;
        w->vl = kt->vl;
        w->nv_main = kt->nv_main;
        for (int nv = 0; nv <= PYTPP_NV_MAX; ++nv) w->mr_max[nv] = kt->mr_max[nv];
        w->ftz = mode == PYTPP_SPMM_BF16_WIDENED;
        w->sesz = w->desz = (int64_t)w->esz;
    }
}

int pytpp_spmm_rows(const pytpp_gemm_kernels *kt, const pytpp_pk_kernels *bf, int mode,
                    int dtype, const pytpp_bsparse *a, const void *b, int64_t kb, int64_t ldb,
                    int64_t n, void *c, int64_t ldc, int nthreads)
{
    walk w = {0};
    set_kernels(&w, kt, bf, mode, dtype);
    const int pairs = mode == PYTPP_SPMM_BF16_PAIRS;
    w.s = a;
    w.rows = a->bm;
    w.cols = n;
    w.k = pairs ? a->bk / 2 : a->bk;
    w.rsa = a->brs;
    w.csa = a->bcs;
    w.ldb = ldb;
    w.cols_outer = 1;
    w.sparse_is_a = 1;
    w.dense = (const char *)b;
    w.dense_step = a->bk * ldb;
    w.c = (char *)c;
    w.ldc = ldc;
    w.group_c_step = a->bm * ldc;
    w.tile_a_row = a->brs;
    choose_tiles(&w);
    choose_panels(&w);
    /* B wider than one tile and larger than L1: pack it into tile-wide column panels (the
     * paper's B[Nb][K][bn]), so the bk rows a block multiplies are one contiguous run that the
     * hardware prefetcher streams, instead of bk lines a row stride apart. The copy is K x n
     * once; the walk reads B about density x (K / bk) x bm / mr times. */
    char *packed = NULL;
    const int64_t rows = a->ninner * w.k;     /* rows of the packed B (PAIRS: of words) */
    const int64_t pw_vec = (w.nvec + w.n_ct - 1) / w.n_ct, pw = pw_vec * w.vl;
    /* ... and only when the walk reads B's rows at least twice on average: at density 0.01
     * (2048^2, 16 x 16 blocks) the copy cost as much as the product. */
    /* bf16 B is always packed: its layout is made then. */
    const int64_t b_rows_read = a->indptr[a->ngroups] * a->bk;
    const int64_t kdim = a->ninner * a->bk;
    if (mode != PYTPP_SPMM_PLAIN ||
        (w.n_ct > 1 && kdim * n * (int64_t)w.esz > PYTPP_DEFAULT_L1 && b_rows_read >= 2 * kdim)) {
        const size_t usz = mode == PYTPP_SPMM_PLAIN ? w.esz : 4;
        const int64_t npanel = (w.nvec + pw_vec - 1) / pw_vec;
        /* cache-line aligned: a tile's vector loads never straddle two lines */
        const size_t bytes = (size_t)(npanel * rows * pw) * usz;
        packed = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
        if (!packed && mode != PYTPP_SPMM_PLAIN) return -1;
        if (packed) {
            const int par = nthreads > 1 && (double)bytes > 65536.0;
            #pragma omp parallel for num_threads(nthreads) if (par) schedule(static)
            for (int64_t u = 0; u < npanel * rows; ++u)
                pack_piece((const char *)b, mode, kb, a->bk, n, ldb, pw, rows, w.esz, u / rows,
                           u % rows, packed);
            w.dense = packed;
            w.ldb = pw;
            w.dense_step = w.k * pw;
            w.desz = (int64_t)usz;
            w.b_panel_stride = rows * pw;
            w.pw_vec = pw_vec;
            w.n_ct = npanel;
        }
    }
    /* prefetch the next block's B rows when B streams from L3 (more than twice L2) and a block
     * is deep enough to hide the fetch (CPU time of one thread: 4096^2 x 256 f32, 4x4-16x16
     * blocks: +5-20%; B of 0.5-1 MiB, or 1 x 1 blocks: 5-25% slower); the float kernels only */
    w.prefetch = !pairs && a->bk >= 4 && kdim * n * (int64_t)w.esz > 2 * PYTPP_DEFAULT_L2;
    const int err = run_walk(&w, nthreads);
    free(packed);
    return err;
}

int pytpp_spmm_cols(const pytpp_gemm_kernels *kt, const pytpp_pk_kernels *bf, int mode,
                    int dtype, const void *x, int64_t m, int64_t rsx, int64_t csx,
                    const pytpp_bsparse *wt, void *c, int64_t ldc, int nthreads)
{
    walk w = {0};
    set_kernels(&w, kt, bf, mode, dtype);
    const int pairs = mode == PYTPP_SPMM_BF16_PAIRS;
    w.s = wt;
    w.rows = m;
    w.cols = wt->bk;
    w.k = pairs ? wt->bm / 2 : wt->bm;
    w.rsa = rsx;
    w.csa = csx;
    w.ldb = pairs ? wt->bk : wt->brs;   /* PAIRS: a block row of words, one per column */
    w.cols_outer = 0;
    w.sparse_is_a = 0;
    w.dense = (const char *)x;
    w.dense_step = wt->bm * csx;
    w.c = (char *)c;
    w.ldc = ldc;
    w.group_c_step = wt->bk;
    w.tile_a_row = rsx;
    choose_tiles(&w);
    choose_panels(&w);
    return run_walk(&w, nthreads);
}
