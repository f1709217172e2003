/* The low-precision BRGEMM driver (gemm_lowp.h): Goto-style loops around the bf16 and 8-bit
 * packed-panel micro-kernels. Per batch element (or group of shallow elements folded along k)
 * and (k block, n block) the B block is packed once into NR-column panels (by the thread that
 * owns those columns, or shared by a team that splits the rows), then each thread packs its
 * own rows of A and runs the micro-kernels over the block; C elements are owned by one thread,
 * so nothing is written twice and no order of sums depends on the thread count. */
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "pytpp/gemm_lowp.h"
#include "pytpp/fpmode.h"
#include "pytpp/brd_tiles.h"

/* Bytes of one packed NR-column B panel at most: twice the L1 room left beside the A panels, C
 * and the stack (l1 - 16 KiB, at least half of L1), so the panel streams from L2 and deep k
 * runs as one block, a pass over C less. A 48 KiB L1 (one Zen 5 core, against the room alone:
 * u8 x s8 2048^3 18.8 -> 17.0 ms, 2048 x 4096 x 1024 18.8 -> 17.6, 128 x 8192 x 1024 2.52 ->
 * 2.35; bf16 1024 x 2048 x 1024 9.5 -> 9.1; 1024^3 2.26 -> 2.15 when the room went from 16 to
 * 32 KiB) and a 32 KiB one alike (one Zen 3 core, in-process A/B, medians of 20-30 rotating
 * calls, two runs: warm u8 x s8 / u8 x u8 32, 128 and 512 x 768 x 3072, 128 x 3072 x 768 and
 * 1024^3 2-19% faster, cold -1 to +5%; bf16 GEMM handles 128 x 3072 x 768 to 1024^3 0-8%).
 * Not measured on a Zen 4 (32 KiB L1). */
static int64_t lp_b_panel(const pytpp_lowp_kernels *ks)
{
    const int64_t l1 = ks->l1 > 0 ? ks->l1 : 32 * 1024;
    const int64_t room = l1 - 16 * 1024 > l1 / 2 ? l1 - 16 * 1024 : l1 / 2;
    return 2 * room;
}
#define LP_B_BLOCK (192 * 1024) /* bytes of a packed B block: L2-resident */
#define LP_MC_ROWS 96           /* rows of A packed at a time */
/* a thread's packed rows of A kept for all columns: up to 8 MiB (one Zen 5 core, 2048^3: a
 * column-major s8 A 2.42x -> 1.19x the row-major one's time, s8 x s8 19.7 -> 19.3 ms; 1024 x
 * 4096 x 4096 s8 x s8 41.1 -> 37.7 ms; 4 MiB packed such an A for every column block) */
#define LP_A_ONCE_BYTES (8 << 20)

typedef struct lp_plan {
    const pytpp_lowp_kernels *ks;
    const pytpp_pk_kernels *pk;         /* bf16 */
    const pytpp_lowp_desc *d;
    int64_t mr, nr, vl;
    int group;                  /* k values per packed step (kd counts steps) */
    int k_pad;                  /* k is padded to a multiple of this */
    int widened;                /* bf16 as fp32 panels, pairs swapped (kd counts k values) */
    int64_t psz;                /* bytes of one packed value */
    int64_t in_a, in_b;         /* bytes of one input element */
    int64_t kc, nc, mc;        /* k, columns and rows per block */
    int64_t kmax;               /* the deepest k block the B panel budget allows */
    int64_t fold;               /* batch elements whose k ranges make one block (1: none) */
    const int32_t *comp;        /* added to int32 C by the kernels at the last store (NULL: none,
                                 * or added in a pass at the end: with an epilogue, which sees C
                                 * before it) */
    int a_flip;                 /* an s8 A on quad kernels, packed as A + 128 */
    int b_flip;                 /* a u8 B on quad kernels, packed as B - 128 */
    const uint32_t *rsum;       /* flipped B: 128 x the row sums of the A_i, which the kernels
                                 * add at the last store of each tile (NULL: none, or added in a
                                 * pass at the end: the small-m path) */
    uint32_t cs_const;          /* added to comp with the column sums: the caller's colsum_scale
                                 * times 128 k for a flipped B (whose packed sums lack 128 k) */
    int a_once;                 /* a thread packs its rows of A once per k block, for all its
                                 * column blocks (else once per column block) */
    int32_t cs_scale;           /* s: s * (the column sums of the B_i) joins comp (the caller's
                                 * colsum_scale, and -128 for a flipped A; 0: none) */
    /* cs_scale: the column sums of the packed B panels and comp made of them, written column
     * by column as the last k block's panels are packed (so comp points at cs_comp) */
    int32_t *colsum, *cs_comp;
    const int32_t *comp_in;
} lp_plan;

/* sums[i] added to every column of row i of rows x cols of int32 C: 128 times A's row sums, what
 * a B run as B - 128 takes away (modulo 2^32) */
static void add_rows(char *c, int64_t ldc, int64_t rows, int64_t cols, const uint32_t *sums)
{
    for (int64_t i = 0; i < rows; ++i) {
        uint32_t *row = (uint32_t *)c + i * ldc;
        for (int64_t j = 0; j < cols; ++j) row[j] += sums[i];
    }
}

/* comp[j] added to every row of rows x cols of int32 C (the kernels add it at their store where
 * they can: a pass of its own over C took 5% of u8 x s8 1024^3 with a zero point, 135 us, in
 * L1 or not) */
static void add_comp(char *c, int64_t ldc, int64_t rows, int64_t cols, const int32_t *comp)
{
    for (int64_t i = 0; i < rows; ++i) {
        uint32_t *row = (uint32_t *)c + i * ldc;
        for (int64_t j = 0; j < cols; ++j) row[j] += (uint32_t)comp[j];
    }
}

static int64_t round_up(int64_t x, int64_t r) { return (x + r - 1) / r * r; }
static int64_t k_padded(const lp_plan *L, int64_t kk) { return round_up(kk, L->k_pad); }
static int64_t k_steps(const lp_plan *L, int64_t kk) { return k_padded(L, kk) / L->group; }

