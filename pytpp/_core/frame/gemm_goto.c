/* Goto/BLIS GEMM driver behind pytpp.matmul (no ISA code: every instruction-set detail sits in
 * the micro-kernel tables). Five loops around the micro-kernel, in row-major terms:
 *
 *   for ic (mc rows of A)         A block mc x kc packed once per (ic, pc), lives in L3
 *    for pc (kc of the k axis)
 *     for jc (nc columns of B)    B block kc x nc packed, lives in L2
 *      for ir (MR rows)           A micro-panel MR x kc stays in L1 over the jr loop
 *       for jr (NR columns)       B micro-panels stream from L2; C tile MR x NR in registers
 *
 * The broadcast side (A, MR values per k step) is the smaller one per k, so it is the one kept in
 * L1; kc is sized from L1, nc from L2 and mc from L3 (seed 002, ch. 4, eq. 4.1-4.4 with the
 * roles of A and B swapped for row-major C). Edge tiles are handled by the kernels (smaller MR,
 * masked last vector). Threads own disjoint rectangles of C (a tm x tn grid, chosen to pack the
 * smaller operand twice rather than the larger); each packs into its own buffers, so there is no
 * synchronisation inside the one parallel region. Small problems skip packing and threads. */
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include "pytpp/gemm_goto.h"
#include "pytpp/pack.h"
#include "pytpp/partition.h"
#include "pytpp/tuning.h"
#include "pytpp/fpmode.h"
#include "pytpp/gemm_pk_shapes.h"
#include "pytpp/lookahead.h"
#include "pytpp/brd_tiles.h"
#ifdef _OPENMP
#include <omp.h>
#endif


typedef struct eng {
    const pytpp_pk_kernels *kp;
    const pytpp_gemm_kernels *kt;   /* no-packing path (f32/f64 only) */
    const pytpp_ew_kernels *ew;     /* transposed-B packing (its transpose kernel), or NULL */
    int dtype;
    int widen;                   /* bf16 operands widened to fp32 while packing */
    const pytpp_pk_kernels *rows_bt, *rows_bn;   /* bf16 products of rows, or NULL */
    int64_t mr, nr, vl, kstep;   /* kstep: 2 for bf16 (pairs along k), else 1 */
    size_t in_esz;               /* operand element size as given (bf16: 2) */
    size_t esz, cesz;            /* packed operand and C element sizes */
    size_t pre_esz;              /* element size of a PackedMatrix (widened: bf16 storage) */
    int64_t kc, mc, nc;
    int64_t nopack_bytes;
    int dot_flags;
} eng;

static size_t dtype_size(int dtype) { return dtype == PYTPP_F64 ? 8 : dtype == PYTPP_F32 ? 4 : 2; }
static inline int64_t rup(int64_t a, int64_t b) { return cdiv(a, b) * b; }

void pytpp_mm_blocking_init(const pytpp_mm_kernels *ks, const pytpp_cache_info *ci, int dtype,
                            pytpp_mm_blocking *bk)
{
    const int64_t l1 = ci && ci->l1 > 0 ? ci->l1 : PYTPP_DEFAULT_L1;
    const int64_t l2 = ci && ci->l2 > 0 ? ci->l2 : PYTPP_DEFAULT_L2;
    const int64_t l3 = ci && ci->l3 > 0 ? ci->l3 : PYTPP_DEFAULT_L3;
    const int64_t esz = ks->kp->bf16_widened ? 4 : (int64_t)dtype_size(dtype);
    bk->vl = ks->kp->vl;
    bk->mr = ks->kp->mr_main;
    bk->nr = ks->kp->nv_main * bk->vl;
    bk->bf16_widened = ks->kp->bf16_widened;
    /* Textbook sizes (eq. 4.1-4.4: A micro-panel in half of L1, B block in half of L2) lose
     * 5-8% on Zen 4's 12-row AVX-512 kernels: every kc block is one more pass of C through
     * memory, while the micro-kernel needs only ~7 bytes per cycle from L2, which streams it
     * easily. Measured there (32 KiB L1, 1 MiB L2, 2048^3): best with the A micro-panel at
     * ~1.5x L1 and the B block at ~2x L2 (f32 kc 1024 nc 512: 93% of peak vs 84% at kc 336 nc
     * 384; f64 kc 512 nc 512). That is the default; a kernel table measured elsewhere carries
     * its own shares (Zen 3 AVX2, 6-row blocks: half of L1 and 3/4 of L2, see gemm_goto.h). */
    const int64_t a_x8 = ks->kp->kc_l1_x8 ? ks->kp->kc_l1_x8 : 12;
    const int64_t b_x8 = ks->kp->nc_l2_x8 ? ks->kp->nc_l2_x8 : 16;
    int64_t kc = (a_x8 * l1 / 8) / (bk->mr * esz);
    kc = imax(64, imin(2048, kc / 64 * 64));
    int64_t nc = (b_x8 * l2 / 8) / (kc * esz);
    if (ks->kp->nc_max_kib) nc = imin(nc, (int64_t)ks->kp->nc_max_kib * 1024 / (kc * esz));
    nc = imax(bk->nr, nc / bk->nr * bk->nr);
    /* mc: the A block (mc x kc) takes a quarter of L3 (shared by the cores; eq. 4.4). */
    int64_t mc = (l3 / 4) / (kc * esz);
    mc = imax(bk->mr, imin(mc, 8192) / bk->mr * bk->mr);
    bk->kc = kc;
    bk->nc = nc;
    bk->mc = mc;
    /* Without packing the kernels read A and B in place: fine while both stay in L2 (measured on
     * Zen 4: the no-packing path beats packing up to 256^3 f64 / 384^3 f32 on a 1 MiB L2). */
    bk->nopack_bytes = ks->kp->nopack_l2_x8 ? ks->kp->nopack_l2_x8 * l2 / 8 : l2;
    bk->dot_flags = l2 >= PYTPP_MM_DOT_BIG_L2 ? PYTPP_DOT_PREFETCH : PYTPP_DOT_SLICE4;
}

static void make_eng(eng *e, const pytpp_mm_kernels *ks, const pytpp_mm_blocking *bk, int dtype)
{
    e->kp = ks->kp;
    e->kt = dtype == PYTPP_MM_BF16 ? NULL : ks->kt;
    e->ew = ks->ew;
    e->dtype = dtype;
    e->widen = dtype == PYTPP_MM_BF16 && ks->kp->bf16_widened;
    e->rows_bt = dtype == PYTPP_MM_BF16 ? ks->rows_bt : NULL;
    e->rows_bn = dtype == PYTPP_MM_BF16 ? ks->rows_bn : NULL;
    e->mr = bk->mr;
    e->nr = bk->nr;
    e->vl = bk->vl;
    e->kstep = dtype == PYTPP_MM_BF16 ? 2 : 1;
    e->in_esz = dtype_size(dtype);
    e->esz = e->widen ? 4 : e->in_esz;
    e->pre_esz = e->in_esz;
    e->cesz = dtype == PYTPP_F64 ? 8 : 4;
    e->kc = bk->kc;
    e->mc = bk->mc;
    e->nc = bk->nc;
    e->nopack_bytes = bk->nopack_bytes;
    e->dot_flags = bk->dot_flags;
}

