/* Small-GEMM drivers: planning (vector width, register blocks, layout), one product, strided
 * stacks and DBCSR-style indexed stacks. No ISA code: every instruction-set detail sits behind
 * the kernel tables (pytpp_smm_kernels) the plan was made with. */
#include <stdlib.h>
#include <string.h>
#include "pytpp/smallgemm.h"
#include "pytpp/partition.h"
#include "pytpp/tuning.h"
#ifdef _OPENMP
#include <omp.h>
#endif

/* Pointers per reduction chunk of a DBCSR group (on the stack). */
#define SMM_GROUP_CHUNK 256
/* Products of at least this many bytes (A, B and C) run the prefetching stack kernels. */
#define PYTPP_SMM_PF_MIN_BYTES 40000
/* Stacks of at least this many bytes run the PF_AHEAD prefetching kernels (they stream from L3
 * or memory); the prefetches reach about SMM_PF_AHEAD_BYTES ahead. */
#define PYTPP_SMM_PF_AHEAD_MIN_BYTES (2.0 * 1024 * 1024)
#define SMM_PF_AHEAD_BYTES 2048
/* Products smaller than this skip PF_AHEAD: their few k steps cannot hide the prefetches
 * (4^3 f64 ran 33% slower with them, 5^3 14%; 8^3 10% faster). */
#define SMM_PF_AHEAD_MIN_PRODUCT 1024
/* Scratch up to this size lives on the stack of pytpp_smm_run1. */
#define SMM_STACK_SCRATCH 16384


/* ---------------------------------------------------------------------------------------------
 * Planning */

typedef struct blocking {
    int64_t nvec, n_jb, n_ib;
    double cost;
} blocking;

/* Register blocking of an m x n x k product for table `kt` with blocks of up to `nv` vectors,
 * and its estimated cost in cycles per product: the model of the AVX-512 tables, calibrated on
 * Zen 4 (two 256-bit FMA pipes, a zmm op takes both; two 256-bit loads per cycle) with stacks in
 * L1 and streaming:
 *  - in rows of several zmm vectors the masked one costs about twice a full one (13^3 and 9^3
 *    in f64 ran 1.4-1.5x faster on ymm vectors of the same padded width), while a row of one
 *    masked zmm runs as fast as its lane count says (5^3 f64, 9^3 and 13^3 f32);
 *  - a second column block is very costly when the stack streams from memory (32^3 f64: 20 vs
 *    45 GFLOP/s), unless B is too large for L1 anyway (64^3), so it is taken only then. */
static int block_for_zen4(const pytpp_smm_kernels *kt, int64_t m, int64_t n, int64_t k, int nv,
                          int esz, blocking *out)
{
    if (nv < 1 || nv > PYTPP_SMM_NV_MAX || kt->mr_max[nv] <= 0) return 0;
    blocking b;
    if (m < 1) m = 1;
    if (n < 1) n = 1;
    b.nvec = cdiv(n, kt->vl);
    b.n_jb = cdiv(b.nvec, nv);
    const int64_t widest = cdiv(b.nvec, b.n_jb);
    const int64_t mr = kt->mr_max[widest];
    if (mr <= 0) return 0;
    b.n_ib = cdiv(m, mr);
    const double w = kt->vbytes > 32 ? kt->vbytes / 32.0 : 1.0;  /* 256-bit slots per op */
    const int masked = n % kt->vl != 0;
    const double units = (double)b.nvec * w + (masked && w > 1.0 && b.nvec > 1 ? w : 0.0);
    const double kk = (double)(k > 0 ? k : 1);
    const double fma = kk * (double)m * units / 2.0;
    const double loads = kk * ((double)m * (double)b.n_jb + (double)b.nvec * (double)b.n_ib * w) / 2.0;
    const double stores = (double)m * (double)b.nvec * w;
    b.cost = (fma > loads ? fma : loads) + stores + 6.0 * (double)(b.n_ib * b.n_jb) +
             10.0 * (double)b.n_jb;
    if (b.n_jb > 1 && k * n * esz <= 16384) b.cost *= 2.0;
    *out = b;
    return 1;
}

static inline double max3(double a, double b, double c)
{
    const double ab = a > b ? a : b;
    return ab > c ? ab : c;
}

