/* Weight packing of the convolutions (conv.h). The packed layout is a transposition (a panel's
 * nr output channels become the fastest index) with its output rows reordered (taps before
 * channels). The two common views run on the level's scattering transpose kernel (register
 * tiles, one vector store per packed row part); any other view takes one scalar load per
 * element. */
#include <stdlib.h>
#include <string.h>
#include "pytpp/conv.h"
#include "pytpp/partition.h"

int64_t pytpp_conv_packed_elems(int64_t K, int64_t cg, int64_t R, int64_t S, int64_t groups,
                                int64_t nr, int64_t bk)
{
    const int64_t kg = K / groups;
    if (pytpp_conv_is_depthwise(K, cg, groups)) return R * S * K;
    return groups * cdiv(kg, bk) * bk * R * S * cg;
}

/* Zeroes the panels that hold output channels kg and up (the kernels write channels < kg). */
static void zero_padded_panels(int64_t kg, int64_t cg, int64_t RS, int64_t groups, int64_t nr,
                               int64_t npan, int64_t esz, char *dst)
{
    const int64_t panel = RS * cg * nr * esz;
    for (int64_t g = 0; g < groups; ++g)
        memset(dst + (g * npan + kg / nr) * panel, 0, (size_t)((npan - kg / nr) * panel));
}

/* Forward view, each output channel's (c, r, s) run contiguous: per panel, the nr x (C/groups *
 * R*S) slab transposed, row (c, tap) to packed row (tap, c). Returns 0 when it does not apply. */
static int pack_channel_runs(const pytpp_ew_kernels *ew, int64_t kg, int64_t cg, int64_t R,
                             int64_t S, int64_t groups, int64_t nr, int64_t bk, int64_t esz,
                             const char *src, const int64_t st[5], char *dst, int nt)
{
    const int64_t RS = R * S, npan = cdiv(kg, bk) * bk / nr;
    if (!(st[4] == 1 && (R == 1 || st[3] == S) && (cg == 1 || st[2] == RS) && st[1] > 0))
        return 0;
    zero_padded_panels(kg, cg, RS, groups, nr, npan, esz, dst);
    _Pragma("omp parallel for num_threads(nt) if (nt > 1) schedule(static)")
    for (int64_t it = 0; it < groups * npan; ++it) {
        const int64_t g = it / npan, j0 = (it % npan) * nr, nk = imin(nr, kg - j0);
        if (nk > 0)
            ew->transpose_scatter(nk, cg * RS, src + (g * st[0] + j0 * st[1]) * esz, st[1], 0,
                                  dst + it * RS * cg * nr * esz, nr, 0, RS, cg * nr, nr);
    }
    return 1;
}

/* Channel-swapped view with unit tap steps (the backward by data's flipped kernel at stride 1:
 * a panel's columns R*S apart, its channels far apart): per panel, its rows (channel, column)
 * by R*S taps transposed into the panel, each tap's rows written in order. Returns 0 when it
 * does not apply. */
static int pack_tap_runs(const pytpp_ew_kernels *ew, int64_t kg, int64_t cg, int64_t R,
                         int64_t S, int64_t groups, int64_t nr, int64_t bk, int64_t esz,
                         const char *src, const int64_t st[5], char *dst, int nt)
{
    const int64_t RS = R * S, npan = cdiv(kg, bk) * bk / nr;
    /* tap t = r*S + s sits at step * t from the first tap */
    const int64_t step = S > 1 ? st[4] : R > 1 ? st[3] : 1;
    if (!(st[1] > 0 && (step == 1 || step == -1) && (R == 1 || st[3] == S * step)))
        return 0;
    zero_padded_panels(kg, cg, RS, groups, nr, npan, esz, dst);
    const int64_t first = step > 0 ? 0 : -(RS - 1);              /* lowest tap offset */
    const int64_t row0 = step > 0 ? 0 : (RS - 1) * cg * nr;      /* its packed row */
    _Pragma("omp parallel for num_threads(nt) if (nt > 1) schedule(static)")
    for (int64_t it = 0; it < groups * npan; ++it) {
        const int64_t g = it / npan, j0 = (it % npan) * nr, nk = imin(nr, kg - j0);
        const char *x = src + (g * st[0] + j0 * st[1] + first) * esz;
        char *y = dst + (it * RS * cg * nr + row0) * esz;
        if (nk == nr)
            ew->transpose_scatter(cg * nr, RS, x, st[1], st[2], y, nr, nr, RS + 1,
                                  step * cg * nr, 0);
        else    /* the panel's columns past K/groups stay zero */
            for (int64_t c = 0; c < cg && nk > 0; ++c)
                ew->transpose_scatter(nk, RS, x + c * st[2] * esz, st[1], 0,
                                      y + c * nr * esz, nr, 0, RS + 1, step * cg * nr, 0);
    }
    return 1;
}