static void pack_a(const eng *e, const char *a, int64_t rsa, int64_t csa, int64_t mcb,
                   int64_t kcb, void *dst)
{
    pytpp_pack_a(e->dtype, e->widen, a, rsa, csa, mcb, kcb, e->mr, dst);
}

static void pack_b(const eng *e, const char *b, int64_t rsb, int64_t csb, int64_t kcb,
                   int64_t ncb, void *dst)
{
    const int pairs = e->dtype == PYTPP_MM_BF16;     /* bf16: pairs along k as 32-bit words */
    if (e->ew && e->ew->transpose && rsb == 1 && csb != 1 &&
        (!pairs || (!e->widen && csb % 2 == 0 && (uintptr_t)b % 4 == 0))) {
        /* B^T is contiguous (x @ w.T): each NR-column panel is the transpose of NR rows of w,
         * which the level's transpose kernel makes in register tiles; for bf16 the rows read as
         * 32-bit words (the panel's VNNI pair rows), an odd depth's last value set alone. The
         * portable packer moves one element at a time: f32 2.4x slower; bf16 x @ w.T, 4096 x
         * 4096 w, one Zen 5 core: 16 rows of x 9.9 -> 3.4 ms, 128 rows 18.1 -> 11.0 ms. */
        const int64_t NR = e->nr, wsz = pairs ? 4 : (int64_t)e->esz;
        const int64_t words = pairs ? kcb / 2 : kcb, rows = pairs ? rup(kcb, 2) / 2 : kcb;
        for (int64_t q = 0; q < ncb; q += NR) {
            const int64_t nrr = imin(NR, ncb - q);
            const char *s = b + q * csb * (int64_t)e->in_esz;
            char *d = (char *)dst + q * rows * wsz;
            if (words) e->ew->transpose(nrr, words, s, pairs ? csb / 2 : csb, d, NR);
            if (pairs && (kcb & 1))
                for (int64_t j = 0; j < nrr; ++j)
                    ((uint32_t *)d)[words * NR + j] = ((const uint16_t *)s)[j * csb + kcb - 1];
            for (int64_t p = 0; nrr < NR && p < rows; ++p)
                memset(d + (p * NR + nrr) * wsz, 0, (size_t)((NR - nrr) * wsz));
        }
        return;
    }
    if (e->widen && e->kp->pack_bt && rsb == 1 && csb != 1) {
        /* the same for bf16: the widened table's packer transposes pairs in register tiles */
        const int64_t NR = e->nr, kcp = rup(kcb, 2);
        for (int64_t q = 0; q < ncb; q += NR) {
            const int64_t nrr = imin(NR, ncb - q);
            float *d = (float *)dst + q * kcp;
            e->kp->pack_bt(b + q * csb * (int64_t)e->in_esz, csb, kcb, nrr, d, NR);
            for (int64_t p = 0; nrr < NR && p < kcp; ++p)
                memset(d + p * NR + nrr, 0, (size_t)(NR - nrr) * sizeof(float));
        }
        return;
    }
    pytpp_pack_b(e->dtype, e->widen, b, rsb, csb, kcb, ncb, e->nr, dst);
}

/* ---- micro-tile ---------------------------------------------------------------------------- */

/* C[0:mr, 0:ncols] (+)= packed A panel x packed B panel over kcb (kcp = padded depth). */
static inline void run_tile(const eng *e, int64_t kcb, const void *ap, const void *bp, void *c,
                            int64_t ldc, int64_t mr, int64_t ncols, int accumulate)
{
    const int64_t nv = cdiv(ncols, e->vl);
    const int64_t n_last = ncols - (nv - 1) * e->vl;
    const int masked = n_last != e->vl;
    const int64_t kd = e->kstep == 1 ? kcb : e->widen ? rup(kcb, 2) : cdiv(kcb, 2);
    e->kp->ukr[nv - 1][mr - 1][masked](kd, ap, bp, c, ldc, accumulate, n_last);
}

static inline void prefetch_c(const char *c, int64_t ldc_bytes, int64_t rows, int64_t bytes)
{
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(c + i * ldc_bytes + o, 1, 3);
}

/* ---- one thread's rectangle of C ----------------------------------------------------------- */

typedef struct job {
    const eng *e;
    const pytpp_mm_desc *d;
    const char *a, *b;          /* b: raw B, or NULL when bpre is set */
    const char *bpre;           /* pre-packed whole B (PackedMatrix layout) */
    int64_t npad;               /* pre-packed: n rounded up to NR */
    char *c;
    char *ws;                   /* caller's workspace (reused across calls) or NULL: malloc */
    size_t ws_bytes;
    const pytpp_mm_epilogue *ep;   /* or NULL */
} job;

/* The epilogue on rows [row0, row0 + rows) x columns [col0, col0 + ncols) of C at c (the
 * segment's first element, row stride ldc elements of cesz bytes). */
static void epilogue_rows(const pytpp_mm_epilogue *ep, char *c, int64_t ldc, int64_t cesz,
                          int64_t row0, int64_t rows, int64_t col0, int64_t ncols)
{
    for (int64_t i = 0; i < rows; ++i) {
        char *ci = c + i * ldc * cesz;
        if (ep->bias) ep->add(ncols, ci, (const char *)ep->bias + col0 * cesz, ci, 0);
        if (ep->act) ep->act(ncols, ci, ci);
        if (ep->res)
            ep->add(ncols, ci, (const char *)ep->res + ((row0 + i) * ep->ldr + col0) * cesz, ci, 0);
    }
}

/* Packing buffer sizes (bytes) a thread needs for an m x n rectangle. */
static void buffer_sizes(const eng *e, const pytpp_mm_desc *d, int64_t m, int64_t n, int prepacked,
                         size_t *abytes, size_t *bbytes)
{
    const int64_t kcp = rup(imin(e->kc, d->k), e->kstep);
    *abytes = (size_t)(rup(imin(e->mc, m), e->mr) * kcp) * e->esz;
    /* a widened PackedMatrix is widened block by block into the B buffer */
    *bbytes = prepacked && !e->widen ? 0 : (size_t)(rup(imin(e->nc, n), e->nr) * kcp) * e->esz;
}

/* The B block of (pc, jc): pre-packed (widened into bbuf if need be) or packed into bbuf. */
static const char *b_block(const job *jb, int64_t pc, int64_t kcb, int64_t jc, int64_t ncb,
                           char *bbuf)
{
    const eng *e = jb->e;
    const pytpp_mm_desc *d = jb->d;
    const int64_t kcp = rup(kcb, e->kstep);
    if (jb->bpre) {
        const char *pre = jb->bpre + (pc * jb->npad + jc * kcp) * (int64_t)e->pre_esz;
        if (!e->widen) return pre;
        pytpp_pack_widen((const uint16_t *)pre, cdiv(ncb, e->nr) * e->nr * kcp, (float *)bbuf);
        return bbuf;
    }
    pack_b(e, jb->b + (pc * d->rsb + jc * d->csb) * (int64_t)e->in_esz, d->rsb, d->csb, kcb, ncb,
           bbuf);
    return bbuf;
}