/* Cycles per k step of an MR x NV register block on a 16-register AVX2 core, fitted to the
 * paired timings of every candidate blocking of 39 shapes (4^3..48^3, f64 and f32) on Zen 3:
 * two FMAs and about two loads (B vectors, A broadcasts) per cycle; B vectors that do not fit
 * the register file beside the accumulators are loaded again per row; a k step is never shorter
 * than the FMA latency; blocks five or more vectors wide ran 20% slower than their counts say. */
static double kstep_avx2(const pytpp_smm_kernels *kt, int64_t mr, int64_t nv)
{
    const int64_t regs = mr * nv + nv + 1;
    const double reloads = regs > kt->nregs ? (double)((regs - kt->nregs) * mr) : 0.0;
    const double c = max3((double)(mr * nv) / 2.0, ((double)(mr + nv) + reloads) / 2.0,
                          mr * nv <= 8 ? 4.0 : 3.5);
    return nv >= 5 && mr >= 2 ? 1.2 * c : c;
}

/* Cycles per product of the AVX2 blocking (n_jb column blocks, n_ib row blocks, near-equal):
 * per register block its k steps, its stores and a few cycles of loop; a masked tail (slow
 * vmaskmov on AMD) adds per row a masked store and per k step a masked load; several column
 * blocks run one kernel call per product and block. In a reduction (DBCSR groups) a block's
 * stores and loop happen once per group of products: only the k steps count. */
static double cost_avx2(const pytpp_smm_kernels *kt, int64_t m, int64_t k, int64_t nvec,
                        int64_t n_jb, int64_t n_ib, int tail, int reduction)
{
    double cost = n_jb > 1 && !reduction ? 25.0 * (double)n_jb : 0.0;
    for (int64_t jb = 0; jb < n_jb; ++jb) {
        int64_t v0, nv;
        pytpp_split(nvec, n_jb, jb, &v0, &nv);
        const int masked = tail == PYTPP_SMM_TAIL_MASK && jb == n_jb - 1;
        for (int64_t ib = 0; ib < n_ib; ++ib) {
            int64_t i0, mr;
            pytpp_split(m, n_ib, ib, &i0, &mr);
            cost += (double)k * (kstep_avx2(kt, mr, nv) + (masked ? 0.5 : 0.0));
            if (!reduction) cost += 0.5 * (double)(mr * nv) + 5.0 + (masked ? 6.0 * (double)mr : 0.0);
        }
    }
    return cost;
}

static int tail_kind(const pytpp_smm_kernels *kt, int64_t n, int64_t nvec, int64_t n_jb,
                     double beta);

/* The cheapest blocking of an m x n x k product for table `kt` under its cost model. */
static int best_blocking(const pytpp_smm_kernels *kt, int64_t m, int64_t n, int64_t k, int esz,
                         double beta, int reduction, blocking *out)
{
    int found = 0;
    const int64_t kk = k > 0 ? k : 1;
    if (kt->cost_model == PYTPP_SMM_MODEL_ZEN4) {
        for (int nv = 1; nv <= PYTPP_SMM_NV_MAX; ++nv) {
            blocking b;
            if (block_for_zen4(kt, m, n, k, nv, esz, &b) && (!found || b.cost < out->cost)) {
                *out = b;
                found = 1;
            }
        }
        return found;
    }
    if (m < 1) m = 1;
    if (n < 1) n = 1;
    const int64_t nvec = cdiv(n, kt->vl);
    for (int64_t n_jb = 1; n_jb <= nvec; ++n_jb) {
        const int64_t widest = cdiv(nvec, n_jb);
        if (widest > PYTPP_SMM_NV_MAX || kt->mr_max[widest] <= 0) continue;
        if (n_jb > 1 && cdiv(nvec, n_jb - 1) == widest) continue;  /* same widest, more calls */
        const int tail = tail_kind(kt, n, nvec, n_jb, beta);
        int64_t v0, last_nv;
        pytpp_split(nvec, n_jb, n_jb - 1, &v0, &last_nv);
        /* tables instantiate masked tails only where tail_kind can ask for them */
        if (!kt->stack[last_nv - 1][0][tail][0]) continue;
        /* fewest row blocks, or up to two more of fewer rows (sometimes faster) */
        const int64_t ib_min = cdiv(m, kt->mr_max[widest]);
        for (int64_t n_ib = ib_min; n_ib <= ib_min + 2 && n_ib <= m; ++n_ib) {
            const blocking b = {nvec, n_jb, n_ib,
                                cost_avx2(kt, m, kk, nvec, n_jb, n_ib, tail, reduction)};
            if (!found || b.cost < out->cost) {
                *out = b;
                found = 1;
            }
        }
    }
    return found;
}

