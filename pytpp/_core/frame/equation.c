/* Driver of the TPP matrix equations (equation.h): the tiles, threads and operand addressing
 * of strategy 1 (every node one call of the level's element-wise row kernels per tile row, a
 * product one BRGEMM per tile, temporaries as L1-sized buffers), and the split of the work among
 * threads for strategy 2's fused kernels. No ISA code here. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "pytpp/equation.h"
#include "pytpp/ew_tile.h"
#include "pytpp/dispatch.h"
#include "pytpp/partition.h"
#include "pytpp/tuning.h"
#ifdef _OPENMP
#include <omp.h>
#endif


/* a tile's temporaries together fit in about this much of L1 */
#define EQN_L1_BYTES (24 * 1024)
#define EQN_NB_MAX 512
#define EQN_MB_MAX 64
/* columns of a strategy-2 part: whole chunks of the fused kernel (and of 64-byte lines) */
#define EQN_COL_UNIT 256


const pytpp_eqn_kernels *pytpp_eqn_table(int isa, int dt)
{
    /* the element-wise dtype codes of f64 and f32 are the engine's (enum pytpp_dtype) */
    if (isa < 0 || isa >= PYTPP_NISA || (dt != PYTPP_EW_F32 && dt != PYTPP_EW_F64)) return NULL;
    return pytpp_levels[isa].equation[dt];
}

/* ------------------------------------------------------------------------------------------ */
/* Strategy 1                                                                                   */
/* ------------------------------------------------------------------------------------------ */
typedef struct eqn_ctx {
    const pytpp_eqn_prog *p;
    const pytpp_ew_kernels *kt;
    const pytpp_gemm_kernels *gk;
    const pytpp_ew_operand *in, *out;
    int64_t m, n, mb, nb;
    int cdt;
    const pytpp_eqn_kernels *ek;   /* fused kernels for runs of element-wise nodes (or NULL) */
    const struct eqn_seg *segs;
    const int *seg_of;
} eqn_ctx;

/* Temporary t: a tile of mb x nb compute elements (ld nb), then mb values (one per row) of a
 * reduction or of a node over such values, apart so that a node may write its result over its
 * own operand's (temporaries are recycled, paper Algorithm 4). */
#define TSTRIDE(c) ((c)->mb * (c)->nb + (c)->mb)
typedef struct eqn_tile {
    char *temp;          /* ntemps temporaries, TSTRIDE elements apart */
    char *cv[4];         /* conversion rows: 3 operands and the output (nb elements each) */
    int *tcol;           /* temporary t holds one value per row */
} eqn_tile;

/* Strategy 3 (paper 4.3, the hybrid): a run of element-wise nodes over whole tiles between the
 * reductions and products is one pass of the fused kernel, its intermediate results in vector
 * temporaries; only the run's last result (and what the run reads from before it) is a tile. */
#define EQN_SEG_MAX 64
typedef struct eqn_seg {
    int q0, q1;                 /* instructions [q0, q1) */
    int nlive, live[PYTPP_EQN_MAX_VTEMPS];  /* temporaries read from tiles, inputs n.. n+nlive */
    pytpp_eqn_prog prog;
    pytpp_eqn_instr ins[EQN_SEG_MAX];
} eqn_seg;

static inline int fusable(const pytpp_eqn_instr *ins)
{
    return !ins->col && (ins->kind == PYTPP_EQN_UNARY || ins->kind == PYTPP_EQN_BINARY ||
                         ins->kind == PYTPP_EQN_TERNARY);
}

static inline int nsrc(const pytpp_eqn_instr *ins)
{
    return ins->kind == PYTPP_EQN_UNARY || ins->kind == PYTPP_EQN_REDUCE ? 1
         : ins->kind == PYTPP_EQN_TERNARY ? 3 : 2;
}

/* temporary t is read after instruction q before it is written again */
static int live_after(const pytpp_eqn_prog *p, int q, int t)
{
    for (int k = q + 1; k < p->ninstr; ++k) {
        for (int a = 0; a < nsrc(&p->ins[k]); ++a)
            if (p->ins[k].src[a] == t) return 1;
        if (p->ins[k].dst == t) return 0;
    }
    return 0;
}