/* The raw rows of the B block after (pc, jc) in goto_rect's order (the next column block, or the
 * first of the next k block), fetched into L2 over this block's `tiles` micro-tiles
 * (lookahead.h): f32 48 x 4096 x 4096 24.9 -> 22.6 ms on one core, f64 50.3 -> 45.4; 128 rows
 * 3%, large squares unchanged. Not for bf16, whose half-size rows the widening packer reads
 * fast enough (measured 0.98-1.0x with it), nor a pre-packed B (contiguous). */
static pytpp_ahead b_ahead(const job *jb, int64_t pc, int64_t kc, int64_t jc, int64_t nc,
                           int64_t n0, int64_t n1, int64_t tiles)
{
    const pytpp_mm_desc *d = jb->d;
    const int64_t esz = (int64_t)jb->e->in_esz;
    pytpp_ahead a = {.n = 0};
    if (jb->bpre || jb->e->dtype == PYTPP_MM_BF16) return a;
    jc += nc;
    if (jc >= n1) jc = n0, pc += kc;
    if (pc >= d->k) return a;
    const int64_t kcb = imin(kc, d->k - pc), ncb = imin(nc, n1 - jc);
    const char *p = jb->b + (pc * d->rsb + jc * d->csb) * esz;
    if (d->csb == 1) pytpp_ahead_add(&a, p, kcb, ncb * esz, d->rsb * esz);
    else if (d->rsb == 1) pytpp_ahead_add(&a, p, ncb, kcb * esz, d->csb * esz);
    pytpp_ahead_plan(&a, tiles);
    return a;
}

static void goto_rect(const job *jb, int64_t m0, int64_t m1, int64_t n0, int64_t n1, char *abuf,
                      char *bbuf)
{
    const eng *e = jb->e;
    const pytpp_mm_desc *d = jb->d;
    const int64_t k = d->k, ldc = d->ldc;
    const int64_t esz = (int64_t)e->esz, in_esz = (int64_t)e->in_esz, cesz = (int64_t)e->cesz;
    const int64_t MR = e->mr, NR = e->nr;
    /* balanced block sizes: the last block is not a sliver */
    const int64_t kc = jb->bpre ? e->kc : rup(cdiv(k, cdiv(k, e->kc)), e->kstep);
    const int64_t mc = rup(cdiv(m1 - m0, cdiv(m1 - m0, e->mc)), MR);
    /* a bf16 B^T (x @ w.T) transposed block by block: blocks of 128 columns (256 KiB at kc
     * 2048) stay in L2 between their pack and their tiles (4096^2 w, one Zen 5 core: 16 rows
     * 3.46 -> 3.17 ms, 64 rows 6.34 -> 6.04, 512 rows 36.5 -> 35.5; torch 3.16 / 5.62 / 35.6) */
    const int64_t enc = e->dtype == PYTPP_MM_BF16 && !e->widen && !jb->bpre && d->rsb == 1 &&
                        d->csb != 1 ? imin(e->nc, 128) : e->nc;
    const int64_t nc = rup(cdiv(n1 - n0, cdiv(n1 - n0, enc)), NR);
    for (int64_t ic = m0; ic < m1; ic += mc) {
        const int64_t mcb = imin(mc, m1 - ic);
        for (int64_t pc = 0; pc < k; pc += kc) {
            const int64_t kcb = imin(kc, k - pc);
            const int64_t kcp = rup(kcb, e->kstep);
            const char *a_blk = jb->a + (ic * d->rsa + pc * d->csa) * in_esz;
            pack_a(e, a_blk, d->rsa, d->csa, mcb, kcb, abuf);
            for (int64_t jc = n0; jc < n1; jc += nc) {
                const int64_t ncb = imin(nc, n1 - jc);
                const char *bblk = b_block(jb, pc, kcb, jc, ncb, bbuf);
                pytpp_ahead next_b = b_ahead(jb, pc, kc, jc, nc, n0, n1,
                                             cdiv(mcb, MR) * cdiv(ncb, NR));
                for (int64_t ir = 0; ir < mcb; ir += MR) {
                    const int64_t mrr = imin(MR, mcb - ir);
                    const char *ap = abuf + ir * kcp * esz;
                    char *crow = jb->c + ((ic + ir) * ldc + jc) * cesz;
                    for (int64_t jr = 0; jr < ncb; jr += NR) {
                        const int64_t ncols = imin(NR, ncb - jr);
                        char *cp = crow + jr * cesz;
                        /* the kernel reads C only at its end (or start: C-first kernels): fetch
                         * the next tile's rows while this one computes */
                        if (jr + NR < ncb)
                            prefetch_c(cp + NR * cesz, ldc * cesz, mrr, imin(NR, ncb - jr - NR) * cesz);
                        run_tile(e, kcb, ap, bblk + jr * kcp * esz, cp, ldc, mrr, ncols, pc > 0);
                        pytpp_ahead_step(&next_b);
                    }
                    /* these rows of the block are final: the epilogue while they are hot */
                    if (jb->ep && pc + kcb >= k)
                        epilogue_rows(jb->ep, crow, ldc, cesz, ic + ir, mrr, jc, ncb);
                }
            }
        }
    }
}

/* ---- small problems: no packing --------------------------------------------------------- */

/* The no-packing path pays off while A and B stay in L2 (or the problem is tiny). */
static int use_nopack(const eng *e, const pytpp_mm_desc *d)
{
    if (!e->kt || d->csb != 1) return 0;
    const double bytes = ((double)d->m * (double)d->k + (double)d->k * (double)d->n) * (double)e->in_esz;
    const double flops = 2.0 * (double)d->m * (double)d->n * (double)d->k;
    return bytes <= (double)e->nopack_bytes || flops <= 2.0 * 64 * 64 * 64;
}

/* One product without packing is a BRGEMM of one block: the engine's BRGEMM driver runs it
 * (balanced register blocks, threads over C tiles), with this path's own parallel threshold. */
static int run_nopack(const eng *e, const pytpp_mm_desc *d, const char *a, const char *b,
                      char *c, int nthreads)
{
    const pytpp_gemm_desc g = {.m = d->m, .n = d->n, .k = d->k, .rsa = d->rsa, .csa = d->csa,
                               .ldb = d->rsb, .csb = d->csb, .ldc = d->ldc, .dtype = d->dtype,
                               .alpha = 1.0, .beta = 0.0};
    const pytpp_batch bt = {.mode = PYTPP_BATCH_STRIDE, .count = 1};
    const double flops = 2.0 * (double)d->m * (double)d->n * (double)d->k;
    return pytpp_brgemm(e->kt, NULL, &g, a, b, c, &bt, flops < PYTPP_MATMUL_PAR_MIN_FLOPS ? 1 : nthreads);
}