/* How the last vector of a row is covered: a shifted full vector needs a row of >= VL columns,
 * and when C is read (beta != 0) the vector it overlaps in the same register block (a block
 * before it would already have written the shared lanes). */
static int tail_kind(const pytpp_smm_kernels *kt, int64_t n, int64_t nvec, int64_t n_jb,
                     double beta)
{
    if (n % kt->vl == 0) return PYTPP_SMM_TAIL_NONE;
    if (!kt->shift_tails || n < kt->vl) return PYTPP_SMM_TAIL_MASK;
    int64_t v0, last_nv = nvec;
    if (n_jb > 1) pytpp_split(nvec, n_jb, n_jb - 1, &v0, &last_nv);
    return beta == 0.0 || last_nv >= 2 ? PYTPP_SMM_TAIL_SHIFT : PYTPP_SMM_TAIL_MASK;
}

static int dtype_size(int dtype) { return dtype == PYTPP_F64 ? 8 : 4; }

/* Products ahead that PF_AHEAD kernels prefetch: about SMM_PF_AHEAD_BYTES ahead, at least one. */
static int64_t pf_distance(const pytpp_smm_plan *p)
{
    return p->bytes >= SMM_PF_AHEAD_BYTES || p->bytes <= 0 ? 1 : cdiv(SMM_PF_AHEAD_BYTES, p->bytes);
}

void pytpp_smm_plan_make(pytpp_smm_plan *p, const pytpp_smm_kernels *const *tables, int ntables,
                         int force, int dtype, int64_t m, int64_t n, int64_t k,
                         int64_t rsa, int64_t csa, int64_t rsb, int64_t csb,
                         int64_t rsc, int64_t csc, double alpha, double beta, int flags)
{
    memset(p, 0, sizeof(*p));
    p->dtype = dtype;
    p->esz = dtype_size(dtype);
    p->alpha = alpha;
    p->beta = beta;
    p->flops = 2.0 * (double)m * (double)n * (double)k;
    /* Strides along an axis of length <= 1 are never used: normalise them so that layout tests
     * below see the contiguous case. */
    if (n <= 1) { csc = 1; csb = 1; }
    if (m <= 1) { rsc = 1; rsa = 1; }
    if (k <= 1) { csa = 1; rsb = 1; }

    /* Two ways to run: as given (needs unit column strides of B and C) or transposed,
     * C^T = B^T A^T (needs unit row strides of A and C). A missing unit stride costs a copy:
     * B per product into scratch, C through scratch. Take the cheaper one. */
    double best = -1.0;
    for (int swap = 0; swap < 2; ++swap) {
        const int64_t mm = swap ? n : m, nn = swap ? m : n;
        const int64_t c_unit = swap ? rsc : csc, b_unit = swap ? rsa : csb;
        const int scratch_c = c_unit != 1, pack_b = b_unit != 1;
        for (int t = 0; t < ntables; ++t) {
            if (force >= 0 && t != force) continue;
            blocking bl = {0, 0, 0, 0.0};
            if (!best_blocking(tables[t], mm, nn, k, p->esz, beta, flags & PYTPP_SMM_REDUCTION, &bl))
                continue;
            double cost = bl.cost + (pack_b ? 2.0 * (double)(k * nn) : 0.0) +
                          (scratch_c ? (beta != 0.0 ? 4.0 : 2.0) * (double)(mm * nn) : 0.0);
            if (!(flags & PYTPP_SMM_ALLOW_COPIES) && (pack_b || scratch_c)) cost += 1e30;
            if (best < 0 || cost < best) {
                best = cost;
                p->cost = cost;
                p->kt = tables[t];
                p->swap = swap;
                p->pack_b = pack_b;
                p->scratch_c = scratch_c;
                p->m = mm;
                p->n = nn;
                p->nvec = bl.nvec;
                p->n_jb = bl.n_jb;
                p->n_ib = bl.n_ib;
            }
        }
    }
    p->k = k;
    if (!p->swap) {
        p->rsa = rsa; p->csa = csa; p->rsb = rsb; p->csb = csb; p->rsc = rsc; p->csc = csc;
    } else {  /* A' = B^T, B' = A^T, C' = C^T */
        p->rsa = csb; p->csa = rsb; p->rsb = csa; p->csb = rsa; p->rsc = csc; p->csc = rsc;
    }
    const int64_t vl = p->kt->vl;
    p->n_last = p->n - (p->nvec - 1) * vl;
    if (p->n_last <= 0) p->n_last = vl;
    p->tail = tail_kind(p->kt, p->n, p->nvec, p->n_jb, p->beta);
    const int64_t bytes = (p->m * p->k + p->k * p->n + p->m * p->n) * p->esz;
    p->bytes = bytes;
    /* row blocks: nfull of mr rows, then nshort of mr - 1 (near-equal split) */
    const int64_t base = p->m / p->n_ib, extra = p->m % p->n_ib;
    p->mr = extra ? base + 1 : (base > 0 ? base : 1);
    p->nfull = extra ? extra : p->n_ib;
    p->nshort = p->n_ib - p->nfull;
    /* One column block: the kernel runs the whole stack in one call. Several: all blocks of a
     * product before the next product (block-major order over chunks of products was up to 3x
     * slower on stacks streaming from memory, even when a chunk fit L1). */
    p->per_chunk = p->n_jb == 1 ? INT64_MAX : 1;
    /* PF_NEXT (Zen 4): products this large stream their A rows from L3 or memory with the
     * hardware prefetchers idle (the rows are short), 30% slower at 64^3 than with A in cache; the
     * prefetching kernels recover about a third of that, and cost 10-25% on smaller products
     * (measured 4^3..64^3). PF_AHEAD (Zen 3): any product of 1 kB or more, when the stack is
     * large (use_prefetch). */
    p->pf = p->kt->pf_mode != PYTPP_SMM_PF_NONE &&
            bytes >= (p->kt->pf_mode == PYTPP_SMM_PF_AHEAD ? SMM_PF_AHEAD_MIN_PRODUCT
                                                           : PYTPP_SMM_PF_MIN_BYTES);
    p->pfd = pf_distance(p);
}

