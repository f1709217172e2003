/* Element-wise loop drivers: the 2D loops of paper Algorithm 1 around per-row kernels, with
 * broadcasts, storage-dtype conversion through L1-sized chunk buffers, bitmask rows and threads.
 * No ISA code here: every instruction-set detail sits behind the kernel table. */
#include <stdlib.h>
#include <string.h>
#include "pytpp/eltwise.h"
#include "pytpp/partition.h"
#include "pytpp/tuning.h"
#ifdef _OPENMP
#include <omp.h>
#endif

/* elements per conversion chunk (a multiple of 64 so bitmask chunks start at byte boundaries) */
#define CH 1024

static const int64_t ESZ[PYTPP_EW_NDT] = {8, 4, 2};


static inline int is_scalar(const pytpp_ew_operand *o)
{
    return o->bcast == PYTPP_EW_BCAST_COL || o->bcast == PYTPP_EW_BCAST_SCALAR;
}

/* Address of element (i, j) of an operand under its broadcast rule. */
static inline char *at(const pytpp_ew_operand *o, int64_t i, int64_t j)
{
    const int64_t e = ESZ[o->dtype];
    switch (o->bcast) {
    case PYTPP_EW_BCAST_ROW: return (char *)o->p + j * e;
    case PYTPP_EW_BCAST_COL: return (char *)o->p + i * o->ld * e;
    case PYTPP_EW_BCAST_SCALAR: return (char *)o->p;
    default: return (char *)o->p + (i * o->ld + j) * e;
    }
}

typedef struct scratch {
    double in[3][CH];
    double out[CH];
} scratch;

/* Rows [r0, r1), columns [c0, c1) of call c; stream: unary output beyond the caches. */
static void run_block(const pytpp_ew_kernels *kt, const pytpp_ew_call *c, int64_t r0, int64_t r1,
                      int64_t c0, int64_t c1, int stream, scratch *s)
{
    const int cdt = kt->dtype;
    const int64_t cesz = ESZ[cdt];
    int conv = c->out.dtype != cdt;
    for (int k = 0; k < c->nin; ++k) conv |= c->in[k].dtype != cdt;
    const int64_t chunk = conv ? CH : (c1 - c0);
    int bc = 0;
    for (int k = 0; k < c->nin; ++k) bc |= is_scalar(&c->in[k]) << k;
    stream = stream && (c1 - c0) * ESZ[c->out.dtype] >= PYTPP_EW_STREAM_MIN_ROW;
    /* bf16 -> bf16 unary ops with a fused kernel: no conversion buffers, whole rows */
    if (c->kind == PYTPP_EW_KIND_UNARY && cdt == PYTPP_EW_F32 && c->in[0].dtype == PYTPP_EW_BF16 &&
        c->out.dtype == PYTPP_EW_BF16 && !(bc & 1) && kt->unary_bf16[c->op]) {
        pytpp_ew_unary_fn f = stream && kt->unary_bf16_nt[c->op] ? kt->unary_bf16_nt[c->op]
                                                                 : kt->unary_bf16[c->op];
        for (int64_t i = r0; i < r1; ++i) f(c1 - c0, at(&c->in[0], i, c0), at(&c->out, i, c0));
        return;
    }
    pytpp_ew_unary_fn unary = c->kind == PYTPP_EW_KIND_UNARY ? kt->unary[c->op] : NULL;
    if (unary && stream && !conv && kt->unary_nt[c->op]) unary = kt->unary_nt[c->op];

    for (int64_t i = r0; i < r1; ++i) {
        for (int64_t j0 = c0; j0 < c1; j0 += chunk) {
            const int64_t len = imin(chunk, c1 - j0);
            const void *src[3] = {NULL, NULL, NULL};
            for (int k = 0; k < c->nin; ++k) {
                const pytpp_ew_operand *o = &c->in[k];
                const char *p = at(o, i, j0);
                if (o->dtype != cdt) {
                    kt->load_cvt[o->dtype](is_scalar(o) ? 1 : len, p, s->in[k]);
                    src[k] = s->in[k];
                } else {
                    src[k] = p;
                }
            }
            char *outp = at(&c->out, i, j0);
            void *dst = c->out.dtype != cdt ? (void *)s->out : (void *)outp;
            uint8_t *bits = c->bits ? c->bits + i * c->ldm + (j0 >> 3) : NULL;
            switch (c->kind) {
            case PYTPP_EW_KIND_UNARY:
                if (bc & 1) {   /* one value per row: compute once, replicate */
                    double one[1];
                    kt->unary[c->op](1, src[0], one);
                    for (int64_t j = 0; j < len; ++j) memcpy((char *)dst + j * cesz, one, (size_t)cesz);
                } else {
                    unary(len, src[0], dst);
                }
                break;
            case PYTPP_EW_KIND_BINARY:
                kt->binary[c->op](len, src[0], src[1], dst, bc);
                break;
            case PYTPP_EW_KIND_TERNARY:
                kt->ternary[c->op](len, src[0], src[1], src[2], dst, bc);
                break;
            case PYTPP_EW_KIND_CMP:
                kt->cmp(len, src[0], src[1], bits, bc, c->op);
                continue;   /* no element output */
            case PYTPP_EW_KIND_BLEND:
                kt->blend(len, src[0], src[1], bits, dst, bc);
                break;
            case PYTPP_EW_KIND_DROPOUT:
                kt->dropout(len, src[0], dst, bits, c->base + (uint64_t)(i * c->n + j0), c->seed,
                            c->thresh, c->scale);
                break;
            case PYTPP_EW_KIND_DROPOUT_INV:
                kt->dropout_inv(len, src[0], dst, bits, c->scale);
                break;
            case PYTPP_EW_KIND_RAND:
                kt->rand(len, dst, c->base + (uint64_t)(i * c->n + j0), c->seed);
                break;
            default:
                break;
            }
            if (dst != (void *)outp) kt->store_cvt[c->out.dtype](len, dst, outp);
        }
    }
}