/* A few rows of A against a transposed B (x @ w.T, w in torch's layout): products of rows
 * (kt->dot_nt), B read once in memory order and nothing packed. Packing would copy all of B
 * first, then use each copied element only m times. */
static int use_dot(const eng *e, const pytpp_mm_desc *d)
{
    return e->kt && e->kt->dot_nt && d->rsb == 1 && d->csa == 1 && d->m <= PYTPP_MM_DOT_MAX_M &&
           d->k >= PYTPP_MM_DOT_MIN_K;
}

/* A few rows of A against a large B with unit column stride (x @ W beyond the no-packing
 * path's size): B read once per slice of its rows, in memory order (kt->dot_nn). */
static int use_dot_nn(const eng *e, const pytpp_mm_desc *d)
{
    return e->kt && e->kt->dot_nn && d->csb == 1 && d->m <= PYTPP_MM_DOT_NN_MAX_M &&
           !use_nopack(e, d);
}

/* Threads for the products of rows: one below the GEMM's parallel threshold, at most one per
 * unit of columns. */
static int dot_threads(const pytpp_mm_desc *d, int64_t units, int nthreads)
{
    const double flops = 2.0 * (double)d->m * (double)d->n * (double)d->k;
    int nt = flops < PYTPP_MATMUL_PAR_MIN_FLOPS ? 1 : nthreads;
    if (nt > units) nt = (int)units;
    return nt < 1 ? 1 : nt;
}

/* The calling thread's columns [j0, j1) of n, split in units of `unit`. */
static void dot_thread_cols(int64_t units, int64_t unit, int64_t n, int64_t *j0, int64_t *j1)
{
    int64_t u0, ulen;
    pytpp_thread_part(units, &u0, &ulen);
    *j0 = u0 * unit;
    *j1 = imin(n, (u0 + ulen) * unit);
}

/* Whether rows of C start within 512 bytes of a 4 KiB boundary offset of B's rows. The slice
 * of B fills the L1 sets its rows map to (rows a multiple of 4 KiB apart map to the same ones),
 * so such a C evicts it at every step: two large numpy arrays usually start at the same offset
 * in their pages, and 8 rows against 4096 x 4096 then took 9.4 ms instead of 4.6. */
static int c_aliases_b(const char *b, const char *c)
{
    const uintptr_t dist = ((uintptr_t)c - (uintptr_t)b) & 4095u;
    return dist < 512 || dist > 4096 - 512;
}

/* Threads split C's columns; each sweeps every slice of k over its own. */
static int run_dot_nn(const eng *e, const pytpp_mm_desc *d, const char *a, const char *b,
                      char *c, int nthreads, const pytpp_mm_epilogue *ep)
{
    const int64_t esz = (int64_t)e->in_esz, cesz = (int64_t)e->cesz, unit = 64;
    const int stream = d->k * d->n * esz >= PYTPP_MM_DOT_NN_PREFETCH_BYTES;
    const int slice4 = d->m <= PYTPP_MM_DOT_NN_SLICE4_MAX_M ? e->dot_flags & PYTPP_DOT_SLICE4 : 0;
    const int64_t units = cdiv(d->n, unit);
    const int nt = dot_threads(d, units, nthreads);
    int err = 0;
#pragma omp parallel num_threads(nt) if (nt > 1) reduction(| : err)
    {
        int64_t j0, j1;
        dot_thread_cols(units, unit, d->n, &j0, &j1);
        char *cj = c + j0 * cesz, *raw = NULL, *sums = cj;
        const char *bj = b + j0 * esz;
        int64_t lds = d->ldc;
        if (j1 > j0 && c_aliases_b(bj, cj)) {
            /* the sums in a buffer half a page away from B's rows, copied to C at the end */
            lds = j1 - j0;
            raw = malloc((size_t)(d->m * lds * cesz + 8192));
            if (!raw) err = 1;
            else sums = raw + (((uintptr_t)bj + 2048 - (uintptr_t)raw) & 4095u);
        }
        if (j1 > j0 && !err) {
            e->kt->dot_nn(d->m, j1 - j0, d->k, a, d->rsa, d->csa, bj, d->rsb, sums, lds,
                          (stream ? PYTPP_DOT_PREFETCH : 0) | slice4);
            for (int64_t i = 0; raw && i < d->m; ++i)
                memcpy(cj + i * d->ldc * cesz, sums + i * lds * cesz, (size_t)((j1 - j0) * cesz));
            if (ep) epilogue_rows(ep, cj, d->ldc, cesz, 0, d->m, j0, j1 - j0);
        }
        free(raw);
    }
    return err ? -1 : 0;
}

/* Threads split the rows of B (columns of C) in chunks whose k slice stays in L2 while the
 * groups of A's rows after the first go over it; k slices past the chunk size accumulate. Each
 * thread's columns get the epilogue once they hold their final sums. */
static void run_dot(const eng *e, const pytpp_mm_desc *d, const char *a, const char *b, char *c,
                    int nthreads, const pytpp_mm_epilogue *ep)
{
    const int64_t esz = (int64_t)e->in_esz, unit = PYTPP_MM_DOT_N_UNIT;
    const int64_t kc = imax(64, imin(d->k, PYTPP_MM_DOT_CHUNK_BYTES / (unit * esz)) / 64 * 64);
    const int64_t nc = imax(unit, PYTPP_MM_DOT_CHUNK_BYTES / (imin(kc, d->k) * esz) / unit * unit);
    const int64_t units = cdiv(d->n, unit);
    const int nt = dot_threads(d, units, nthreads);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int64_t j0, j1;
        dot_thread_cols(units, unit, d->n, &j0, &j1);
        for (int64_t jc = j0; jc < j1; jc += nc) {
            const int64_t ncb = imin(nc, j1 - jc);
            for (int64_t p = 0; p < d->k; p += kc)
                e->kt->dot_nt(d->m, ncb, imin(kc, d->k - p), a + p * esz, d->rsa,
                              b + (jc * d->csb + p) * esz, d->csb, c + jc * (int64_t)e->cesz,
                              d->ldc, (p > 0 ? PYTPP_DOT_ACCUMULATE : 0) |
                                          (e->dot_flags & PYTPP_DOT_PREFETCH));
        }
        if (ep && j1 > j0)
            epilogue_rows(ep, c + j0 * (int64_t)e->cesz, d->ldc, (int64_t)e->cesz, 0, d->m, j0,
                          j1 - j0);
    }
}

/* bf16, a few rows of x against w in torch's layout (x @ w.T): products of rows (e->rows_bt:
 * the native AVX512_BF16 kernel on x as it lies, or the widened AVX2 table's on x widened
 * once), threads over w's rows in units of 64 (the kernel's block). Every output is the packed
 * GEMM's chain of products in the same order under the same DAZ+FTZ, so the same bits; w is
 * read once and nothing its size is written. */
static int use_dot_bf16(const eng *e, const pytpp_mm_desc *d)
{
    return e->rows_bt && e->rows_bt->dot_bt && d->rsb == 1 &&
           d->m <= PYTPP_MM_DOT_BF16_MAX_M && d->k >= PYTPP_MM_DOT_MIN_K;
}