size_t pytpp_smm_scratch_bytes(const pytpp_smm_plan *p)
{
    size_t s = 0;
    if (p->pack_b) s += (size_t)(p->k * p->n) * p->esz;
    if (p->scratch_c) s += (size_t)(p->m * p->n) * p->esz;
    return s ? s + 64 : 0;
}

/* ---------------------------------------------------------------------------------------------
 * Running */

/* Every register block of C for `count` products at strides (sa, sb, sc); B and C have unit
 * column strides here, B's row stride is ldb and C's is ldc. */
static void run_blocks(const pytpp_smm_plan *p, int64_t count, const char *a, int64_t sa,
                       const char *b, int64_t ldb, int64_t sb, char *c, int64_t ldc, int64_t sc,
                       double beta, int pf)
{
    const pytpp_smm_kernels *kt = p->kt;
    const int64_t esz = p->esz, vl = kt->vl;
    for (int64_t jb = 0; jb < p->n_jb; ++jb) {
        int64_t v0 = 0, nv = p->nvec;
        if (p->n_jb > 1) pytpp_split(p->nvec, p->n_jb, jb, &v0, &nv);
        const int tail = jb == p->n_jb - 1 ? p->tail : PYTPP_SMM_TAIL_NONE;
        const int64_t j0 = v0 * vl;
        /* A PF_NEXT kernel fetches, in its last row block, what it takes to be the next
         * product's operands at a + sa, b + sb, c + sc. With one product per call and several column
         * blocks, what runs next is this product's next column block: point it there (the
         * strides are otherwise unused when count == 1). */
        int64_t sa_k = sa, sb_k = sb, sc_k = sc;
        if (pf && kt->pf_mode == PYTPP_SMM_PF_NEXT && count == 1 && p->n_jb > 1) {
            sa_k = jb < p->n_jb - 1 ? 0 : sa;
            sb_k = jb < p->n_jb - 1 ? nv * vl : sb - j0;
            sc_k = jb < p->n_jb - 1 ? nv * vl : sc - j0;
        }
        kt->stack[nv - 1][p->mr - 1][tail][pf](
            count, p->k, a, p->rsa, p->csa, sa_k, b + j0 * esz, ldb, sb_k, c + j0 * esz, ldc, sc_k,
            p->alpha, beta, tail != PYTPP_SMM_TAIL_NONE ? p->n_last : vl, p->nfull, p->nshort,
            p->pfd);
    }
}