/* Softmax: whole rows; rows needing a dtype conversion go through a per-thread row buffer, and
 * so do rows written by streaming stores (stream: output beyond the caches). */
static int run_softmax(const pytpp_ew_kernels *kt, const pytpp_ew_call *c, int64_t r0, int64_t r1,
                       int stream)
{
    const int cdt = kt->dtype;
    const int conv = c->in[0].dtype != cdt || c->out.dtype != cdt;
    stream = stream && !conv && kt->softmax_rows_nt && c->n * ESZ[cdt] >= PYTPP_EW_STREAM_MIN_ROW;
    char *buf = NULL;
    if (conv || stream) {
        buf = (char *)malloc(PYTPP_EW_SOFTMAX_BUF_BYTES(c->n, ESZ[cdt]));
        if (!buf) return -1;
    }
    if (stream && r1 > r0) {
        kt->softmax_rows_nt(r1 - r0, c->n, at(&c->in[0], r0, 0), c->in[0].ld, at(&c->out, r0, 0),
                            c->out.ld, buf, c->approx);
        r0 = r1;
    }
    for (int64_t i = r0; i < r1; ++i) {
        const char *x = at(&c->in[0], i, 0);
        char *y = at(&c->out, i, 0);
        if (!conv) {
            kt->softmax(c->n, x, y, c->approx);
        } else {
            char *xb = buf, *yb = buf + c->n * ESZ[cdt];
            kt->load_cvt[c->in[0].dtype](c->n, x, xb);
            kt->softmax(c->n, xb, yb, c->approx);
            kt->store_cvt[c->out.dtype](c->n, yb, y);
        }
    }
    free(buf);
    return 0;
}