static float bf16_widen(uint16_t h)
{
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* bf16 panels: raw pairs (element (i, p) at (p/2)*2*R + 2*i + p%2) or, widened, fp32 rows in
 * pair-swapped k order (element (i, p) at (p^1)*R + i). */
static void pack_a_bf16(const lp_plan *L, const uint16_t *a, int64_t rsa, int64_t csa,
                        int64_t rows, int64_t kk, void *dst)
{
    const int64_t R = L->mr, kp = k_padded(L, kk);
    if (!L->widened && csa == 1) {
        /* rows of pairs: a pair is one 32-bit word, so the panel is a transpose of words (the
         * element-wise form below took 4x the kernels' time on 16 x 64^3) */
        uint32_t *d = (uint32_t *)dst;
        const int64_t full = kk / 2, steps = kp / 2;
        for (int64_t q = 0; q < full; ++q)
            for (int64_t i = 0; i < rows; ++i) memcpy(d + q * R + i, a + i * rsa + 2 * q, 4);
        for (int64_t q = full; q < steps; ++q)   /* an odd k: its last value, zero beside */
            for (int64_t i = 0; i < rows; ++i) d[q * R + i] = 2 * q < kk ? a[i * rsa + 2 * q] : 0;
        return;   /* rows past `rows` are never read: the kernel of that many rows runs */
    }
    memset(dst, 0, (size_t)(kp * R * L->psz));
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t p = 0; p < kk; ++p) {
            const uint16_t v = a[i * rsa + p * csa];
            if (L->widened) ((float *)dst)[(p ^ 1) * R + i] = bf16_widen(v);
            else ((uint16_t *)dst)[(p / 2) * 2 * R + 2 * i + (p & 1)] = v;
        }
}

static void pack_b_bf16(const lp_plan *L, const uint16_t *b, int64_t kk, int64_t cols, void *dst)
{
    const pytpp_lowp_desc *d = L->d;
    const int64_t R = L->nr, kp = k_padded(L, kk);
    const int vnni = d->g == 2 && d->rs_e == 1 && d->cs == 2, plain = d->g == 1 && d->cs == 1;
    if (!L->widened && (vnni || plain)) {
        /* whole pairs as 32-bit words: VNNI rows copied, two plain rows interleaved */
        uint32_t *out = (uint32_t *)dst;
        const int64_t full = kk / 2;
        if (cols < R) memset(dst, 0, (size_t)(kp * R * L->psz));   /* the panel's spare columns */
        for (int64_t q = 0; q < full; ++q, out += R) {
            if (vnni) {
                memcpy(out, b + q * d->rs_g, (size_t)cols * 4);
                continue;
            }
            const uint16_t *r0 = b + 2 * q * d->rs_g, *r1 = r0 + d->rs_g;
            for (int64_t j = 0; j < cols; ++j) out[j] = (uint32_t)r0[j] | (uint32_t)r1[j] << 16;
        }
        if (kk & 1) {   /* the last value of an odd k, zero beside */
            const uint16_t *r = vnni ? b + full * d->rs_g : b + 2 * full * d->rs_g;
            for (int64_t j = 0; j < cols; ++j) out[j] = r[j * (vnni ? 2 : 1)];
        }
        return;
    }
    memset(dst, 0, (size_t)(kp * R * L->psz));
    for (int64_t p = 0; p < kk; ++p) {
        const uint16_t *src = b + (p / d->g) * d->rs_g + (p % d->g) * d->rs_e;
        if (L->widened) {
            float *out = (float *)dst + (p ^ 1) * R;
            for (int64_t j = 0; j < cols; ++j) out[j] = bf16_widen(src[j * d->cs]);
        } else {
            uint16_t *out = (uint16_t *)dst + (p / 2) * 2 * R + (p & 1);
            for (int64_t j = 0; j < cols; ++j) out[2 * j] = src[j * d->cs];
        }
    }
}


static void pack_b(const lp_plan *L, const char *b, int64_t kk, int64_t cols, void *dst)
{
    const pytpp_lowp_desc *d = L->d;
    if (L->ks->i8) L->ks->i8->pack_b((const uint8_t *)b, d->g, d->rs_g, d->rs_e, d->cs, kk, cols,
                                     d->b_type == PYTPP_LP_S8, dst);
    else pack_b_bf16(L, (const uint16_t *)b, kk, cols, dst);
}

/* Columns [0, cols) of B into consecutive panels `panel` bytes apart: VNNI quads and plain rows
 * with unit column stride by the table's packer across many panels where it has one (a row's
 * bytes read front to back: u8 x s8 768 x 3072 B 74 -> 40 us against panel by panel, whose walk
 * down k fetches each row's line twice), anything else panel by panel. */
static void pack_b_panels(const lp_plan *L, const char *b, int64_t kk, int64_t cols, char *dst,
                          int64_t panel)
{
    const pytpp_lowp_desc *d = L->d;
    const pytpp_i8_kernels *i8 = L->ks->i8;
    const int quads = d->g == 4 && d->rs_e == 1 && d->cs == 4;
    const int rows = d->g == 1 && d->cs == 1;
    if (i8 && i8->pack_b_across && (quads || rows)) {
        i8->pack_b_across((const uint8_t *)b, d->rs_g, quads, kk, cols, dst, panel, L->b_flip,
                          d->b_type == PYTPP_LP_S8);
        return;
    }
    for (int64_t q = 0; q * L->nr < cols; ++q) {
        const int64_t cq = cols - q * L->nr < L->nr ? cols - q * L->nr : L->nr;
        pack_b(L, b + q * L->nr * d->cs * L->in_b, kk, cq, dst + q * panel);
    }
}

static const char *batch_ptr(const pytpp_batch *bt, const void *base, int64_t i, int which,
                             int64_t esz)
{
    const char *p = (const char *)base;
    switch (bt->mode) {
    case PYTPP_BATCH_STRIDE: return p + i * (which ? bt->stride_b : bt->stride_a) * esz;
    case PYTPP_BATCH_OFFSET: return p + (which ? bt->off_b[i] : bt->off_a[i]) * esz;
    default: return (const char *)(which ? bt->ptr_b[i] : bt->ptr_a[i]);
    }
}

/* Where block (k0, n0) of a pre-packed B starts: k blocks one after another, each the whole
 * width in NR-column panels of its padded depth (every block but the last is kc deep). */