/* The runs of program p worth fusing (two nodes or more), seg_of[q] = run starting at q or -1.
 * Returns the number of runs. */
static int plan_segments(const pytpp_eqn_prog *p, eqn_seg *segs, int maxseg, int *seg_of)
{
    int ns = 0;
    for (int q = 0; q < p->ninstr; ++q) seg_of[q] = -1;
    for (int q = 0; q < p->ninstr && ns < maxseg;) {
        if (!fusable(&p->ins[q])) { ++q; continue; }
        int q1 = q + 1;
        /* extend over the element-wise nodes that follow (the root ends a run) */
        while (q1 < p->ninstr && q1 - q < EQN_SEG_MAX && fusable(&p->ins[q1]) &&
               p->ins[q1 - 1].dst != PYTPP_EQN_OUT)
            ++q1;
        /* shrink until every result but the last dies inside the run (a cut can expose an
         * earlier result that a node now outside the run reads) */
        for (int changed = 1; changed;) {
            changed = 0;
            for (int k = q; k < q1 - 1 && !changed; ++k) {
                const int d = p->ins[k].dst;
                int redefined = 0;   /* a later node of the run writes d: it is the one seen */
                for (int k2 = k + 1; k2 < q1; ++k2) if (p->ins[k2].dst == d) redefined = 1;
                if (!redefined && live_after(p, q1 - 1, d)) {
                    q1 = k + 1;
                    changed = 1;
                }
            }
        }
        const int len = q1 - q;
        if (len < 2) { q = q1; continue; }
        eqn_seg *g = &segs[ns];
        g->q0 = q, g->q1 = q1, g->nlive = 0;
        int written[PYTPP_EQN_MAX_VTEMPS + 1] = {0};
        int ok = p->ntemps <= PYTPP_EQN_MAX_VTEMPS;
        for (int k = q; k < q1 && ok; ++k) {
            pytpp_eqn_instr in = p->ins[k];
            for (int a = 0; a < nsrc(&in); ++a) {
                const int sl = in.src[a];
                if (PYTPP_EQN_IS_INPUT(sl) || written[sl]) continue;
                int idx = -1;   /* a temporary computed before the run: read from its tile */
                for (int l = 0; l < g->nlive; ++l) if (g->live[l] == sl) idx = l;
                if (idx < 0) { idx = g->nlive; g->live[g->nlive++] = sl; }
                in.src[a] = PYTPP_EQN_INPUT(p->ninputs + idx);
            }
            if (k == q1 - 1) in.dst = PYTPP_EQN_OUT;
            else written[in.dst] = 1;
            g->ins[k - q] = in;
        }
        ok = ok && p->ninputs + g->nlive <= 32;
        if (!ok) { q = q1; continue; }
        g->prog = (pytpp_eqn_prog){.ninstr = len, .ntemps = p->ntemps,
                                   .ninputs = p->ninputs + g->nlive, .ins = g->ins,
                                   .dtype = p->dtype};
        seg_of[q] = ns++;
        q = q1;
    }
    return ns;
}

static inline int in_scalar(const pytpp_ew_operand *o)
{
    return o->bcast == PYTPP_EW_BCAST_COL || o->bcast == PYTPP_EW_BCAST_SCALAR;
}

/* Operand slot s at tile row r (global row i, columns from j, len of them): its address in the
 * compute dtype (converting into cv when stored otherwise), and whether it is one value. */