/* B (k x n, strides rsb, csb) into row-major dst. */
static void copy_b(const pytpp_smm_plan *p, const char *b, char *dst)
{
    const int64_t k = p->k, n = p->n;
    if (p->esz == 8) {
        const double *s = (const double *)b;
        double *d = (double *)dst;
        for (int64_t q = 0; q < k; ++q)
            for (int64_t j = 0; j < n; ++j) d[q * n + j] = s[q * p->rsb + j * p->csb];
    } else {
        const float *s = (const float *)b;
        float *d = (float *)dst;
        for (int64_t q = 0; q < k; ++q)
            for (int64_t j = 0; j < n; ++j) d[q * n + j] = s[q * p->rsb + j * p->csb];
    }
}

/* m x n matrix between strided (rs, cs) and row-major (ld = n) storage. */
static void copy_c(const pytpp_smm_plan *p, char *strided, char *packed, int to_packed)
{
    const int64_t m = p->m, n = p->n, rs = p->rsc, cs = p->csc;
    if (p->esz == 8) {
        double *s = (double *)strided, *d = (double *)packed;
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
                if (to_packed) d[i * n + j] = s[i * rs + j * cs];
                else s[i * rs + j * cs] = d[i * n + j];
            }
    } else {
        float *s = (float *)strided, *d = (float *)packed;
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
                if (to_packed) d[i * n + j] = s[i * rs + j * cs];
                else s[i * rs + j * cs] = d[i * n + j];
            }
    }
}

/* count products at strides (sa, sb, sc), B and C in place (B rows p->rsb apart, C rows ldc). */
static void run_direct(const pytpp_smm_plan *p, int64_t count, const char *a, int64_t sa,
                       const char *b, int64_t sb, char *c, int64_t ldc, int64_t sc, double beta,
                       int pf)
{
    const int64_t esz = p->esz;
    for (int64_t l = 0; l < count;) {
        const int64_t cnt = count - l < p->per_chunk ? count - l : p->per_chunk;
        run_blocks(p, cnt, a + l * sa * esz, sa, b + l * sb * esz, p->rsb, sb, c + l * sc * esz,
                   ldc, sc, beta, pf);
        l += cnt;
    }
}

/* Whether a stack of `count` products runs the prefetching kernels: PF_NEXT ones when the plan
 * says so (by product size); PF_AHEAD ones when the stack is too large to stay in cache. */
static int use_prefetch(const pytpp_smm_plan *p, int64_t count)
{
    if (!p->pf) return 0;
    return p->pf == 2 || p->kt->pf_mode == PYTPP_SMM_PF_NEXT ||
           (double)count * (double)p->bytes >= PYTPP_SMM_PF_AHEAD_MIN_BYTES;
}

/* Products [l0, l1) of a stack whose operands are already exchanged when p->swap. */
static void run_range(const pytpp_smm_plan *p, int64_t l0, int64_t l1, const char *a, int64_t sa,
                      const char *b, int64_t sb, char *c, int64_t sc, char *scratch, int pf)
{
    const int64_t esz = p->esz;
    if (l1 <= l0 || p->m <= 0 || p->n <= 0) return;
    if (!p->pack_b && !p->scratch_c) {
        run_direct(p, l1 - l0, a + l0 * sa * esz, sa, b + l0 * sb * esz, sb, c + l0 * sc * esz,
                   p->rsc, sc, p->beta, pf);
        return;
    }
    /* a copy per product: B into row-major scratch (once when B is broadcast), C through it */
    char *bbuf = scratch, *cbuf = scratch + (p->pack_b ? p->k * p->n * esz : 0);
    if (p->pack_b && sb == 0) copy_b(p, b, bbuf);
    for (int64_t l = l0; l < l1; ++l) {
        const char *bl = b + l * sb * esz;
        char *cl = c + l * sc * esz;
        if (p->pack_b && sb != 0) copy_b(p, bl, bbuf);
        if (p->scratch_c && p->beta != 0.0) copy_c(p, cl, cbuf, 1);
        run_blocks(p, 1, a + l * sa * esz, 0, p->pack_b ? bbuf : bl, p->pack_b ? p->n : p->rsb, 0,
                   p->scratch_c ? cbuf : cl, p->scratch_c ? p->n : p->rsc, 0, p->beta,
                   pf && p->kt->pf_mode == PYTPP_SMM_PF_NEXT);  /* nothing ahead at stride 0 */
        if (p->scratch_c) copy_c(p, cl, cbuf, 0);
    }
}