/* x widened for the products of rows: fp32 rows of ldx = k rounded up to even plus 16 (not a
 * multiple of 4 KiB apart), or NULL */
static float *widen_rows(const pytpp_mm_desc *d, const char *a, int64_t *ldx)
{
    *ldx = rup(d->k, 2) + 16;
    float *xw = malloc((size_t)(d->m * *ldx) * sizeof(float));
    if (xw) pytpp_pack_rows_bf16w((const uint16_t *)a, d->rsa, d->csa, d->m, d->k, xw, *ldx);
    return xw;
}

/* The same for B with unit column stride: W as given (x @ W) in slices of 8 of its rows, each
 * swept over the thread's columns (8 sequential row streams, C in cache; 16 rows: 1.8 ms for a
 * row of x against 4096 x 4096, 8: 1.3, 4: 1.7), or a PackedMatrix block by block, its
 * 16-column panels contiguous. */
static int use_dot_bf16_bn(const eng *e, const pytpp_mm_desc *d)
{
    return e->rows_bn && e->rows_bn->dot_bn && d->csb == 1 &&
           d->m <= PYTPP_MM_DOT_BF16_MAX_M && d->k >= PYTPP_MM_DOT_MIN_K;
}

/* The same over a PackedMatrix's panels: only the widened table's own (16 columns, widened
 * order) */
static int use_dot_bf16_packed(const eng *e, const pytpp_mm_desc *d)
{
    return e->widen && e->kp->dot_bn && e->nr == 16 && d->m <= PYTPP_MM_DOT_BF16_MAX_M &&
           d->k >= PYTPP_MM_DOT_MIN_K;
}

/* How a bf16 product by rows reads B: w in torch's layout (B^T), W as given, a PackedMatrix. */
enum { BF16_ROWS_BT, BF16_ROWS_BN, BF16_ROWS_PACKED };

/* Columns [j0, j1) of the products of rows (C at cj) against b, read as `how` says. */
static void bf16_rows_cols(const eng *e, const pytpp_mm_desc *d, int how, const void *xv,
                           int64_t ldx, const char *b, int64_t j0, int64_t j1, float *cj)
{
    if (how == BF16_ROWS_BT) {
        e->rows_bt->dot_bt(d->m, j1 - j0, d->k, xv, ldx, b + j0 * d->csb * (int64_t)e->in_esz,
                           d->csb, cj, d->ldc, 0);
        return;
    }
    const float *xw = (const float *)xv;
    const int64_t npad = rup(d->n, e->nr), step = how == BF16_ROWS_PACKED ? e->kc : 8;
    for (int64_t p = 0; p < d->k; p += step) {
        const int64_t kcb = imin(step, d->k - p), kcp = rup(kcb, 2);
        const int flags = p > 0 ? PYTPP_DOT_ACCUMULATE : 0;
        if (how == BF16_ROWS_PACKED)
            e->kp->dot_bn(d->m, j1 - j0, kcb, xw + p, ldx,
                          b + (p * npad + j0 * kcp) * (int64_t)e->pre_esz, 16, 16 * kcp, 1, cj,
                          d->ldc, flags);
        else
            e->rows_bn->dot_bn(d->m, j1 - j0, kcb, xw + p, ldx,
                               b + (p * d->rsb + j0) * (int64_t)e->in_esz, d->rsb, 16, 0, cj,
                               d->ldc, flags);
    }
}

/* x rows of unit column stride as they lie (bf16, ldx = the row stride), or copied so, or NULL */
static const uint16_t *raw_rows(const pytpp_mm_desc *d, const char *a, int64_t *ldx,
                                uint16_t **copy)
{
    *copy = NULL;
    *ldx = d->rsa;
    if (d->csa == 1) return (const uint16_t *)a;
    *ldx = d->k;
    *copy = malloc((size_t)(d->m * d->k) * sizeof(uint16_t));
    if (*copy)
        for (int64_t i = 0; i < d->m; ++i)
            for (int64_t p = 0; p < d->k; ++p)
                memcpy(*copy + i * d->k + p, a + (i * d->rsa + p * d->csa) * 2, 2);
    return *copy;
}

/* x prepared once (as the kernel takes it), threads over B's columns in units of 64. */
static int run_dot_bf16(const eng *e, const pytpp_mm_desc *d, int how, const char *a,
                        const char *b, char *c, int nthreads, const pytpp_mm_epilogue *ep)
{
    int64_t ldx;
    uint16_t *raw_copy = NULL;
    float *xw = NULL;
    const void *xv;
    if (how == BF16_ROWS_BT && e->rows_bt->rows_raw)
        xv = raw_rows(d, a, &ldx, &raw_copy);
    else
        xv = xw = widen_rows(d, a, &ldx);
    if (!xv) return -1;
    const int64_t unit = 64, units = cdiv(d->n, unit);
    const int nt = dot_threads(d, units, nthreads);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int64_t j0, j1;
        dot_thread_cols(units, unit, d->n, &j0, &j1);
        if (j1 > j0) {
            const unsigned fp_mode = pytpp_ftz_enter();
            float *cj = (float *)(c + j0 * (int64_t)e->cesz);
            bf16_rows_cols(e, d, how, xv, ldx, b, j0, j1, cj);
            if (ep)
                epilogue_rows(ep, (char *)cj, d->ldc, (int64_t)e->cesz, 0, d->m, j0, j1 - j0);
            pytpp_ftz_leave(fp_mode);
        }
    }
    free(xw);
    free(raw_copy);
    return 0;
}

static void zero_c(const eng *e, const pytpp_mm_desc *d, char *c)
{
    for (int64_t i = 0; i < d->m; ++i) memset(c + i * d->ldc * (int64_t)e->cesz, 0, (size_t)d->n * e->cesz);
}

/* ---- thread partition ----------------------------------------------------------------------- */

/* tm x tn grid of threads over C in units of MR rows / NR columns: the cost of the busiest
 * thread (its flops plus the operand panels it packs) is minimised. */
static void choose_grid(const eng *e, int64_t m, int64_t n, int64_t k, int nt, int64_t *tm_out,
                        int64_t *tn_out)
{
    const int64_t pm = cdiv(m, e->mr), pn = cdiv(n, e->nr);
    double best = -1.0;
    int64_t btm = 1, btn = 1;
    for (int64_t tm = 1; tm <= nt; ++tm) {
        if (nt % tm) continue;
        const int64_t tn = nt / tm;
        if (tm > pm || tn > pn) continue;
        const double mt = (double)cdiv(pm, tm) * (double)e->mr;
        const double ntc = (double)cdiv(pn, tn) * (double)e->nr;
        const double cost = 2.0 * mt * ntc * (double)k + 8.0 * (mt + ntc) * (double)k;
        if (best < 0 || cost < best) best = cost, btm = tm, btn = tn;
    }
    if (best < 0) { /* fewer panels than threads in both directions: split the longer one */
        if (pm >= pn) btm = imin(pm, nt), btn = 1;
        else btm = 1, btn = imin(pn, nt);
    }
    *tm_out = btm;
    *tn_out = btn;
}