static const char *operand(const eqn_ctx *c, const eqn_tile *w, int s, int64_t r, int64_t i,
                           int64_t j, int64_t len, char *cv, int *scalar)
{
    const int64_t cesz = PYTPP_EW_ESZ[c->cdt];
    if (!PYTPP_EQN_IS_INPUT(s)) {
        *scalar = w->tcol[s];
        return w->temp + (s * TSTRIDE(c) + (w->tcol[s] ? c->mb * c->nb + r : r * c->nb)) * cesz;
    }
    const pytpp_ew_operand *o = &c->in[PYTPP_EQN_INPUT_INDEX(s)];
    const int64_t e = PYTPP_EW_ESZ[o->dtype];
    const char *a;
    *scalar = in_scalar(o);
    switch (o->bcast) {
    case PYTPP_EW_BCAST_ROW: a = (const char *)o->p + j * e; break;
    case PYTPP_EW_BCAST_COL: a = (const char *)o->p + i * o->ld * e; break;
    case PYTPP_EW_BCAST_SCALAR: a = (const char *)o->p; break;
    default: a = (const char *)o->p + (i * o->ld + j) * e;
    }
    if (o->dtype == c->cdt) return a;
    c->kt->load_cvt[o->dtype](*scalar ? 1 : len, a, cv);
    return cv;
}

static void matmul_tile(const eqn_ctx *c, const pytpp_eqn_instr *ins, int64_t i0, int64_t rows,
                        int64_t j0, int64_t cols, char *dst, int64_t ldd)
{
    const pytpp_ew_operand *a = &c->in[PYTPP_EQN_INPUT_INDEX(ins->src[0])];
    const pytpp_ew_operand *b = &c->in[PYTPP_EQN_INPUT_INDEX(ins->src[1])];
    const int64_t e = PYTPP_EW_ESZ[c->cdt];
    const pytpp_gemm_desc d = {.m = rows, .n = cols, .k = ins->k, .rsa = a->ld, .csa = 1,
                               .ldb = b->ld, .csb = 1, .ldc = ldd, .dtype = c->cdt,
                               .alpha = 1.0, .beta = 0.0};
    const pytpp_batch bt = {.mode = PYTPP_BATCH_STRIDE, .count = 1};
    pytpp_brgemm(c->gk, NULL, &d, (const char *)a->p + i0 * a->ld * e,
                 (const char *)b->p + j0 * e, dst, &bt, 1);
}

static inline double reduce_col(int op, double v, int64_t n)
{   /* a reduction of n copies of v */
    if (op == PYTPP_EW_RED_SUM) return v * (double)n;
    if (op == PYTPP_EW_RED_MUL) return pow(v, (double)n);
    return v;
}

static void run_segment(const eqn_ctx *c, eqn_tile *w, const eqn_seg *g, int64_t i0,
                        int64_t rows, int64_t j0, int64_t cols)
{
    const int64_t cesz = PYTPP_EW_ESZ[c->cdt];
    pytpp_ew_operand ops[32], out;
    for (int q = 0; q < c->p->ninputs; ++q) ops[q] = pytpp_ew_at_tile(&c->in[q], i0, j0);
    for (int l = 0; l < g->nlive; ++l) {
        const int t = g->live[l];
        pytpp_ew_operand *o = &ops[c->p->ninputs + l];
        o->dtype = c->cdt;
        if (w->tcol[t]) {
            o->p = w->temp + (t * TSTRIDE(c) + c->mb * c->nb) * cesz;
            o->ld = 1, o->bcast = PYTPP_EW_BCAST_COL;
        } else {
            o->p = w->temp + t * TSTRIDE(c) * cesz;
            o->ld = c->nb, o->bcast = PYTPP_EW_BCAST_NONE;
        }
    }
    const int dst = c->p->ins[g->q1 - 1].dst;
    if (dst == PYTPP_EQN_OUT) {
        out = pytpp_ew_at_tile(c->out, i0, j0);
    } else {
        out.p = w->temp + dst * TSTRIDE(c) * cesz;
        out.ld = c->nb, out.dtype = c->cdt, out.bcast = PYTPP_EW_BCAST_NONE;
        w->tcol[dst] = 0;
    }
    c->ek->rows(&g->prog, ops, &out, 0, rows, 0, cols, 0);
}