void pytpp_smm_run1(const pytpp_smm_plan *p, const void *a, const void *b, void *c, void *scratch)
{
    if (p->swap) { const void *t = a; a = b; b = t; }
    const int pf = p->pf && p->kt->pf_mode == PYTPP_SMM_PF_NEXT;  /* nothing ahead to fetch */
    if (!p->pack_b && !p->scratch_c) {
        if (p->m > 0 && p->n > 0)
            run_blocks(p, 1, a, 0, b, p->rsb, 0, c, p->rsc, 0, p->beta, pf);
        return;
    }
    const size_t need = pytpp_smm_scratch_bytes(p);
    if (scratch) {
        run_range(p, 0, 1, a, 0, b, 0, c, 0, scratch, pf);
    } else if (need <= SMM_STACK_SCRATCH) {
        _Alignas(64) char buf[SMM_STACK_SCRATCH];
        run_range(p, 0, 1, a, 0, b, 0, c, 0, buf, pf);
    } else {
        char *buf = malloc(need);
        if (!buf) return;  /* cannot happen for the sizes handles are made for; C stays as it was */
        run_range(p, 0, 1, a, 0, b, 0, c, 0, buf, pf);
        free(buf);
    }
}

int pytpp_smm_stack(const pytpp_smm_plan *p, int64_t count, const void *a, int64_t sa,
                    const void *b, int64_t sb, void *c, int64_t sc, int nthreads)
{
    if (count <= 0 || p->m <= 0 || p->n <= 0) return 0;
    if (p->swap) {
        const void *t = a; a = b; b = t;
        int64_t s = sa; sa = sb; sb = s;
    }
    const int pf = use_prefetch(p, count);
    const size_t need = pytpp_smm_scratch_bytes(p);
    const double flops = p->flops * (double)count + (double)(p->m * p->n * count);
    if (nthreads > count) nthreads = (int)count;
    if (nthreads <= 1 || flops < PYTPP_SMM_PAR_MIN_FLOPS) {
        char *buf = need ? malloc(need) : NULL;
        if (need && !buf) return -1;
        run_range(p, 0, count, a, sa, b, sb, c, sc, buf, pf);
        free(buf);
        return 0;
    }
    int err = 0;
    #pragma omp parallel num_threads(nthreads) reduction(| : err)
    {
#ifdef _OPENMP
        const int64_t tid = omp_get_thread_num(), nt = omp_get_num_threads();
#else
        const int64_t tid = 0, nt = 1;
#endif
        int64_t l0, len;
        pytpp_split(count, nt, tid, &l0, &len);
        char *buf = need ? malloc(need) : NULL;
        if (need && !buf)
            err = 1;
        else
            run_range(p, l0, l0 + len, a, sa, b, sb, c, sc, buf, pf);
        free(buf);
    }
    return err ? -1 : 0;
}

/* ---------------------------------------------------------------------------------------------
 * DBCSR-style indexed stacks */