/* Thread grid and per-thread buffer bytes (A and B buffers, each rounded to 64) of a call. */
static void goto_plan(const eng *e, const pytpp_mm_desc *d, int prepacked, int nthreads,
                      int64_t *tm, int64_t *tn, size_t *per_thread)
{
    const double flops = 2.0 * (double)d->m * (double)d->n * (double)d->k;
    *tm = *tn = 1;
    if (nthreads > 1 && flops >= PYTPP_MATMUL_PAR_MIN_FLOPS) choose_grid(e, d->m, d->n, d->k, nthreads, tm, tn);
    const int64_t pm = cdiv(d->m, e->mr), pn = cdiv(d->n, e->nr);
    size_t abytes, bbytes;
    buffer_sizes(e, d, cdiv(pm, *tm) * e->mr, cdiv(pn, *tn) * e->nr, prepacked, &abytes, &bbytes);
    *per_thread = (size_t)rup((int64_t)abytes, 64) + (size_t)rup((int64_t)bbytes, 64) + 128;
}

static int run_goto(const eng *e, const job *jb, int nthreads)
{
    const pytpp_mm_desc *d = jb->d;
    int64_t tm, tn;
    size_t per;
    goto_plan(e, d, jb->bpre != NULL, nthreads, &tm, &tn, &per);
    const int nt = (int)(tm * tn);
    const int64_t pm = cdiv(d->m, e->mr), pn = cdiv(d->n, e->nr);
    char *ws = jb->ws && jb->ws_bytes >= per * (size_t)nt ? jb->ws : NULL;
    int err = 0;
    #pragma omp parallel num_threads(nt) if (nt > 1) reduction(| : err)
    {
        /* The grid has nt cells; OpenMP may deliver a smaller team (OMP_DYNAMIC, thread limits,
         * a nested region): each thread then takes every team-th cell, in its own buffer. */
        int64_t tid = 0, team = 1;
#ifdef _OPENMP
        tid = omp_get_thread_num();
        team = omp_get_num_threads();
#endif
        char *own = NULL;
        for (int64_t cell = tid; cell < nt && !err; cell += team) {
            int64_t r0, rl, c0, cl;
            pytpp_split(pm, tm, cell / tn, &r0, &rl);
            pytpp_split(pn, tn, cell % tn, &c0, &cl);
            const int64_t m0 = r0 * e->mr, m1 = imin(d->m, (r0 + rl) * e->mr);
            const int64_t n0 = c0 * e->nr, n1 = imin(d->n, (c0 + cl) * e->nr);
            if (m1 <= m0 || n1 <= n0) continue;
            size_t abytes, bbytes;
            buffer_sizes(e, d, m1 - m0, n1 - n0, jb->bpre != NULL, &abytes, &bbytes);
            if (!ws && !own) own = malloc(per);
            char *base = ws ? ws + (size_t)tid * per : own;
            if (!base) {
                err = 1;
                break;
            }
            char *abuf = (char *)(((uintptr_t)base + 63) & ~(uintptr_t)63);
            char *bbuf = abuf + rup((int64_t)abytes, 64);
            const unsigned fp_mode = e->kp->ftz ? pytpp_ftz_enter() : 0;
            goto_rect(jb, m0, m1, n0, n1, abuf, bbytes ? bbuf : NULL);
            if (e->kp->ftz) pytpp_ftz_leave(fp_mode);
        }
        free(own);
    }
    return err ? -1 : 0;
}

/* Small bf16 products on the direct kernels (pytpp_lowp_brd_fn): B formed into VNNI pairs and,
 * unless its rows are whole pairs with unit stride, A into rows of pairs, both in buffers on the
 * stack; no packed panels, heap or thread team (the Goto path took 1.2 us for 8 x 8 x 8, torch
 * 0.8). The chains are the packed kernels' (one per output over k in pairs): the same bits. */
#define DIRECT_BF16_BYTES (16 * 1024)    /* each of the A and B buffers at most */
static int use_direct_bf16(const eng *e, const pytpp_mm_desc *d)
{
    if (e->dtype != PYTPP_MM_BF16 || e->widen || !e->kp->brd[0][0][0] || d->k <= 0) return 0;
    const int64_t kq = (d->k + 1) / 2;
    const int a_raw = d->csa == 1 && d->k % 2 == 0;
    const double flops = 2.0 * (double)d->m * (double)d->n * (double)d->k;
    return flops <= 2.0 * 64 * 64 * 64 && kq * d->n * 4 <= DIRECT_BF16_BYTES &&
           (a_raw || kq * d->m * 4 <= DIRECT_BF16_BYTES);
}

static void run_direct_bf16(const eng *e, const pytpp_mm_desc *d, const char *a, const char *b,
                            char *c)
{
    uint32_t bv[DIRECT_BF16_BYTES / 4], av[DIRECT_BF16_BYTES / 4];
    const uint16_t *A = (const uint16_t *)a, *B = (const uint16_t *)b;
    const int64_t m = d->m, n = d->n, k = d->k, kq = (k + 1) / 2;
    for (int64_t q = 0; q < kq; ++q) {
        const uint16_t *r0 = B + 2 * q * d->rsb, *r1 = r0 + d->rsb;
        const int pair = 2 * q + 1 < k;
        for (int64_t j = 0; j < n; ++j)
            bv[q * n + j] = (uint32_t)r0[j * d->csb] |
                            (pair ? (uint32_t)r1[j * d->csb] << 16 : 0u);
    }
    const char *ap = a;
    int64_t lda = d->rsa * 2;
    if (!(d->csa == 1 && k % 2 == 0)) {     /* rows of whole pairs, zero past an odd k */
        uint16_t *ah = (uint16_t *)av;
        for (int64_t i = 0; i < m; ++i) {
            for (int64_t p = 0; p < k; ++p) ah[i * 2 * kq + p] = A[i * d->rsa + p * d->csa];
            if (k % 2) ah[i * 2 * kq + k] = 0;
        }
        ap = (const char *)av;
        lda = kq * 4;
    }
    const char *bp = (const char *)bv;
    const int64_t MR = e->kp->mr_main;
    const unsigned fp_mode = e->kp->ftz ? pytpp_ftz_enter() : 0;
    for (int64_t j0 = 0; j0 < n; j0 += e->nr)
        pytpp_brd_panel(&e->kp->brd, MR, e->nr, e->vl, m, n, j0, 0, pytpp_brd_blocks(m, MR), kq,
                        1, &ap, lda, &bp, 4, n * 4, c, d->ldc, 0, NULL);
    if (e->kp->ftz) pytpp_ftz_leave(fp_mode);
}