/* One tile: rows [i0, i0 + rows), columns [j0, j0 + cols) of the result. */
static void run_tile(const eqn_ctx *c, eqn_tile *w, int64_t i0, int64_t rows, int64_t j0,
                     int64_t cols)
{
    const pytpp_eqn_prog *p = c->p;
    const pytpp_ew_kernels *kt = c->kt;
    const int64_t cesz = PYTPP_EW_ESZ[c->cdt], oesz = PYTPP_EW_ESZ[c->out->dtype];
    for (int t = 0; t < p->ntemps; ++t) w->tcol[t] = 0;
    for (int q = 0; q < p->ninstr; ++q) {
        if (c->seg_of && c->seg_of[q] >= 0) {
            const eqn_seg *g = &c->segs[c->seg_of[q]];
            run_segment(c, w, g, i0, rows, j0, cols);
            q = g->q1 - 1;
            continue;
        }
        const pytpp_eqn_instr *ins = &p->ins[q];
        const int root = ins->dst == PYTPP_EQN_OUT;
        /* the root writes the output directly when it is stored in the compute dtype */
        const int direct = root && !ins->col && c->out->dtype == c->cdt;
        char *tbase = root ? NULL : w->temp + ins->dst * TSTRIDE(c) * cesz;
        if (ins->kind == PYTPP_EQN_MATMUL) {
            if (direct)
                matmul_tile(c, ins, i0, rows, j0, cols,
                            (char *)c->out->p + (i0 * c->out->ld + j0) * oesz, c->out->ld);
            else if (!root)
                matmul_tile(c, ins, i0, rows, j0, cols, tbase, c->nb);
            else   /* stored in another dtype: row by row through cv[3] */
                for (int64_t r = 0; r < rows; ++r) {
                    matmul_tile(c, ins, i0 + r, 1, j0, cols, w->cv[3], cols);
                    kt->store_cvt[c->out->dtype](
                        cols, w->cv[3], (char *)c->out->p + ((i0 + r) * c->out->ld + j0) * oesz);
                }
            if (!root) w->tcol[ins->dst] = 0;
            continue;
        }
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t i = i0 + r;
            const int64_t len = ins->col ? 1 : cols;
            char *o;
            if (direct) o = (char *)c->out->p + (i * c->out->ld + j0) * oesz;
            else if (root) o = w->cv[3];
            else o = tbase + (ins->col ? c->mb * c->nb + r : r * c->nb) * cesz;
            int sc[3] = {0, 0, 0}, bc = 0;
            const char *x[3] = {NULL, NULL, NULL};
            const int na = ins->kind == PYTPP_EQN_BINARY ? 2 : ins->kind == PYTPP_EQN_TERNARY ? 3 : 1;
            for (int a = 0; a < na; ++a) {
                x[a] = operand(c, w, ins->src[a], r, i, j0, cols, w->cv[a], &sc[a]);
                bc |= sc[a] << a;
            }
            switch (ins->kind) {
            case PYTPP_EQN_UNARY: kt->unary[ins->op](len, x[0], o); break;
            case PYTPP_EQN_BINARY:
                if (ins->op == PYTPP_EW_DIV && bc == 2 && len > 1) {
                    /* a row divided by its one value (softmax's normalisation): one division
                     * and a row of multiplications, as the hand-written kernels scale */
                    double rd = 1.0 / (c->cdt == PYTPP_EW_F64 ? *(const double *)x[1]
                                                            : (double)*(const float *)x[1]);
                    float rf = (float)rd;
                    kt->binary[PYTPP_EW_MUL](len, x[0],
                                             c->cdt == PYTPP_EW_F64 ? (const void *)&rd
                                                                    : (const void *)&rf, o, 2);
                } else {
                    kt->binary[ins->op](len, x[0], x[1], o, bc);
                }
                break;
            case PYTPP_EQN_TERNARY: kt->ternary[ins->op](len, x[0], x[1], x[2], o, bc); break;
            case PYTPP_EQN_REDUCE: {
                const double v = sc[0] ? reduce_col(ins->op, c->cdt == PYTPP_EW_F64
                                                                 ? *(const double *)x[0]
                                                                 : *(const float *)x[0], cols)
                                       : kt->reduce_row(cols, x[0], ins->op, (int)ins->k);
                if (c->cdt == PYTPP_EW_F64) *(double *)o = v;
                else *(float *)o = (float)v;
                break;
            }
            default: break;
            }
            if (root && !direct) {
                char *orow = (char *)c->out->p + (i * c->out->ld + j0) * oesz;
                if (ins->col) {   /* one value for the whole row */
                    char one[8];
                    kt->store_cvt[c->out->dtype](1, o, one);
                    for (int64_t k = 0; k < cols; ++k) memcpy(orow + k * oesz, one, (size_t)oesz);
                } else {
                    kt->store_cvt[c->out->dtype](cols, o, orow);
                }
            }
        }
        if (!root) w->tcol[ins->dst] = ins->col;
    }
}