static int64_t packed_offset(const lp_plan *L, int64_t k0, int64_t kk, int64_t n0)
{
    const int64_t npad = round_up(L->d->n, L->nr);
    return (k0 * npad + k_padded(L, kk) * n0) * L->psz;
}

/* comp of columns [j0, j0 + cols) made of the column sums `sums` (of the packed B_i). */
static void lp_cs_comp(const lp_plan *L, const int32_t *sums, int64_t j0, int64_t cols)
{
    const uint32_t s = (uint32_t)L->cs_scale;
    for (int64_t j = j0; j < j0 + cols; ++j)
        L->cs_comp[j] = (int32_t)((L->comp_in ? (uint32_t)L->comp_in[j] : 0u) +
                                  s * (uint32_t)sums[j] + L->cs_const);
}

/* The column sums of one packed B panel (columns [j0, j0 + cols) of C) added to L->colsum
 * (started when not `more`), and on the last k block comp made of them. */
static void lp_colsums(const lp_plan *L, const char *panel, int64_t kd, int64_t j0, int64_t cols,
                       int more, int last)
{
    L->ks->i8->colsum(kd, panel, L->colsum + j0, cols, more);
    if (last) lp_cs_comp(L, L->colsum, j0, cols);
}

/* 128 times the row sums of the A_i (over k and the batch), for a flipped B: a new array of m
 * values, or NULL without memory. */
static uint32_t *lp_row_sums(const lp_plan *L, const void *a, const pytpp_batch *bt)
{
    const pytpp_lowp_desc *d = L->d;
    uint32_t *sums = (uint32_t *)calloc((size_t)d->m, sizeof(uint32_t));
    if (!sums) return NULL;
    const int sgn = d->a_type == PYTPP_LP_S8;
    for (int64_t e = 0; e < bt->count; ++e) {
        const uint8_t *ae = (const uint8_t *)batch_ptr(bt, a, e, 0, 1);
        for (int64_t i = 0; i < d->m; ++i) {
            const uint8_t *row = ae + i * d->rsa;
            int64_t t = 0, p = 0;
            if (d->csa == 1) {
                /* 8 bytes a step in four 16-bit lanes (a lane gains at most 2 x 255 a step:
                 * emptied every 64 steps); signed bytes as unsigned + 128, corrected after */
                const uint64_t lo = 0x00FF00FF00FF00FFull, flip = sgn ? 0x8080808080808080ull : 0;
                while (p + 8 <= d->k) {
                    uint64_t acc = 0;
                    for (int64_t s = 0; s < 64 && p + 8 <= d->k; ++s, p += 8) {
                        uint64_t x;
                        memcpy(&x, row + p, 8);
                        x ^= flip;
                        acc += (x & lo) + ((x >> 8) & lo);
                    }
                    t += (int64_t)((acc & 0xFFFF) + ((acc >> 16) & 0xFFFF) +
                                   ((acc >> 32) & 0xFFFF) + (acc >> 48));
                }
                if (sgn) t -= 128 * p;
            }
            if (sgn)
                for (; p < d->k; ++p) t += (int8_t)row[p * d->csa];
            else
                for (; p < d->k; ++p) t += row[p * d->csa];
            sums[i] += 128u * (uint32_t)t;
        }
    }
    return sums;
}

/* The column sums of pre-packed B_i, every k block of every batch element, and comp made of
 * them (weights packed once, multiplied by a flipped A: one pass over the packed bytes). */
static void lp_packed_colsums(const lp_plan *L, const void *b, const pytpp_batch *bt)
{
    const pytpp_lowp_desc *d = L->d;
    for (int64_t bi = 0; bi < bt->count; ++bi)
        for (int64_t k0 = 0; k0 < d->k; k0 += L->kc) {
            const int64_t kk = d->k - k0 < L->kc ? d->k - k0 : L->kc;
            const char *blk = batch_ptr(bt, b, bi, 1, 1);
            for (int64_t j0 = 0; j0 < d->n; j0 += L->nr)
                lp_colsums(L, blk + packed_offset(L, k0, kk, j0), k_steps(L, kk), j0,
                           d->n - j0 < L->nr ? d->n - j0 : L->nr, bi > 0 || k0 > 0,
                           bi + 1 == bt->count && k0 + kk >= d->k);
        }
}

/* Whether the kernels read A's rows where they lie (lane kernels) or through the direct bf16
 * kernels, packing no A: raw-byte lanes on whole quads of an unflipped A (packing them was a
 * copy: 2.4% of a 1024^3 u8 x s8 product); bf16 pairs likewise (a packed B panel is VNNI pair
 * rows NR wide; the A panels' transpose took bf16 512^3 with VNNI B from 559 to 636 us). */
static int lp_a_direct(const lp_plan *L)
{
    const pytpp_lowp_desc *d = L->d;
    if (L->fold != 1 || d->csa != 1) return 0;
    if (L->ks->i8) return L->group == 4 && !L->a_flip && d->k % 4 == 0;
    return !L->widened && L->pk->brd[0][0][0] && d->k % 2 == 0;
}

/* One thread's part: rows of MR panels [p0, p1) and columns [j0, j1) (j0 a multiple of NR) of
 * C (4-byte elements, row stride ldc). shared: the team splits rows and packs each B block
 * together (barriers); else the thread owns its columns and packs its own B panels. */