int pytpp_ew_run(const pytpp_ew_kernels *kt, const pytpp_ew_call *call, int nthreads)
{
    pytpp_ew_call c = *call;
    if (c.m <= 0 || c.n <= 0) return 0;
    /* Flatten: every operand dense with ld == n (or a scalar) -> one long row. Bitmasks only
     * when their rows are packed (n a multiple of 8 and ldm == n / 8). */
    if (c.m > 1 && c.kind != PYTPP_EW_KIND_SOFTMAX) {
        int flat = c.out.bcast == PYTPP_EW_BCAST_NONE && c.out.ld == c.n;
        for (int k = 0; k < c.nin; ++k)
            flat &= (c.in[k].bcast == PYTPP_EW_BCAST_NONE && c.in[k].ld == c.n) ||
                    c.in[k].bcast == PYTPP_EW_BCAST_SCALAR;
        if (c.bits) flat &= (c.n % 8 == 0) && c.ldm * 8 == c.n;
        if (flat) {
            c.n *= c.m;
            c.m = 1;
            for (int k = 0; k < c.nin; ++k) c.in[k].ld = c.n;
            c.out.ld = c.n;
            c.ldm = (c.n + 7) / 8;
        }
    }
    const int64_t total = c.m * c.n;
    const int stream = (c.kind == PYTPP_EW_KIND_UNARY || c.kind == PYTPP_EW_KIND_SOFTMAX) &&
                       total * ESZ[c.out.dtype] >= PYTPP_EW_STREAM_MIN_BYTES;
    int nt = nthreads < 1 ? 1 : nthreads;
    if (total < PYTPP_EW_PAR_MIN_ELEMS) nt = 1;
    int err = 0;

    if (c.kind == PYTPP_EW_KIND_SOFTMAX) {
        if (nt > c.m) nt = (int)c.m;
        if (nt <= 1) return run_softmax(kt, &c, 0, c.m, stream);
#pragma omp parallel num_threads(nt) reduction(| : err)
        {
            int64_t r0, len;
            pytpp_thread_part(c.m, &r0, &len);
            err |= run_softmax(kt, &c, r0, r0 + len, stream);
        }
        return err ? -1 : 0;
    }

    if (nt <= 1) {
        scratch *s = (scratch *)malloc(sizeof(scratch));
        if (!s) return -1;
        run_block(kt, &c, 0, c.m, 0, c.n, stream, s);
        free(s);
        return 0;
    }
#pragma omp parallel num_threads(nt) reduction(| : err)
    {
        int t = 0, T = 1;
#ifdef _OPENMP
        t = omp_get_thread_num();
        T = omp_get_num_threads();
#endif
        scratch *s = (scratch *)malloc(sizeof(scratch));
        if (!s) {
            err |= 1;
        } else if (c.m >= T) {
            int64_t r0, len;
            pytpp_split(c.m, T, t, &r0, &len);
            run_block(kt, &c, r0, r0 + len, 0, c.n, stream, s);
        } else {
            /* few long rows: split columns in multiples of 64 (whole bitmask words, chunks) */
            const int64_t units = (c.n + 63) / 64;
            int64_t u0, ul;
            pytpp_split(units, T, t, &u0, &ul);
            const int64_t j0 = u0 * 64, j1 = imin((u0 + ul) * 64, c.n);
            if (j0 < j1) run_block(kt, &c, 0, c.m, j0, j1, stream, s);
        }
        free(s);
    }
    return err ? -1 : 0;
}