static int matmul_one(const eng *e, const pytpp_mm_desc *d, const char *a, const char *b,
                      char *c, int nthreads, void *ws, size_t ws_bytes,
                      const pytpp_mm_epilogue *ep)
{
    if (d->m <= 0 || d->n <= 0) return 0;
    int err = 0;
    if (d->k > 0 && use_dot(e, d)) {
        run_dot(e, d, a, b, c, nthreads, ep);
        return 0;
    }
    if (d->k > 0 && use_dot_nn(e, d)) return run_dot_nn(e, d, a, b, c, nthreads, ep);
    if (d->k > 0 && use_dot_bf16(e, d))
        return run_dot_bf16(e, d, BF16_ROWS_BT, a, b, c, nthreads, ep);
    if (d->k > 0 && use_dot_bf16_bn(e, d))
        return run_dot_bf16(e, d, BF16_ROWS_BN, a, b, c, nthreads, ep);
    if (use_direct_bf16(e, d)) {
        run_direct_bf16(e, d, a, b, c);
        if (ep) epilogue_rows(ep, c, d->ldc, (int64_t)e->cesz, 0, d->m, 0, d->n);
        return 0;
    }
    /* a matrix times one column (W @ v): the transposed product v^T W^T by rows of W */
    const pytpp_mm_desc t = {.m = 1, .n = d->m, .k = d->k, .rsa = d->csb, .csa = d->rsb,
                             .rsb = d->csa, .csb = d->rsa, .ldc = 1, .dtype = d->dtype};
    if (d->k > 0 && d->n == 1 && d->ldc == 1 && !ep && (use_dot(e, &t) || use_dot_nn(e, &t))) {
        if (use_dot(e, &t)) run_dot(e, &t, b, a, c, nthreads, NULL);
        else return run_dot_nn(e, &t, b, a, c, nthreads, NULL);
        return 0;
    }
    if (d->k <= 0 || use_nopack(e, d)) {
        /* small: the whole C is in the caches when the epilogue runs over it */
        if (d->k <= 0) zero_c(e, d, c);
        else err = run_nopack(e, d, a, b, c, nthreads);
        if (ep && !err) epilogue_rows(ep, c, d->ldc, (int64_t)e->cesz, 0, d->m, 0, d->n);
        return err;
    }
    job jb = {.e = e, .d = d, .a = a, .b = b, .bpre = NULL, .npad = 0, .c = c, .ws = ws,
              .ws_bytes = ws_bytes, .ep = ep};
    return run_goto(e, &jb, nthreads);
}

static int valid_kernels(const pytpp_mm_kernels *ks, int dtype)
{
    (void)dtype;
    return ks->kp != NULL;
}

size_t pytpp_matmul_workspace(const pytpp_mm_kernels *ks, const pytpp_mm_blocking *bk,
                              const pytpp_mm_desc *d, int prepacked, int nthreads)
{
    eng e;
    make_eng(&e, ks, bk, d->dtype);
    if (d->m <= 0 || d->n <= 0 || d->k <= 0 ||
        (!prepacked && (use_nopack(&e, d) || use_dot(&e, d) || use_dot_nn(&e, d) ||
                         use_dot_bf16(&e, d) || use_dot_bf16_bn(&e, d) ||
                         use_direct_bf16(&e, d))))
        return 0;
    int64_t tm, tn;
    size_t per;
    goto_plan(&e, d, prepacked, nthreads, &tm, &tn, &per);
    return per * (size_t)(tm * tn);
}

int pytpp_matmul(const pytpp_mm_kernels *ks, const pytpp_cache_info *ci, const pytpp_mm_desc *d,
                 const void *a, const void *b, void *c, int nthreads)
{
    if (!valid_kernels(ks, d->dtype)) return -2;
    pytpp_mm_blocking bk;
    pytpp_mm_blocking_init(ks, ci, d->dtype, &bk);
    return pytpp_matmul_blocked(ks, &bk, d, a, b, c, nthreads, NULL, 0);
}

int pytpp_matmul_blocked(const pytpp_mm_kernels *ks, const pytpp_mm_blocking *bk,
                         const pytpp_mm_desc *d, const void *a, const void *b, void *c,
                         int nthreads, void *ws, size_t ws_bytes)
{
    if (!valid_kernels(ks, d->dtype)) return -2;
    eng e;
    make_eng(&e, ks, bk, d->dtype);
    return matmul_one(&e, d, a, b, c, nthreads, ws, ws_bytes, NULL);
}

int pytpp_matmul_fused(const pytpp_mm_kernels *ks, const pytpp_mm_blocking *bk,
                       const pytpp_mm_desc *d, const void *a, const void *b, void *c,
                       int nthreads, void *ws, size_t ws_bytes, const pytpp_mm_epilogue *ep)
{
    if (!valid_kernels(ks, d->dtype)) return -2;
    eng e;
    make_eng(&e, ks, bk, d->dtype);
    return matmul_one(&e, d, a, b, c, nthreads, ws, ws_bytes, ep);
}

int pytpp_matmul_batch(const pytpp_mm_kernels *ks, const pytpp_cache_info *ci,
                       const pytpp_mm_desc *d, const void *a, const void *b, void *c,
                       int64_t count, const int64_t *off_a, const int64_t *off_b,
                       const int64_t *off_c, int nthreads)
{
    if (!valid_kernels(ks, d->dtype)) return -2;
    if (count <= 0 || d->m <= 0 || d->n <= 0) return 0;
    pytpp_mm_blocking bk;
    pytpp_mm_blocking_init(ks, ci, d->dtype, &bk);
    eng e;
    make_eng(&e, ks, &bk, d->dtype);
    const int64_t ea = (int64_t)e.in_esz, ec = (int64_t)e.cesz;
    const double flops = 2.0 * (double)d->m * (double)d->n * (double)d->k;
    /* each product big enough for all threads: one after another */
    if (nthreads <= 1 || flops >= 4.0 * PYTPP_MATMUL_PAR_MIN_FLOPS || count == 1) {
        int err = 0;
        for (int64_t l = 0; l < count && !err; ++l)
            err = matmul_one(&e, d, (const char *)a + off_a[l] * ea, (const char *)b + off_b[l] * ea,
                             (char *)c + off_c[l] * ec, nthreads, NULL, 0, NULL);
        return err;
    }
    /* small products: parallel over the stack, each on one thread */
    const int nt = flops * (double)count >= PYTPP_MATMUL_PAR_MIN_FLOPS ? nthreads : 1;
    int err = 0;
    #pragma omp parallel for num_threads(nt) schedule(static) reduction(| : err) if (nt > 1)
    for (int64_t l = 0; l < count; ++l)
        err |= matmul_one(&e, d, (const char *)a + off_a[l] * ea, (const char *)b + off_b[l] * ea,
                          (char *)c + off_c[l] * ec, 1, NULL, 0, NULL);
    return err ? -1 : 0;
}

/* ---- pre-packed B ------------------------------------------------------------------------- */

int64_t pytpp_mm_packed_size(const pytpp_mm_blocking *bk, int dtype, int64_t k, int64_t n)
{
    const int64_t kstep = dtype == PYTPP_MM_BF16 ? 2 : 1;
    return rup(imax(k, 1), kstep) * rup(imax(n, 1), bk->nr);
}