/* dst[g][kb][j][rs][c][col] = w(g, kb*bk + j*nr + col, c, r, s), zero past K/groups, one
 * scalar load per element: per panel, the nr source rows (one output channel's weights each)
 * are read side by side and the panel written in order (a 3x3 512x512 float32 weight on Zen 3:
 * 20 ms reading a contiguous weight at a stride of C*R*S elements, 8 ms writing the panel at a
 * stride of nr, 3 ms this way; 1.35-1.47 ms on one core of the Zen 4 guest in either view, 4.5x
 * a memcpy of it, where the scattering transpose takes 0.9-1.1 ms). */
#define PACK_LOOP(T)                                                                           \
    do {                                                                                       \
        const T *src = (const T *)w;                                                           \
        T *dst = (T *)wpk;                                                                     \
        const int64_t sg = st[0], sk = st[1], sc = st[2], sr = st[3], ss = st[4];              \
        if (pytpp_conv_is_depthwise(K, cg, groups)) {                                          \
            for (int64_t r = 0; r < R; ++r)                                                    \
                for (int64_t v = 0; v < S; ++v)                                                \
                    for (int64_t k = 0; k < K; ++k) *dst++ = src[k * sg + r * sr + v * ss];   \
            break;                                                                             \
        }                                                                                      \
        const int64_t npan = cdiv(kg, bk) * bk / nr;       /* panels per group */          \
        _Pragma("omp parallel for num_threads(nt) if (nt > 1) schedule(static)")               \
        for (int64_t it = 0; it < groups * npan; ++it) {                                       \
            const int64_t g = it / npan, j0 = (it % npan) * nr;                                \
            T *pd = dst + it * R * S * cg * nr;                                                \
            const int64_t nk = imax(0, imin(nr, kg - j0));                                     \
            const T *rows = src + g * sg + j0 * sk;                                            \
            if (near_cols) {                                                                   \
                /* c outer: each c reads one compact block of the panel's columns and taps */  \
                for (int64_t c = 0; c < cg; ++c)                                               \
                    for (int64_t r = 0; r < R; ++r)                                            \
                        for (int64_t v = 0; v < S; ++v) {                                      \
                            T *d = pd + ((r * S + v) * cg + c) * nr;                           \
                            const T *at = rows + c * sc + r * sr + v * ss;                     \
                            for (int64_t col = 0; col < nk; ++col) d[col] = at[col * sk];      \
                            for (int64_t col = nk; col < nr; ++col) d[col] = 0;                \
                        }                                                                      \
                continue;                                                                      \
            }                                                                                  \
            for (int64_t r = 0; r < R; ++r)                                                    \
                for (int64_t v = 0; v < S; ++v)                                                \
                    for (int64_t c = 0; c < cg; ++c, pd += nr) {                               \
                        const T *at = rows + c * sc + r * sr + v * ss;                         \
                        for (int64_t col = 0; col < nk; ++col) pd[col] = at[col * sk];         \
                        for (int64_t col = nk; col < nr; ++col) pd[col] = 0;                   \
                    }                                                                          \
        }                                                                                      \
    } while (0)

void pytpp_conv_pack_weight(const pytpp_ew_kernels *ew, int64_t K, int64_t cg, int64_t R,
                            int64_t S, int64_t groups, int64_t nr, int64_t bk, int64_t esz,
                            const void *w, const int64_t st[5], void *wpk, int nthreads)
{
    const int64_t kg = K / groups;
    /* threads for weights of a million elements and more */
    const int nt = (double)K * cg * R * S >= 1e6 && nthreads > 1 ? nthreads : 1;
    if (ew && ew->transpose_scatter && !pytpp_conv_is_depthwise(K, cg, groups) &&
        (pack_channel_runs(ew, kg, cg, R, S, groups, nr, bk, esz, w, st, wpk, nt) ||
         pack_tap_runs(ew, kg, cg, R, S, groups, nr, bk, esz, w, st, wpk, nt)))
        return;
    /* a panel's columns and taps within a few lines of each other, its channels far apart (the
     * backward by data's flipped view at a stride): per channel one compact block read,
     * instead of the panel's column loads striding over all channels */
    const int64_t span = (llabs(st[1]) * nr + llabs(st[3]) * R + llabs(st[4]) * S) * esz;
    const int near_cols = span <= 2048 && llabs(st[2]) * esz > span;
    if (esz == 8) PACK_LOOP(double); else PACK_LOOP(float);
}