/* ------------------------------------------------------------------------------------------ */
int pytpp_ew_reduce(const pytpp_ew_kernels *kt, int64_t m, int64_t n, const void *x, int64_t ldx,
                    int x_dt, void *out, int out_dt, int axis, int op, int squared, int nthreads)
{
    const int cdt = kt->dtype;
    const int64_t cesz = ESZ[cdt], xesz = ESZ[x_dt];
    if (axis == 1) {   /* one value per row */
        int nt = (m * n < PYTPP_EW_PAR_MIN_ELEMS || nthreads < 1) ? 1 : nthreads;
        if (nt > m) nt = (int)(m > 0 ? m : 1);
        int err = 0;
#pragma omp parallel num_threads(nt) if (nt > 1) reduction(| : err)
        {
            int64_t r0, len;
            pytpp_thread_part(m, &r0, &len);
            char *buf = x_dt != cdt ? (char *)malloc((size_t)(n * cesz + 64)) : NULL;
            double one[1];
            if (x_dt != cdt && !buf) err |= 1;
            else for (int64_t i = r0; i < r0 + len; ++i) {
                const char *row = (const char *)x + i * ldx * xesz;
                if (buf) { kt->load_cvt[x_dt](n, row, buf); row = buf; }
                double r = kt->reduce_row(n, row, op, squared);
                if (cdt == PYTPP_EW_F32) { float f = (float)r; memcpy(one, &f, 4); }
                else one[0] = r;
                kt->store_cvt[out_dt](1, one, (char *)out + i * ESZ[out_dt]);
            }
            free(buf);
        }
        return err ? -1 : 0;
    }
    /* axis 0: acc[j] over rows; threads split the columns */
    int nt = (m * n < PYTPP_EW_PAR_MIN_ELEMS || nthreads < 1) ? 1 : nthreads;
    const int64_t units = (n + 63) / 64;
    if (nt > units) nt = (int)(units > 0 ? units : 1);
    int err = 0;
#pragma omp parallel num_threads(nt) if (nt > 1) reduction(| : err)
    {
        int64_t u0, ul;
        pytpp_thread_part(units, &u0, &ul);
        const int64_t j0 = u0 * 64, j1 = imin((u0 + ul) * 64, n);
        for (int64_t b0 = j0; b0 < j1; b0 += CH) {
            const int64_t len = imin(CH, j1 - b0);
            double acc[CH], xb[CH];
            /* first row initialises the accumulator (op of nothing is the first value) */
            if (m == 0) {
                for (int64_t j = 0; j < len; ++j) {
                    const double idv = op == PYTPP_EW_RED_SUM ? 0.0 : op == PYTPP_EW_RED_MUL ? 1.0 :
                                       op == PYTPP_EW_RED_MAX ? -__builtin_inf() : __builtin_inf();
                    if (cdt == PYTPP_EW_F32) ((float *)acc)[j] = (float)idv; else acc[j] = idv;
                }
            } else {
                const char *row = (const char *)x + b0 * xesz;
                kt->load_cvt[x_dt](len, row, acc);
                if (squared) kt->unary[PYTPP_EW_SQUARE](len, acc, acc);
                for (int64_t i = 1; i < m; ++i) {
                    const char *r = (const char *)x + (i * ldx + b0) * xesz;
                    const void *src = r;
                    if (x_dt != cdt) { kt->load_cvt[x_dt](len, r, xb); src = xb; }
                    kt->reduce_acc(len, src, acc, op, squared);
                }
            }
            kt->store_cvt[out_dt](len, acc, (char *)out + b0 * ESZ[out_dt]);
        }
    }
    return err ? -1 : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Transpose: blocks of TBI x TBJ, each through the ISA kernel; threads over blocks. */

static void transpose_scalar(int esz, int64_t m, int64_t n, const char *x, int64_t ldx, char *y,
                             int64_t ldy)
{
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
            memcpy(y + (j * ldy + i) * esz, x + (i * ldx + j) * esz, (size_t)esz);
}

static void transpose_u16(int64_t m, int64_t n, const uint16_t *x, int64_t ldx, uint16_t *y,
                          int64_t ldy)
{
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) y[j * ldy + i] = x[i * ldx + j];
}