/* Asks for the dense inputs' rows of a tile ahead (into L2): the tile before it computes while
 * they arrive, as the hand-written row kernels prefetch their next row. */
static void prefetch_tile(const eqn_ctx *c, int64_t i0, int64_t rows, int64_t j0, int64_t cols)
{
    for (int q = 0; q < c->p->ninputs; ++q) {
        const pytpp_ew_operand *o = &c->in[q];
        if (o->bcast != PYTPP_EW_BCAST_NONE) continue;
        const int64_t e = PYTPP_EW_ESZ[o->dtype];
        for (int64_t r = 0; r < rows; ++r) {
            const char *row = (const char *)o->p + ((i0 + r) * o->ld + j0) * e;
            for (int64_t b = 0; b < cols * e; b += 64) __builtin_prefetch(row + b, 0, 2);
        }
    }
}

static int run_strategy1(const eqn_ctx *c0, int nthreads)
{
    eqn_ctx c = *c0;
    const pytpp_eqn_prog *p = c.p;
    const int64_t cesz = PYTPP_EW_ESZ[c.cdt];
    /* reductions need whole rows; otherwise tiles of up to EQN_NB_MAX columns */
    c.nb = p->has_reduce ? c.n : imin(c.n, EQN_NB_MAX);
    const int64_t per_row = imax(1, p->ntemps) * c.nb * cesz;
    c.mb = imax(1, imin(imin(c.m, EQN_MB_MAX), EQN_L1_BYTES / per_row));
    if (p->has_matmul) c.mb = imin(c.m, imax(c.mb, 16));
    const int64_t tm = (c.m + c.mb - 1) / c.mb, tn = (c.n + c.nb - 1) / c.nb;
    const int64_t tiles = tm * tn;
    int nt = nthreads < 1 ? 1 : nthreads;
    if (c.m * c.n < PYTPP_EW_PAR_MIN_ELEMS && !p->has_matmul) nt = 1;
    if (nt > tiles) nt = (int)tiles;
    int err = 0;
#pragma omp parallel num_threads(nt) if (nt > 1) reduction(| : err)
    {
        eqn_tile w;
        const size_t tbytes = (size_t)(imax(1, p->ntemps) * TSTRIDE(&c) * cesz);
        const size_t rbytes = (size_t)(c.nb * 8 + 64);
        char *mem = (char *)malloc(tbytes + 4 * rbytes + 64);
        int *tcol = (int *)malloc(sizeof(int) * (size_t)(p->ntemps + 1));
        if (!mem || !tcol) {
            err |= 1;
        } else {
            w.temp = (char *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);
            for (int k = 0; k < 4; ++k) w.cv[k] = w.temp + tbytes + (size_t)k * rbytes;
            w.tcol = tcol;
#pragma omp for schedule(static)
            for (int64_t t = 0; t < tiles; ++t) {
                const int64_t ti = t / tn, tj = t % tn;
                const int64_t i0 = ti * c.mb, j0 = tj * c.nb;
                if (t + 1 < tiles && !p->has_matmul) {
                    const int64_t ni = (t + 1) / tn * c.mb, nj = (t + 1) % tn * c.nb;
                    prefetch_tile(&c, ni, imin(c.mb, c.m - ni), nj, imin(c.nb, c.n - nj));
                }
                run_tile(&c, &w, i0, imin(c.mb, c.m - i0), j0, imin(c.nb, c.n - j0));
            }
        }
        free(mem);
        free(tcol);
    }
    return err ? -1 : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Strategy 2                                                                                   */
/* ------------------------------------------------------------------------------------------ */
static int run_strategy2(const pytpp_eqn_kernels *ek, const pytpp_eqn_prog *p, int64_t m,
                         int64_t n, const pytpp_ew_operand *in0, const pytpp_ew_operand *out0,
                         int nthreads)
{
    pytpp_ew_operand in[32], out = *out0;
    for (int q = 0; q < p->ninputs; ++q) in[q] = in0[q];
    /* every operand dense with ld == n (or one scalar): one long row */
    int flat = m > 1 && out.ld == n;
    for (int q = 0; q < p->ninputs; ++q)
        flat &= (in[q].bcast == PYTPP_EW_BCAST_NONE && in[q].ld == n) ||
                in[q].bcast == PYTPP_EW_BCAST_SCALAR;
    if (flat) {
        n *= m;
        m = 1;
        for (int q = 0; q < p->ninputs; ++q) in[q].ld = n;
        out.ld = n;
    }
    const int stream = m * n * PYTPP_EW_ESZ[out.dtype] >= PYTPP_EW_STREAM_MIN_BYTES &&
                       n * PYTPP_EW_ESZ[out.dtype] >= PYTPP_EW_STREAM_MIN_ROW;
    int nt = nthreads < 1 ? 1 : nthreads;
    if (m * n < PYTPP_EW_PAR_MIN_ELEMS) nt = 1;
    if (nt <= 1) {
        ek->rows(p, in, &out, 0, m, 0, n, stream);
        return 0;
    }
#pragma omp parallel num_threads(nt)
    {
        int t = 0, T = 1;
#ifdef _OPENMP
        t = omp_get_thread_num();
        T = omp_get_num_threads();
#endif
        if (m >= T) {
            int64_t r0, len;
            pytpp_split(m, T, t, &r0, &len);
            if (len) ek->rows(p, in, &out, r0, r0 + len, 0, n, stream);
        } else {
            const int64_t units = (n + EQN_COL_UNIT - 1) / EQN_COL_UNIT;
            int64_t u0, ul;
            pytpp_split(units, T, t, &u0, &ul);
            const int64_t j0 = u0 * EQN_COL_UNIT, j1 = imin((u0 + ul) * EQN_COL_UNIT, n);
            if (j0 < j1) ek->rows(p, in, &out, 0, m, j0, j1, stream);
        }
    }
    return 0;
}

int pytpp_eqn_run(int isa, const pytpp_eqn_prog *p, int64_t m, int64_t n,
                  const pytpp_ew_operand *in, const pytpp_ew_operand *out, int strategy,
                  int nthreads)
{
    if (isa < 0 || isa >= PYTPP_NISA || !p || p->ninstr < 1 ||
        (p->dtype != PYTPP_EW_F32 && p->dtype != PYTPP_EW_F64))
        return -2;
    if (m <= 0 || n <= 0) return 0;
    const pytpp_ew_kernels *kt = pytpp_levels[isa].eltwise[p->dtype];
    const pytpp_eqn_kernels *ek = pytpp_eqn_table(isa, p->dtype);
    if (strategy == 2 && !p->has_reduce && !p->has_matmul && ek &&
        p->ntemps <= PYTPP_EQN_MAX_VTEMPS && p->ninputs <= 32)
        return run_strategy2(ek, p, m, n, in, out, nthreads);
    eqn_ctx c = {.p = p, .kt = kt, .gk = pytpp_levels[isa].brgemm[p->dtype], .in = in,
                 .out = out, .m = m, .n = n, .cdt = p->dtype};
    /* strategy 3 for the element-wise runs between reductions and products */
    eqn_seg *segs = NULL;
    int *seg_of = NULL;
    if (strategy != 1 && ek && p->ninputs <= 32) {
        segs = (eqn_seg *)malloc(sizeof(eqn_seg) * (size_t)p->ninstr);
        seg_of = (int *)malloc(sizeof(int) * (size_t)p->ninstr);
        if (segs && seg_of && plan_segments(p, segs, p->ninstr, seg_of) > 0) {
            c.ek = ek, c.segs = segs, c.seg_of = seg_of;
        }
    }
    const int err = run_strategy1(&c, nthreads);
    free(segs);
    free(seg_of);
    return err;
}