static void lp_run(const lp_plan *L, const void *a, const void *b, char *c, int64_t ldc,
                   const pytpp_batch *bt, char *bbuf, char *abuf, int64_t p0, int64_t p1,
                   int64_t j0, int64_t j1, int shared, int t, int nt)
{
    const pytpp_lowp_desc *d = L->d;
    const int64_t m = d->m, k = d->k, MR = L->mr, NR = L->nr, VL = L->vl;
    const pytpp_i8_kernels *i8 = L->ks->i8;
    const int ftz = i8 ? i8->ftz : L->pk->ftz;
    const unsigned fp_mode = ftz ? pytpp_ftz_enter() : 0;
    const int sync = shared && nt > 1 && !d->b_packed;
    const int q_first = shared ? t : 0, q_step = shared ? nt : 1;
    /* With L->fold > 1 the k ranges of `nb` batch elements (one k block each) are packed one
     * after another into the same panels, so each register block of C runs over all of them in
     * one call instead of storing and reloading C after every element. */
    const int64_t fold = L->fold;
    const int a_direct = i8 && lp_a_direct(L), a_direct_bf16 = !i8 && lp_a_direct(L);
    for (int64_t bi = 0; bi < bt->count; bi += fold) {
        const int64_t nb = bt->count - bi < fold ? bt->count - bi : fold;
        for (int64_t k0 = 0; k0 < k; k0 += L->kc) {
            const int64_t kk = k - k0 < L->kc ? k - k0 : L->kc;
            const int64_t kp = k_padded(L, kk), kd = nb * k_steps(L, kk), kpt = nb * kp;
            const int accumulate = d->accumulate || bi > 0 || k0 > 0;
            const int last = bi + nb == bt->count && k0 + kk >= k;
            const int finish = d->epilogue && last;
            for (int64_t n0 = j0; n0 < j1; n0 += L->nc) {
                const int64_t nn = j1 - n0 < L->nc ? j1 - n0 : L->nc;
                const int64_t npan = (nn + NR - 1) / NR, bpanel = kpt * NR * L->psz;
                char *bblk = bbuf;
                if (d->b_packed) {
                    bblk = (char *)batch_ptr(bt, b, bi, 1, 1) + packed_offset(L, k0, kk, n0);
                } else {
                    for (int64_t e = 0; e < nb; ++e) {
                        const char *bk = batch_ptr(bt, b, bi + e, 1, L->in_b) +
                                         (k0 / d->g) * d->rs_g * L->in_b;
                        if (q_step == 1) {
                            pack_b_panels(L, bk + n0 * d->cs * L->in_b, kk, nn,
                                          bbuf + e * kp * NR * L->psz, bpanel);
                            continue;
                        }
                        for (int64_t q = q_first; q < npan; q += q_step) {
                            const int64_t cols = nn - q * NR < NR ? nn - q * NR : NR;
                            pack_b(L, bk + (n0 + q * NR) * d->cs * L->in_b, kk, cols,
                                   bbuf + q * bpanel + e * kp * NR * L->psz);
                        }
                    }
                    if (L->colsum)
                        for (int64_t q = q_first; q < npan; q += q_step)
                            lp_colsums(L, bblk + q * bpanel, kd, n0 + q * NR,
                                       nn - q * NR < NR ? nn - q * NR : NR, bi > 0 || k0 > 0,
                                       last);
#ifdef _OPENMP
                    if (sync) {
#pragma omp barrier
                    }
#endif
                }
                /* A: bf16 in MR-row panels; 8-bit as rows of packed lanes (kpt values each),
                 * from panel a_org on in abuf: the chunk's first, or with a_once the thread's
                 * first, packed at the first column block only */
                const int64_t apanel = kpt * MR * L->psz, mcp = L->mc / MR;
                for (int64_t pc = p0; pc < p1; pc += mcp) {
                    const int64_t pe = pc + mcp < p1 ? pc + mcp : p1;
                    const int64_t rows_all = (m < pe * MR ? m : pe * MR) - pc * MR;
                    const int64_t a_org = L->a_once ? p0 : pc;
                    for (int64_t e = 0; e < nb && (!L->a_once || n0 == j0); ++e) {
                        const char *ak = batch_ptr(bt, a, bi + e, 0, L->in_a) +
                                         k0 * d->csa * L->in_a;
                        if (a_direct || a_direct_bf16)
                            continue;
                        if (i8)
                            i8->pack_a((const uint8_t *)(ak + pc * MR * d->rsa * L->in_a), d->rsa,
                                       d->csa, rows_all, kk, kpt, kp, d->a_type == PYTPP_LP_S8,
                                       abuf + (pc - a_org) * apanel + e * kp * L->psz);
                        else
                            for (int64_t r = pc; r < pe; ++r) {
                                const int64_t rows = m - r * MR < MR ? m - r * MR : MR;
                                pack_a_bf16(L, (const uint16_t *)(ak + r * MR * d->rsa * L->in_a),
                                            d->rsa, d->csa, rows, kk,
                                            abuf + (r - a_org) * apanel + e * kp * MR * L->psz);
                            }
                    }
                    for (int64_t q = 0; q < npan; ++q) {
                        const int64_t cols = nn - q * NR < NR ? nn - q * NR : NR;
                        const int64_t nv = (cols + VL - 1) / VL, tail = cols - (nv - 1) * VL;
                        const int masked = tail != VL;
                        char *cq = c + (n0 + q * NR) * 4;
                        /* a pre-packed B (weights) streams from memory, where the hardware
                         * prefetchers stop at each 4 KiB page: the next panel is fetched into L2
                         * in slices, one per register block of this one (cold weights, 10
                         * layers of 32 x 768 x 3072 in turn: 1080 -> 1013 us a layer) */
                        const char *next_b = d->b_packed && q + 1 < npan
                                                 ? bblk + (q + 1) * bpanel : NULL;
                        /* the compensation, added by the kernels at the last k block's store */
                        const int32_t *cb = last && L->comp ? L->comp + n0 + q * NR : NULL;
                        for (int64_t r = pc; r < pe; ++r) {
                            const int64_t rows = m - r * MR < MR ? m - r * MR : MR;
                            if (next_b) {
                                const int64_t l0 = bpanel * (r - pc) / (pe - pc),
                                              l1 = bpanel * (r - pc + 1) / (pe - pc);
                                for (int64_t o = l0 & ~(int64_t)63; o < l1; o += 64)
                                    __builtin_prefetch(next_b + o, 0, 1);
                            }
                            if (accumulate && r + 1 < pe)   /* the next tile's C rows */
                                for (int64_t i = (r + 1) * MR; i < (r + 2) * MR && i < m; ++i)
                                    __builtin_prefetch(cq + i * ldc * 4, 1);
                            /* a flipped B's row term, added by the kernels at the last store */
                            const int32_t *rb = last && L->rsum
                                                    ? (const int32_t *)L->rsum + r * MR : NULL;
                            if (a_direct)
                                i8->ukr[nv - 1][rows - 1][masked](
                                    kd, batch_ptr(bt, a, bi, 0, 1) + k0 + r * MR * d->rsa,
                                    d->rsa, bblk + q * bpanel,
                                    (int32_t *)(cq + r * MR * ldc * 4), ldc, accumulate, tail,
                                    cb, rb);
                            else if (i8)
                                i8->ukr[nv - 1][rows - 1][masked](
                                    kd, abuf + (r - a_org) * apanel, kpt, bblk + q * bpanel,
                                    (int32_t *)(cq + r * MR * ldc * 4), ldc, accumulate, tail,
                                    cb, rb);
                            else if (a_direct_bf16) {
                                const char *ar = batch_ptr(bt, a, bi, 0, 2) +
                                                 (k0 + r * MR * d->rsa) * 2;
                                const char *bp = bblk + q * bpanel;
                                L->pk->brd[nv - 1][rows - 1][masked](
                                    kd, 1, &ar, 0, d->rsa * 2, &bp, 0, 4 * NR,
                                    cq + r * MR * ldc * 4, ldc, accumulate, tail, NULL);
                            } else
                                L->pk->ukr[nv - 1][rows - 1][masked](
                                    kd, abuf + (r - a_org) * apanel, bblk + q * bpanel,
                                    cq + r * MR * ldc * 4, ldc, accumulate, tail);
                        }
                    }
                    if (finish)     /* this block of rows x columns is done: still in L2 */
                        d->epilogue(d->epi_ctx, c + (pc * MR * ldc + n0) * 4, ldc, pc * MR,
                                    rows_all, n0, nn);
                }
#ifdef _OPENMP
                if (sync) {
#pragma omp barrier
                }
#endif
            }
        }
    }
    if (ftz) pytpp_ftz_leave(fp_mode);
}