/* Groups [g0, g1) of the sorted products: group g is perm[start[g] .. start[g+1]). */
static void run_groups(const pytpp_smm_plan *p, int64_t g0, int64_t g1, const int64_t *start,
                       const int64_t *perm, const char *a, int64_t blk_a, const char *b,
                       int64_t blk_b, char *c, int64_t blk_c, const int64_t *ai, const int64_t *bi)
{
    const pytpp_smm_kernels *kt = p->kt;
    const int64_t esz = p->esz, vl = kt->vl;
    const void *ap[SMM_GROUP_CHUNK], *bp[SMM_GROUP_CHUNK];
    for (int64_t g = g0; g < g1; ++g) {
        char *cg = c + g * blk_c * esz;
        for (int64_t s = start[g]; s < start[g + 1]; s += SMM_GROUP_CHUNK) {
            const int64_t nb = start[g + 1] - s < SMM_GROUP_CHUNK ? start[g + 1] - s : SMM_GROUP_CHUNK;
            const double beta = s == start[g] ? p->beta : 1.0;  /* later chunks accumulate */
            for (int64_t i = 0; i < nb; ++i) {
                const int64_t e = perm[s + i];
                ap[i] = a + ai[e] * blk_a * esz;
                bp[i] = b + bi[e] * blk_b * esz;
            }
            for (int64_t jb = 0; jb < p->n_jb; ++jb) {
                int64_t v0, nv;
                pytpp_split(p->nvec, p->n_jb, jb, &v0, &nv);
                const int tail = jb == p->n_jb - 1 ? p->tail : PYTPP_SMM_TAIL_NONE;
                const int64_t j0 = v0 * vl;
                for (int64_t ib = 0; ib < p->n_ib; ++ib) {
                    int64_t i0, mr;
                    pytpp_split(p->m, p->n_ib, ib, &i0, &mr);
                    kt->reduce[nv - 1][mr - 1][tail](p->k, nb, ap, i0 * p->rsa, p->rsa, p->csa,
                                                     bp, j0, p->rsb, cg + (i0 * p->rsc + j0) * esz,
                                                     p->rsc, p->alpha, beta,
                                                     tail != PYTPP_SMM_TAIL_NONE ? p->n_last : vl);
                }
            }
        }
    }
}

/* First group whose start is >= pos (start is non-decreasing, start[0] = 0, start[nc] = count). */
static int64_t first_group_at(const int64_t *start, int64_t nc, int64_t pos)
{
    int64_t lo = 0, hi = nc;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (start[mid] < pos) lo = mid + 1; else hi = mid;
    }
    return lo;
}

int pytpp_smm_indexed(const pytpp_smm_plan *p, const void *a, int64_t blk_a,
                      const void *b, int64_t blk_b, void *c, int64_t blk_c, int64_t nc,
                      int64_t count, const int64_t *a_index, const int64_t *b_index,
                      const int64_t *c_index, int nthreads)
{
    if (count <= 0 || nc <= 0 || p->m <= 0 || p->n <= 0) return 0;
    if (p->pack_b || p->scratch_c) return -2;  /* the caller provides unit-stride layouts */
    if (p->swap) {
        const void *t = a; a = b; b = t;
        int64_t s = blk_a; blk_a = blk_b; blk_b = s;
        const int64_t *ti = a_index; a_index = b_index; b_index = ti;
    }
    /* counting sort of the products by c block: stable, O(count + nc) */
    int64_t *start = calloc((size_t)nc + 1, sizeof(int64_t));
    int64_t *perm = malloc((size_t)count * sizeof(int64_t));
    if (!start || !perm) { free(start); free(perm); return -1; }
    for (int64_t i = 0; i < count; ++i) start[c_index[i] + 1]++;
    for (int64_t g = 0; g < nc; ++g) start[g + 1] += start[g];
    for (int64_t i = 0; i < count; ++i) perm[start[c_index[i]]++] = i;  /* start[g] -> end of g */
    for (int64_t g = nc; g > 0; --g) start[g] = start[g - 1];            /* shift back */
    start[0] = 0;

    const double flops = p->flops * (double)count;
    if (nthreads > 1 && flops >= PYTPP_SMM_PAR_MIN_FLOPS) {
        /* thread t owns the groups that start in its share [count*t/T, count*(t+1)/T) of the
         * sorted products: every C block is written by exactly one thread */
        #pragma omp parallel num_threads(nthreads)
        {
#ifdef _OPENMP
            const int64_t tid = omp_get_thread_num(), nt = omp_get_num_threads();
#else
            const int64_t tid = 0, nt = 1;
#endif
            const int64_t g0 = tid == 0 ? 0 : first_group_at(start, nc, count * tid / nt);
            const int64_t g1 = tid == nt - 1 ? nc : first_group_at(start, nc, count * (tid + 1) / nt);
            run_groups(p, g0, g1, start, perm, a, blk_a, b, blk_b, c, blk_c, a_index, b_index);
        }
    } else {
        run_groups(p, 0, nc, start, perm, a, blk_a, b, blk_b, c, blk_c, a_index, b_index);
    }
    free(start);
    free(perm);
    return 0;
}