void pytpp_mm_pack_b_full(const pytpp_mm_blocking *bk, const struct pytpp_ew_kernels *ew,
                          int dtype, int64_t k, int64_t n, const void *b, int64_t rsb,
                          int64_t csb, void *packed, int nthreads)
{
    eng e;
    memset(&e, 0, sizeof e);
    e.ew = ew;
    e.dtype = dtype;
    e.mr = bk->mr;
    e.nr = bk->nr;
    e.esz = e.in_esz = dtype_size(dtype);
    const int64_t npad = rup(imax(n, 1), bk->nr), esz = (int64_t)e.esz;
    const int64_t nblocks = cdiv(k, bk->kc);
    #pragma omp parallel for num_threads(nthreads) schedule(static) if (nthreads > 1 && k * n > (1 << 16))
    for (int64_t t = 0; t < nblocks; ++t) {
        const int64_t pc = t * bk->kc, kcb = imin(bk->kc, k - pc);
        const char *src = (const char *)b + pc * rsb * esz;
        char *dst = (char *)packed + pc * npad * esz;
        if (dtype == PYTPP_MM_BF16 && bk->bf16_widened) /* kept in bf16, widened per block */
            pytpp_pack_b_bf16_kept((const uint16_t *)src, rsb, csb, kcb, n, bk->nr, (uint16_t *)dst);
        else
            pack_b(&e, src, rsb, csb, kcb, n, dst);
    }
}

/* A PackedMatrix (f32/f64) against a few rows of A: the products of rows over its panels
 * (kt->dot_pk) block by block, each lane's sum in registers over a block, instead of the GEMM's
 * micro-kernels, whose C tiles would use each element of B m times at most. */
static int use_dot_packed(const eng *e, const pytpp_mm_desc *d)
{
    return !e->widen && e->kt && e->kt->dot_pk && e->nr == PYTPP_PK_NV * e->kt->vl &&
           d->m <= PYTPP_MM_DOT_PK_MAX_M && d->k >= PYTPP_MM_DOT_MIN_K;
}

static void run_dot_packed(const eng *e, const pytpp_mm_desc *d, const char *a,
                           const char *packed, char *c, int nthreads, const pytpp_mm_epilogue *ep)
{
    const int64_t esz = (int64_t)e->esz, NR = e->nr, unit = 4 * NR, npad = rup(d->n, NR);
    const int64_t units = cdiv(d->n, unit);
    const int stream = d->k * npad * esz >= PYTPP_MM_DOT_NN_PREFETCH_BYTES;
    const int nt = dot_threads(d, units, nthreads);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int64_t j0, j1;
        dot_thread_cols(units, unit, d->n, &j0, &j1);
        for (int64_t pc = 0; j1 > j0 && pc < d->k; pc += e->kc) {
            const int64_t kcb = imin(e->kc, d->k - pc);
            const int flags =
                (pc > 0 ? PYTPP_DOT_ACCUMULATE : 0) | (stream ? PYTPP_DOT_PREFETCH : 0);
            e->kt->dot_pk(d->m, j1 - j0, kcb, a + pc * d->csa * esz, d->rsa, d->csa,
                          packed + (pc * npad + j0 * kcb) * esz, NR * kcb,
                          c + j0 * (int64_t)e->cesz, d->ldc, flags);
        }
        if (ep && j1 > j0)
            epilogue_rows(ep, c + j0 * (int64_t)e->cesz, d->ldc, (int64_t)e->cesz, 0, d->m, j0,
                          j1 - j0);
    }
}

static int prepacked_one(const eng *e, const pytpp_mm_desc *d, const char *a,
                         const void *packed_b, char *c, int nthreads, void *ws, size_t ws_bytes,
                         const pytpp_mm_epilogue *ep)
{
    if (d->m <= 0 || d->n <= 0) return 0;
    if (d->k <= 0) {
        zero_c(e, d, c);
        if (ep) epilogue_rows(ep, c, d->ldc, (int64_t)e->cesz, 0, d->m, 0, d->n);
        return 0;
    }
    if (use_dot_packed(e, d)) {
        run_dot_packed(e, d, a, (const char *)packed_b, c, nthreads, ep);
        return 0;
    }
    /* a few rows: the products of rows over the bf16 panels, nothing widened per block */
    const pytpp_mm_desc dp = {.m = d->m, .n = d->n, .k = d->k, .rsa = d->rsa, .csa = d->csa,
                              .rsb = 16, .csb = 1, .ldc = d->ldc, .dtype = d->dtype};
    if (use_dot_bf16_packed(e, &dp))
        return run_dot_bf16(e, &dp, BF16_ROWS_PACKED, a, (const char *)packed_b, c, nthreads,
                            ep);
    job jb = {.e = e, .d = d, .a = a, .b = NULL, .bpre = packed_b, .npad = rup(d->n, e->nr),
              .c = c, .ws = ws, .ws_bytes = ws_bytes, .ep = ep};
    return run_goto(e, &jb, nthreads);
}

int pytpp_matmul_prepacked(const pytpp_mm_kernels *ks, const pytpp_mm_blocking *bk,
                           const pytpp_mm_desc *d, const void *a, const void *packed_b, void *c,
                           int64_t count, const int64_t *off_a, const int64_t *off_c,
                           int nthreads, void *ws, size_t ws_bytes)
{
    if (!valid_kernels(ks, d->dtype)) return -2;
    eng e;
    make_eng(&e, ks, bk, d->dtype);
    const int64_t ea = (int64_t)e.in_esz, ec = (int64_t)e.cesz;
    int err = 0;
    for (int64_t l = 0; l < count && !err; ++l)
        err = prepacked_one(&e, d, (const char *)a + off_a[l] * ea, packed_b,
                            (char *)c + off_c[l] * ec, nthreads, ws, ws_bytes, NULL);
    return err;
}

int pytpp_matmul_prepacked_fused(const pytpp_mm_kernels *ks, const pytpp_mm_blocking *bk,
                                 const pytpp_mm_desc *d, const void *a, const void *packed_b,
                                 void *c, int nthreads, void *ws, size_t ws_bytes,
                                 const pytpp_mm_epilogue *ep)
{
    if (!valid_kernels(ks, d->dtype)) return -2;
    eng e;
    make_eng(&e, ks, bk, d->dtype);
    return prepacked_one(&e, d, a, packed_b, c, nthreads, ws, ws_bytes, ep);
}

/* ---- bf16 output ------------------------------------------------------------------------------ */

void pytpp_cvt_f32_bf16(const float *src, uint16_t *dst, int64_t rows, int64_t cols,
                        int64_t src_rs, int64_t dst_rs, int64_t dst_cs)
{
    for (int64_t i = 0; i < rows; ++i) {
        const float *s = src + i * src_rs;
        uint16_t *o = dst + i * dst_rs;
        for (int64_t j = 0; j < cols; ++j) {
            uint32_t u;
            memcpy(&u, s + j, 4);
            uint16_t h;
            if ((u & 0x7FFFFFFFu) > 0x7F800000u) h = (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
            else h = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
            o[j * dst_cs] = h;
        }
    }
}