/* Whether the small-m kernel reads this call's B as it lies: 8-bit, m <= its rows, B plain
 * rows with unit column stride or VNNI quads (pytpp_i8_gemv_fn). */
static int lp_gemv_fits(const lp_plan *L)
{
    const pytpp_lowp_desc *d = L->d;
    const pytpp_i8_kernels *i8 = L->ks->i8;
    if (!i8 || !i8->gemv || d->b_packed || d->m > PYTPP_I8_GEMV_MR || L->cs_scale || L->cs_const)
        return 0;
    return (d->g == 1 && d->cs == 1) || (d->g == 4 && d->rs_e == 1 && d->cs == 4);
}

/* One thread's columns [j0, j1) of a small-m product on unpacked B: A packed once per k block
 * (k padded to whole quads), B read once by the small-m kernel; the columns past the last
 * whole vector go through a packed panel and the masked micro-kernel. */
static void lp_run_gemv(const lp_plan *L, const void *a, const void *b, int32_t *c, int64_t ldc,
                        const pytpp_batch *bt, char *bbuf, char *abuf, int64_t j0, int64_t j1)
{
    const pytpp_lowp_desc *d = L->d;
    const pytpp_i8_kernels *i8 = L->ks->i8;
    const int64_t m = d->m, k = d->k, VL = L->vl;
    const int vnni = d->g == 4;
    const int64_t full = (j1 - j0) / VL * VL, rest = (j1 - j0) - full;
    for (int64_t bi = 0; bi < bt->count; ++bi) {
        const char *ai = batch_ptr(bt, a, bi, 0, 1);
        const char *bib = batch_ptr(bt, b, bi, 1, 1);
        for (int64_t k0 = 0; k0 < k; k0 += L->kc) {
            const int64_t kk = k - k0 < L->kc ? k - k0 : L->kc;
            const int64_t lda = round_up(kk, 4);
            const int accumulate = d->accumulate || bi > 0 || k0 > 0;
            const char *bk = bib + (k0 / d->g) * d->rs_g;
            i8->pack_a((const uint8_t *)(ai + k0 * d->csa), d->rsa, d->csa, m, kk, lda, lda,
                       d->a_type == PYTPP_LP_S8, abuf);
            if (full)
                i8->gemv(m, kk, abuf, lda, (const uint8_t *)bk + j0 * d->cs, d->rs_g, vnni,
                         d->b_type == PYTPP_LP_S8, c + j0, ldc, full, accumulate);
            if (rest) {
                pack_b(L, bk + (j0 + full) * d->cs, kk, rest, bbuf);
                i8->ukr[0][m - 1][1](k_steps(L, kk), abuf, lda, bbuf, c + j0 + full, ldc,
                                     accumulate, rest, NULL, NULL);
            }
        }
    }
    if (L->comp && j1 > j0 && bt->count > 0)
        add_comp((char *)(c + j0), ldc, m, j1 - j0, L->comp + j0);
    if (d->epilogue && j1 > j0 && bt->count > 0)
        d->epilogue(d->epi_ctx, c + j0, ldc, 0, m, j0, j1 - j0);
}

/* The direct kernels of a call, or NULL for the packed path: the family's 32-bit lane is one
 * word of the caller's operands (bf16 pairs; u8 x s8 quads), A's rows have unit column stride
 * and whole words (k a multiple of the word), B is in the family's VNNI layout, and A and B of
 * the whole batch fit in L2 together (in-cache BRGEMM: packing both per call took 55-60% of the
 * time of 16 x 64^3; a bigger operand is read more often than packing it once costs). */
#define LP_DIRECT_BYTES (512 * 1024)
static const pytpp_brd_table *lp_direct(const lp_plan *L, const pytpp_batch *bt)
{
    const pytpp_lowp_desc *d = L->d;
    const pytpp_brd_table *t = L->ks->i8 ? &L->ks->i8->brd : L->widened ? NULL : &L->pk->brd;
    const int64_t w = L->ks->i8 ? 4 : 2;   /* elements per word */
    if (!t || !(*t)[0][0][0] || (L->ks->i8 && L->group != 4)) return NULL;
    if (d->b_packed || d->csa != 1 || d->k % w || d->g != w || d->rs_e != 1 || d->cs != w ||
        L->cs_scale || L->a_flip || L->b_flip)
        return NULL;
    const double bytes = (double)bt->count * (double)d->k * (double)(d->m + d->n) * L->in_a;
    return bytes <= LP_DIRECT_BYTES ? t : NULL;
}

/* The main register-block height of the direct kernels of a call. */
static int64_t lp_direct_mr(const lp_plan *L)
{
    return L->ks->i8 ? L->ks->i8->mr_main : L->pk->mr_main;
}

/* One thread's part of a direct call over nb batch elements (ap, bp: where each A and B
 * starts): column panels [q0, q1) x row blocks [r0, r1) of C (4-byte elements, row stride ldc;
 * brd_tiles.h); the epilogue runs on each finished column panel (all rows). */