int pytpp_ew_transpose(const pytpp_ew_kernels *kt32, const pytpp_ew_kernels *kt64, int esz,
                       int64_t m, int64_t n, const void *x, int64_t ldx, void *y, int64_t ldy,
                       int nthreads)
{
    if (m <= 0 || n <= 0) return 0;
    const pytpp_ew_kernels *kt = esz == 4 ? kt32 : esz == 8 ? kt64 : esz == 2 ? kt32 : NULL;
    pytpp_ew_transpose_fn fn = NULL, fn_nt = NULL;
    if (kt) {
        fn = esz == 2 ? kt->transpose16 : kt->transpose;
        fn_nt = esz == 2 ? kt->transpose16_nt : kt->transpose_nt;
    }
    /* Outputs beyond the caches: streaming stores (no read-for-ownership of y). The tile grid is
     * shifted by a0 rows of x so that output tile rows start on 64-byte lines; rows [0, a0) run
     * first through the plain kernel. */
    int64_t a0 = 0, TBI = 64, TBJ = 64;   /* in-cache: 64 x 64 blocks (x and y blocks in L1/L2) */
    int streaming = 0, staged = 0;
    if (fn_nt && m * n * esz >= PYTPP_EW_TRANSPOSE_STREAM_MIN_BYTES) {
        const uintptr_t off = (uintptr_t)y % 64;
        if (off % (uintptr_t)esz == 0) {
            a0 = (int64_t)((64 - off) % 64) / esz;
            if (a0 > m) a0 = m;
            if (a0) fn(a0, n, x, ldx, y, ldy);
            fn = fn_nt;
            streaming = 1;
            /* streaming: strips of 128 rows of x over all columns; the kernel moves blocks of
             * 4 output lines per output row inside (a multiple of its block for every size) */
            TBI = 128;
            TBJ = n;
            /* Rows a multiple of 4 KiB apart (a power-of-two matrix) share a few cache sets,
             * and the kernel's blocks read a line from each of 64 of them: where whole strips
             * fit PYTPP_EW_TRANSPOSE_STAGE_BYTES, each strip (64 rows, 128 of 16-bit elements:
             * a multiple of the kernel's block) is first copied row by row into a buffer of
             * the thread's, its rows read one after another */
            const int64_t rows = esz == 2 ? 128 : 64;
            if ((ldx * esz) % 4096 == 0 && rows * n * esz <= PYTPP_EW_TRANSPOSE_STAGE_BYTES) {
                staged = 1;
                TBI = rows;
            }
        }
    }
    /* In cache, output rows a multiple of 2 KiB apart fall in a few L1 sets (a 64 x 64 block's
     * 64 rows of y, 4 KiB apart, in 4 sets of 12 ways). Rows up to 8 KiB apart: each 64 x 64
     * tile goes through two buffers of the thread's whose rows are not so aligned (x's rows
     * copied in, the kernel from one to the other, y's rows copied out); farther apart: tiles
     * of fewer columns. One Zen 5 core, in-process A/B, us, 16-column tiles -> buffered tiles:
     * float32 (1024, 1024) 242-336 -> 225-246, (2048, 512) 279-286 -> 223-231, (1024, 1000)
     * 269-280 -> 229-237, (1024, 256) 70-72 -> 55-59, (2048, 256) 141 -> 107; float64 (512,
     * 1024) 258-268 -> 175-185; bfloat16 (1024, 2048) 291-387 -> 230-262. With y's rows 12-16
     * KiB apart ((3072, 384), (4096, 64)) the buffers lost 20-35%; those keep the 16-column
     * tiles (from 64 x 64: (3072, 384) 700 -> 350, (1024, 256) 157 -> 74 on this core). */
    const int aliased = !streaming && (ldy * esz) % 2048 == 0;
    const int buffered = aliased && ldy * esz <= 8192;
    if (aliased && !buffered) {
        TBJ = 16;
        TBI = (ldy * esz) % 4096 == 0 ? 64 : 128;
    }
    int64_t mr = m - a0;
    const char *xa = (const char *)x + a0 * ldx * esz;
    char *ya = (char *)y + a0 * esz;
    if (mr <= 0) return 0;
    /* In cache, blocks whose rows of x start on a line (the kernel's tiles then read whole
     * lines; see eltwise_transpose_rows.inc): where every row of x starts at one offset in a
     * line, its first c0 columns go first, a strip of their own */
    if (!streaming && fn && (ldx * esz) % 64 == 0 && (uintptr_t)xa % (uintptr_t)esz == 0) {
        const int64_t c0 = imin(n, (int64_t)((64 - (uintptr_t)xa % 64) % 64) / esz);
        if (c0) fn(mr, c0, xa, ldx, ya, ldy);
        n -= c0;
        xa += c0 * esz;
        ya += c0 * ldy * esz;
        if (n <= 0) return 0;
    }
    const int64_t tiles_i = (mr + TBI - 1) / TBI, tiles_j = (n + TBJ - 1) / TBJ;
    const int64_t ntiles = tiles_i * tiles_j;
    int nt = (m * n < PYTPP_EW_PAR_MIN_ELEMS || nthreads < 1) ? 1 : nthreads;
    if (nt > ntiles) nt = (int)ntiles;
    /* Buffers, per thread: x's rows in (staged strips, buffered tiles) and the tile's rows out
     * (buffered), each row whole lines and, with one line more, not a multiple of 4 KiB apart.
     * Without memory for them a thread moves its tiles from x to y directly. */
    const int64_t ldin = buffered ? 64 + 64 / esz : ((TBJ * esz + 63) / 64 * 64 + 64) / esz;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        const int64_t in_bytes = (staged || buffered) && fn ? TBI * ldin * esz : 0;
        char *xin = in_bytes ? aligned_alloc(64, (size_t)(in_bytes * (buffered ? 2 : 1))) : NULL;
        char *yout = xin && buffered ? xin + in_bytes : NULL;
#pragma omp for schedule(static)
        for (int64_t t = 0; t < ntiles; ++t) {
            const int64_t ti = t / tiles_j, tj = t % tiles_j;
            const int64_t i0 = ti * TBI, j0 = tj * TBJ;
            const int64_t bm = imin(TBI, mr - i0), bn = imin(TBJ, n - j0);
            const char *xs = xa + (i0 * ldx + j0) * esz;
            char *ys = ya + (j0 * ldy + i0) * esz;
            if (!fn) {
                if (esz == 2) transpose_u16(bm, bn, (const uint16_t *)xs, ldx, (uint16_t *)ys, ldy);
                else transpose_scalar(esz, bm, bn, xs, ldx, ys, ldy);
                continue;
            }
            int64_t ld = ldx;
            if (xin) {
                for (int64_t r = 0; r < bm; ++r)
                    memcpy(xin + r * ldin * esz, xs + r * ldx * esz, (size_t)(bn * esz));
                xs = xin, ld = ldin;
            }
            if (yout) {
                fn(bm, bn, xs, ld, yout, ldin);
                for (int64_t c = 0; c < bn; ++c)
                    memcpy(ys + c * ldy * esz, yout + c * ldin * esz, (size_t)(bm * esz));
            } else {
                fn(bm, bn, xs, ld, ys, ldy);
            }
        }
        free(xin);
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
void pytpp_ew_vnni(int esz, int alpha, int64_t k, int64_t n, const void *x, int64_t ldx, void *y)
{
    const int64_t kb = (k + alpha - 1) / alpha;
    const char *xs = (const char *)x;
    char *ys = (char *)y;
    for (int64_t b = 0; b < kb; ++b)
        for (int a = 0; a < alpha; ++a) {
            const int64_t row = b * alpha + a;
            char *dst = ys + (b * n * alpha + a) * esz;
            if (row < k) {
                const char *src = xs + row * ldx * esz;
                if (esz == 2)
                    for (int64_t j = 0; j < n; ++j)
                        ((uint16_t *)dst)[j * alpha] = ((const uint16_t *)src)[j];
                else
                    for (int64_t j = 0; j < n; ++j)
                        memcpy(dst + j * alpha * esz, src + j * esz, (size_t)esz);
            } else {
                for (int64_t j = 0; j < n; ++j) memset(dst + j * alpha * esz, 0, (size_t)esz);
            }
        }
}

void pytpp_ew_vnni_transpose(int esz, int alpha, int64_t k, int64_t n, const void *x, void *y)
{
    /* logical X[kk][j] = x[(kk / a) * N * a + j * a + kk % a] with N = n;
     * output Y = X^T in VNNI: y[(j / a) * K * a + kk * a + j % a], K = k padded to a multiple */
    const int64_t kp = (k + alpha - 1) / alpha * alpha, np_ = (n + alpha - 1) / alpha * alpha;
    const char *xs = (const char *)x;
    char *ys = (char *)y;
    for (int64_t j = 0; j < np_; ++j)
        for (int64_t kk = 0; kk < kp; ++kk) {
            char *dst = ys + ((j / alpha) * kp * alpha + kk * alpha + j % alpha) * esz;
            if (j < n) memcpy(dst, xs + ((kk / alpha) * n * alpha + j * alpha + kk % alpha) * esz,
                              (size_t)esz);
            else memset(dst, 0, (size_t)esz);
        }
}

void pytpp_ew_gather_rows(int esz, int64_t count, int64_t n, const void *x, int64_t ldx,
                          const int64_t *idx, void *y, int64_t ldy, int nthreads)
{
    int nt = (count * n < PYTPP_EW_PAR_MIN_ELEMS || nthreads < 1) ? 1 : nthreads;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t i = 0; i < count; ++i)
        memcpy((char *)y + i * ldy * esz, (const char *)x + idx[i] * ldx * esz, (size_t)(n * esz));
}

void pytpp_ew_scatter_rows(int esz, int64_t count, int64_t n, const void *x, int64_t ldx,
                           const int64_t *idx, void *y, int64_t ldy)
{
    /* sequential: with repeated indices the last row wins, as in numpy's y[idx] = x */
    for (int64_t i = 0; i < count; ++i)
        memcpy((char *)y + idx[i] * ldy * esz, (const char *)x + i * ldx * esz, (size_t)(n * esz));
}

void pytpp_ew_unpack_f32(int64_t n, const uint32_t *x, uint16_t *hi, uint16_t *lo)
{
    for (int64_t i = 0; i < n; ++i) {
        hi[i] = (uint16_t)(x[i] >> 16);
        lo[i] = (uint16_t)(x[i] & 0xffffu);
    }
}

void pytpp_ew_pack_f32(int64_t n, const uint16_t *hi, const uint16_t *lo, uint32_t *x)
{
    for (int64_t i = 0; i < n; ++i) x[i] = ((uint32_t)hi[i] << 16) | lo[i];
}