static void lp_run_direct(const lp_plan *L, const pytpp_brd_table *t, int64_t nb,
                          const char *const *ap, const char *const *bp, char *c, int64_t ldc,
                          int64_t q0, int64_t q1, int64_t r0, int64_t r1)
{
    const pytpp_lowp_desc *d = L->d;
    const int64_t NR = L->nr, w = L->ks->i8 ? 4 : 2, mr = lp_direct_mr(L);
    const int64_t blocks = pytpp_brd_blocks(d->m, mr);
    const int ftz = L->ks->i8 ? L->ks->i8->ftz : L->pk->ftz;
    const unsigned fp_mode = ftz ? pytpp_ftz_enter() : 0;
    for (int64_t q = q0; q < q1; ++q) {
        const int64_t j0 = q * NR;
        pytpp_brd_panel(t, mr, NR, L->vl, d->m, d->n, j0, r0, r1, d->k / w, nb, ap,
                        d->rsa * L->in_a, bp, w * L->in_b, d->rs_g * L->in_b, c, ldc,
                        d->accumulate, L->comp ? L->comp + j0 : NULL);
        if (d->epilogue && r0 == 0 && r1 == blocks)
            d->epilogue(d->epi_ctx, c + j0 * 4, ldc, 0, d->m, j0, d->n - j0 < NR ? d->n - j0 : NR);
    }
    if (ftz) pytpp_ftz_leave(fp_mode);
}

/* A direct call (lp_direct): the threads split the column panels, or the row blocks when there
 * are fewer panels than threads (then the epilogue runs once all rows are done). */
static int lp_direct_brgemm(const lp_plan *L, const pytpp_brd_table *t, const void *a,
                            const void *b, char *c, int64_t ldc, const pytpp_batch *bt,
                            int nthreads)
{
    const pytpp_lowp_desc *d = L->d;
    const int64_t nb = bt->count;
    const char *small[2 * 64];      /* (an in-cache batch is rarely longer: no heap then) */
    const char **ptrs = nb <= 64 ? small : (const char **)malloc((size_t)(2 * nb) * sizeof(char *));
    if (!ptrs) return -1;
    for (int64_t e = 0; e < nb; ++e) {
        ptrs[e] = batch_ptr(bt, a, e, 0, L->in_a);
        ptrs[nb + e] = batch_ptr(bt, b, e, 1, L->in_b);
    }
    const int64_t npan = (d->n + L->nr - 1) / L->nr;
    const int64_t rblocks = pytpp_brd_blocks(d->m, lp_direct_mr(L));
    const double work = (double)d->m * (double)d->n * (double)d->k * (double)nb;
    int nt = nthreads < 1 || work < 1e6 ? 1 : nthreads;
    const int by_cols = npan >= nt;
    if (nt > (by_cols ? npan : rblocks)) nt = (int)(by_cols ? npan : rblocks);
    if (nt <= 1) {
        lp_run_direct(L, t, nb, ptrs, ptrs + nb, c, ldc, 0, npan, 0, rblocks);
    } else {
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
        {
            const int64_t th = omp_get_thread_num(), team = omp_get_num_threads();
            const int64_t parts = by_cols ? npan : rblocks;
            const int64_t p0 = parts * th / team, p1 = parts * (th + 1) / team;
            if (by_cols) lp_run_direct(L, t, nb, ptrs, ptrs + nb, c, ldc, p0, p1, 0, rblocks);
            else lp_run_direct(L, t, nb, ptrs, ptrs + nb, c, ldc, 0, npan, p0, p1);
        }
#else
        lp_run_direct(L, t, nb, ptrs, ptrs + nb, c, ldc, 0, npan, 0, rblocks);
#endif
        if (!by_cols && d->epilogue) d->epilogue(d->epi_ctx, c, ldc, 0, d->m, 0, d->n);
    }
    if (ptrs != small) free(ptrs);
    return 0;
}

static void bf16_round_rows(const float *src, uint16_t *dst, int64_t m, int64_t n, int64_t ldc)
{
    pytpp_cvt_f32_bf16(src, dst, m, n, n, ldc, 1);
}

static int lp_plan_init(lp_plan *P, const pytpp_lowp_kernels *ks, const pytpp_lowp_desc *d)
{
    lp_plan L = {.ks = ks, .d = d};
    if (ks->i8) {
        L.a_flip = ks->i8->group == 4 && d->a_type == PYTPP_LP_S8;
        L.b_flip = ks->i8->group == 4 && d->b_type != PYTPP_LP_S8;
        if ((L.a_flip || L.b_flip) && !ks->i8->colsum) return -1;
        L.cs_scale = (int32_t)((uint32_t)d->colsum_scale - (L.a_flip ? 128u : 0u));
        L.group = ks->i8->group;
        L.k_pad = ks->i8->k_pad;
        L.psz = ks->i8->packed_size;
        L.in_a = L.in_b = ks->i8->in_size;
        L.mr = ks->i8->mr_main;
        L.vl = ks->i8->vl;
        L.nr = ks->i8->nv_main * L.vl;
    } else {
        L.pk = ks->bf16;
        L.widened = L.pk->bf16_widened;
        L.group = L.widened ? 1 : 2;
        L.k_pad = 2;
        L.psz = L.widened ? 4 : 2;
        L.in_a = L.in_b = 2;
        L.mr = L.pk->mr_main;
        L.vl = L.pk->vl;
        L.nr = L.pk->nv_main * L.vl;
    }
    /* k blocks as deep as an L1-sized B panel allows (fewer passes over C), of even depth: k =
     * 768 on a 512-deep budget runs as 2 x 384, not 512 + 256 (measured on AVX2, u8 x s8: 2-9%
     * faster than fixed 256-deep blocks at k = 768-1024) */
    const int64_t kmax = lp_b_panel(ks) / (L.nr * L.psz) / 4 * 4;
    const int64_t nblk = d->k > kmax ? (d->k + kmax - 1) / kmax : 1;
    L.kmax = kmax;
    L.fold = 1;
    L.kc = round_up((d->k + nblk - 1) / nblk, 4);
    if (L.kc < 4) L.kc = 4;
    L.nc = LP_B_BLOCK / (L.kc * L.psz) / L.nr * L.nr;
    if (L.nc < L.nr) L.nc = L.nr;
    /* Register-block height: the main one or up to two rows less, whichever covers m with the
     * fewest row slots counting half a row of overhead per block (a short last block runs its
     * few accumulator chains latency-bound: u8 x s8 m = 32 ran 5 blocks of 6 and one of 2;
     * now 8 of 4). Large m keeps the main height. Lane kernels only: their A is rows of lanes
     * whatever the height; the bf16 panel kernels read A panels of their own height. */
    if (ks->i8) {
        const int64_t m = d->m > 0 ? d->m : 1;
        int64_t best = L.mr;
        double best_cost = 1e300;
        for (int64_t mr = L.mr; mr >= 1 && mr >= L.mr - 2; --mr) {
            const double cost = (double)((m + mr - 1) / mr) * ((double)mr + 0.5);
            if (cost < best_cost) best_cost = cost, best = mr;
        }
        L.mr = best;
    }
    L.mc = LP_MC_ROWS / L.mr * L.mr;
    if (L.mc < L.mr) L.mc = L.mr;

    *P = L;
    return 0;
}

int64_t pytpp_lowp_packed_bytes(const pytpp_lowp_kernels *ks, int64_t k, int64_t n)
{
    pytpp_lowp_desc d = {.m = 1, .n = n, .k = k, .a_type = PYTPP_LP_U8, .b_type = PYTPP_LP_S8};
    if (!ks->i8) d.a_type = d.b_type = PYTPP_LP_BF16;
    lp_plan L;
    if (lp_plan_init(&L, ks, &d)) return -1;
    const int64_t last = k % L.kc ? k % L.kc : L.kc;
    return packed_offset(&L, k - last, last, round_up(n, L.nr));
}

void pytpp_lowp_pack_b(const pytpp_lowp_kernels *ks, const pytpp_lowp_desc *d, const void *b,
                       void *dst)
{
    lp_plan L;
    if (lp_plan_init(&L, ks, d)) return;
    /* a block of the runs' columns at a time: packed across all n, each quad row's stores went
     * to every panel of B (768 x 3072 u8 x s8: 244 -> 54 us) */
    for (int64_t k0 = 0; k0 < d->k; k0 += L.kc) {
        const int64_t kk = d->k - k0 < L.kc ? d->k - k0 : L.kc;
        const char *bk = (const char *)b + (k0 / d->g) * d->rs_g * L.in_b;
        for (int64_t n0 = 0; n0 < d->n; n0 += L.nc)
            pack_b_panels(&L, bk + n0 * d->cs * L.in_b, kk, d->n - n0 < L.nc ? d->n - n0 : L.nc,
                          (char *)dst + packed_offset(&L, k0, kk, n0),
                          k_padded(&L, kk) * L.nr * L.psz);
    }
}

int pytpp_lowp_packed_colsums(const pytpp_lowp_kernels *ks, int64_t k, int64_t n,
                              const void *packed, int32_t *out)
{
    pytpp_lowp_desc d = {.m = 1, .n = n, .k = k, .a_type = PYTPP_LP_U8, .b_type = PYTPP_LP_S8};
    lp_plan L;
    if (!ks->i8 || !ks->i8->colsum || lp_plan_init(&L, ks, &d)) return -2;
    for (int64_t j = 0; j < n; ++j) out[j] = 0;
    for (int64_t k0 = 0; k0 < k; k0 += L.kc) {
        const int64_t kk = k - k0 < L.kc ? k - k0 : L.kc;
        for (int64_t j0 = 0; j0 < n; j0 += L.nr)
            ks->i8->colsum(k_steps(&L, kk), (const char *)packed + packed_offset(&L, k0, kk, j0),
                           out + j0, n - j0 < L.nr ? n - j0 : L.nr, 1);
    }
    return 0;
}

int pytpp_lowp_brgemm(const pytpp_lowp_kernels *ks, const pytpp_lowp_desc *d, const void *a,
                      const void *b, void *c, const pytpp_batch *batch, const int32_t *comp,
                      int nthreads)
{
    const int64_t m = d->m, n = d->n;
    if (m == 0 || n == 0) return 0;
    lp_plan L;
    if (lp_plan_init(&L, ks, d)) return -2;
    if (d->colsum_scale && (d->b_packed || d->epilogue)) return -2;
    if (L.b_flip && d->epilogue) return -2;
    L.cs_const = L.b_flip ? 128u * (uint32_t)(d->k * batch->count) * (uint32_t)d->colsum_scale
                          : 0u;
    /* A batch of shallow products (k within one block) folds as many elements into a block as
     * the B panel budget holds: 16 x 64^3 u8 x s8 ran 11 x 4 register blocks per element, each
     * loading and storing C around 32 k steps. */
    if (!d->b_packed && batch->count > 1 && d->k <= L.kmax) {
        const int64_t kpe = k_padded(&L, d->k);
        const int64_t f = L.kmax / kpe < batch->count ? L.kmax / kpe : batch->count;
        if (f > 1) {
            L.fold = f;
            L.nc = LP_B_BLOCK / (f * kpe * L.psz) / L.nr * L.nr;
            if (L.nc < L.nr) L.nc = L.nr;
        }
    }
    /* C in 4-byte elements: the caller's, or fp32 scratch rounded to bf16 at the end */
    const int bf16_out = d->c_type == PYTPP_LP_BF16;
    char *cw = (char *)c;
    int64_t ldc = d->ldc;
    float *scratch = NULL;
    if (bf16_out) {
        scratch = (float *)malloc((size_t)(m * n) * sizeof(float));
        if (!scratch) return -1;
        if (d->accumulate)
            for (int64_t i = 0; i < m; ++i)
                for (int64_t j = 0; j < n; ++j)
                    scratch[i * n + j] = bf16_widen(((const uint16_t *)c)[i * d->ldc + j]);
        cw = (char *)scratch;
        ldc = n;
    }
    int err = 0;
    const pytpp_brd_table *direct;
    uint32_t *rsum = NULL;
    if (L.b_flip && d->k > 0 && batch->count > 0 && !(rsum = lp_row_sums(&L, a, batch))) {
        free(scratch);
        return -1;
    }
    /* the runs add comp to each finished tile; an empty sum, or a call with an epilogue (which
     * sees C before comp), gets the pass at the end */
    const int comp_at_end = comp && (d->epilogue || d->k == 0 || batch->count == 0);
    if (comp && d->c_type == PYTPP_LP_I32 && !comp_at_end) L.comp = comp;
    if (d->k == 0 || batch->count == 0) {
        if (!d->accumulate)
            for (int64_t i = 0; i < m; ++i) memset(cw + i * ldc * 4, 0, (size_t)n * 4);
        if (d->epilogue) d->epilogue(d->epi_ctx, cw, ldc, 0, m, 0, n);
    } else if ((direct = lp_direct(&L, batch)) != NULL) {
        err = lp_direct_brgemm(&L, direct, a, b, cw, ldc, batch, nthreads);
    } else {
        int64_t kp = round_up(L.kc < d->k ? L.kc : d->k, 4);  /* >= any k_pad */
        if (kp < L.fold * k_padded(&L, d->k)) kp = L.fold * k_padded(&L, d->k);
        const int64_t ncap = L.nc < round_up(n, L.nr) ? L.nc : round_up(n, L.nr);
        /* (a pre-packed B needs no buffer of its own) */
        const size_t bbytes = d->b_packed ? 0 : (size_t)round_up(kp * ncap * L.psz, 64);
        const int64_t panels = (m + L.mr - 1) / L.mr, npan_n = (n + L.nr - 1) / L.nr;
        const int gemv = lp_gemv_fits(&L);
        if (!gemv) L.rsum = rsum;     /* lp_run adds it tile by tile */
        int nt = nthreads < 1 ? 1 : nthreads;
        /* The threads split the columns, each packing its own B panels into its own L2 with
         * no barrier, wherever each gets two column panels or more: a GEMV or a few rows, and
         * any B packed per call (u8 x s8, 2 threads: 32 x 768 x 3072 2.4 ms -> 0.7 ms, 1024^3
         * 8.1 -> 7.9 ms, BRGEMM 16 x 64^3 78 -> 58 us; the row split waits at two barriers per
         * block for a thread the OS may have parked). A pre-packed B (weights) splits by rows
         * past one row block. Not worth a team below ~1M products. */
        const int by_cols = gemv || panels < nt ||
                            (npan_n >= 2 * nt && (!d->b_packed || m <= LP_MC_ROWS));
        if (by_cols) {
            const double work = (double)m * (double)n * (double)d->k * (double)batch->count;
            if (nt > npan_n) nt = (int)npan_n;
            if (work < 1e6) nt = 1;
        } else if (nt > panels) {
            nt = (int)panels;
        }
        /* A packed once per k block for all of a thread's column blocks where its rows fit in
         * LP_A_ONCE_BYTES (a flipped or strided A was packed again for every NC columns) */
        const int64_t pan_t = by_cols ? panels : (panels + nt - 1) / nt;
        const int64_t cols_t = by_cols ? (npan_n + nt - 1) / nt * L.nr : n;
        const size_t a_all = (size_t)round_up(pan_t * L.mr * kp * L.psz, 64);
        L.a_once = !gemv && !lp_a_direct(&L) && cols_t > L.nc && a_all <= LP_A_ONCE_BYTES;
        const size_t abytes = L.a_once ? a_all : (size_t)round_up(kp * L.mc * L.psz, 64);
        const size_t per_thread = by_cols ? bbytes + abytes : abytes;
        char *buf = (char *)aligned_alloc(64, (by_cols ? 0 : bbytes) + (size_t)nt * per_thread);
        int32_t *cs = NULL;
        if (buf && (L.cs_scale || L.cs_const) && L.ks->i8 && L.ks->i8->colsum &&
            d->c_type == PYTPP_LP_I32) {
            cs = (int32_t *)malloc((size_t)(2 * n) * sizeof(int32_t));  /* sums, then comp */
            if (cs) {
                L.colsum = cs;
                L.cs_comp = cs + n;
                L.comp_in = comp_at_end ? NULL : comp;  /* (an epilogue sees C before comp) */
                L.comp = L.cs_comp;
                if (d->b_packed && d->b_colsum && batch->count == 1)
                    lp_cs_comp(&L, d->b_colsum, 0, n);
                else if (d->b_packed)
                    lp_packed_colsums(&L, b, batch);
            } else {
                err = -1;
            }
        }
        if (!buf || err) {
            err = -1;
        } else if (nt == 1) {
            if (gemv) lp_run_gemv(&L, a, b, (int32_t *)cw, ldc, batch, buf, buf + bbytes, 0, n);
            else lp_run(&L, a, b, cw, ldc, batch, buf, buf + bbytes, 0, panels, 0, n, 1, 0, 1);
        } else {
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
            {
                const int t = omp_get_thread_num(), team = omp_get_num_threads();
                if (by_cols) {
                    const int64_t j0 = L.nr * (npan_n * t / team);
                    const int64_t j1e = L.nr * (npan_n * (t + 1) / team), j1 = j1e < n ? j1e : n;
                    char *own = buf + (size_t)t * per_thread;
                    if (gemv)
                        lp_run_gemv(&L, a, b, (int32_t *)cw, ldc, batch, own, own + bbytes, j0,
                                    j1);
                    else if (j0 < j1)
                        lp_run(&L, a, b, cw, ldc, batch, own, own + bbytes, 0, panels, j0, j1, 0,
                               t, team);
                } else {
                    const int64_t p0 = panels * t / team, p1 = panels * (t + 1) / team;
                    lp_run(&L, a, b, cw, ldc, batch, buf, buf + bbytes + (size_t)t * abytes, p0,
                           p1, 0, n, 1, t, team);
                }
            }
#else
            lp_run(&L, a, b, cw, ldc, batch, buf, buf + bbytes, 0, panels, 0, n, 1, 0, 1);
#endif
        }
        free(buf);
        free(cs);
    }
    if (!err && comp_at_end && d->c_type == PYTPP_LP_I32) add_comp(cw, ldc, m, n, comp);
    if (rsum && !L.rsum && !err) add_rows(cw, ldc, m, n, rsum);   /* the small-m path's */
    free(rsum);
    if (bf16_out) {
        if (!err) bf16_round_rows(scratch, (uint16_t *)c, m, n, d->ldc);
        free(scratch);
    }
    return err;
}
