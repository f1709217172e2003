/* 2D max and average pooling, forward and backward (torch's semantics, pytpp.nn.max_pool2d / avg_pool2d):
 * floor mode, padding at most half the kernel. Max: padding is -inf (never wins), a later tap
 * replaces the running max only when strictly greater or when it is NaN and the max is not (the
 * first maximum and the first NaN win, as the numpy reference's taps did). Average: the taps are
 * summed in (r, s) order starting from the first, padding contributing +0.0, then multiplied by
 * 1 / (kh * kw) rounded in the element type (torch's count_include_pad divisor). Max pooling
 * also with torch's indices (the backward's argmax rule: the last NaN), and its backward from
 * them, a scatter.
 *
 * One template (pool_rows.inc) of plain loops, compiled per ISA level with that level's flags:
 * NHWC vectorised over the contiguous channels of a pixel, NCHW over the output columns of a
 * row; the driver (frame/pool.c) splits the output rows over threads. */
#ifndef PYTPP_POOL_H
#define PYTPP_POOL_H
#include <stdint.h>
#include "pytpp/kernel_common.h"

#ifdef __cplusplus
extern "C" {
#endif

enum pytpp_pool_op { PYTPP_POOL_MAX = 0, PYTPP_POOL_AVG = 1 };

typedef struct pytpp_pool_shape {
    int64_t N, C, H, W, P, Q;      /* input and output sizes */
    int64_t kh, kw, sh, sw, ph, pw;
} pytpp_pool_shape;

/* NCHW rows of fewer than PYTPP_POOL_SHORT_ROW outputs (a 7x7 window over a 7x7 image) run
 * output by output, PYTPP_POOL_PLANES channels at once: a "row" is then one output row of that
 * many planes. */
#define PYTPP_POOL_PLANES 8
#define PYTPP_POOL_SHORT_ROW 8
static inline int pytpp_pool_short_rows(int nhwc, const pytpp_pool_shape *s)
{
    return !nhwc && s->Q < PYTPP_POOL_SHORT_ROW;
}

/* Rows [row0, row1) of y = pool(x): an NHWC row is output row (n, p), an NCHW row (n, c, p) or
 * with short rows (n, channel block, p). Layouts as pytpp_pool2d_forward's. */
typedef void (*pytpp_pool_rows_fn)(int op, int nhwc, const pytpp_pool_shape *s, const void *x,
                                   const int64_t xs[3], void *y, int64_t row0, int64_t row1);

/* Backward items [item0, item1) of gx = d pool / d x applied to g: an NCHW item is one plane
 * (n, c), an NHWC item one chunk of PYTPP_POOL_BWD_CHUNK channels (n, chunk) of every pixel, or
 * with windows that do not overlap one output row (n, p) and its band of input rows; the
 * item's part of gx is written whole (each input row zeroed when the windows first reach it,
 * then added to). Layouts as
 * pytpp_pool2d_backward's. Returns 0, or -1 when a tap table cannot be allocated. */
typedef int (*pytpp_pool_bwd_fn)(int op, int nhwc, const pytpp_pool_shape *s, const void *g,
                                  const void *x, void *gx, int64_t item0, int64_t item1);
#define PYTPP_POOL_BWD_CHUNK 64
/* NHWC windows that do not overlap (strides >= the window): the backward's item is then an
 * output row (n, p), whose band of input rows it writes once (pool_rows.inc). */
static inline int pytpp_pool_bwd_disjoint(int nhwc, const pytpp_pool_shape *s)
{
    return nhwc && s->sh >= s->kh && s->sw >= s->kw && s->P > 0;
}

/* Max pooling that also gives each output's index: rows [row0, row1) of y, an NHWC row output
 * row (n, p), an NCHW row (n, c, p) (no short-row blocks), and idx (y's layout) the flat index
 * h * W + w in its image plane of the element the backward's rule picks (torch's
 * return_indices). Layouts as pytpp_pool2d_forward's. Returns 0, or -1 when a tap table of
 * more than 256 taps cannot be allocated. */
typedef int (*pytpp_pool_argmax_fn)(int nhwc, const pytpp_pool_shape *s, const void *x,
                                    const int64_t xs[3], void *y, int64_t *idx, int64_t row0,
                                    int64_t row1);

/* The max pooling backward from saved indices, items [item0, item1): an NCHW plane (n, c) or
 * an NHWC chunk (n, chunk) of PYTPP_POOL_BWD_CHUNK channels; each item's part of gx is zeroed
 * row by row as the indices first reach a row, then gx_plane[idx] += g, outputs in order.
 * Returns 0, or PYTPP_POOL_BAD_INDEX when an index is outside [0, H * W) (gx then incomplete). */
typedef int (*pytpp_pool_scatter_fn)(int nhwc, const pytpp_pool_shape *s, const void *g,
                                     const int64_t *idx, void *gx, int64_t item0, int64_t item1);
#define PYTPP_POOL_BAD_INDEX (-2)

typedef struct pytpp_pool_kernels {
    const char *name;          /* ISA level */
    pytpp_table_info info;
    int esz;                   /* element size: 4 (f32) or 8 (f64) */
    pytpp_pool_rows_fn rows;
    pytpp_pool_bwd_fn backward;
    pytpp_pool_argmax_fn argmax_rows;
    pytpp_pool_scatter_fn scatter;
} pytpp_pool_kernels;

extern const pytpp_pool_kernels pytpp_pool_f64_ref, pytpp_pool_f32_ref;
extern const pytpp_pool_kernels pytpp_pool_f64_avx2, pytpp_pool_f32_avx2;
extern const pytpp_pool_kernels pytpp_pool_f64_avx512, pytpp_pool_f32_avx512;

/* y = pool(x) with the kernels of kt (its dtype). nhwc: x (N, H, W, C) with element strides
 * (xs[0], xs[1], xs[2], 1) and y (N, P, Q, C) C-contiguous; else x (N, C, H, W) with strides
 * (xs[0], xs[1], xs[2], 1) and y (N, C, P, Q) C-contiguous. idx (max pooling only, else NULL):
 * int64 in y's layout, each output's index (pytpp_pool_argmax_fn). Returns 0, or -1 when a tap
 * table could not be allocated. */
int pytpp_pool2d_forward(const pytpp_pool_kernels *kt, int op, int nhwc,
                         const pytpp_pool_shape *s, const void *x, const int64_t xs[3], void *y,
                         int64_t *idx, int nthreads);

/* gx = the gradient of pool(x) for the output gradient g (torch's rules): average pooling
 * gives each window's g / (kh * kw) to each of its elements inside the image; max pooling gives
 * g to the window's maximum, the first element inside the image that is greater than all before
 * it or NaN (so the last NaN, as torch's index), summed where windows overlap. g (N, C, P, Q),
 * x and gx (N, C, H, W), or with nhwc (N, P, Q, C) and (N, H, W, C); all C-contiguous, one
 * dtype; x is read by max pooling only. idx (max pooling only, else NULL): the forward's
 * indices in g's layout, scattered to instead of reading x (pytpp_pool_scatter_fn). Returns 0,
 * -1 when memory ran out, or PYTPP_POOL_BAD_INDEX (gx then incomplete). */
int pytpp_pool2d_backward(const pytpp_pool_kernels *kt, int op, int nhwc,
                          const pytpp_pool_shape *s, const void *g, const void *x,
                          const int64_t *idx, void *gx, int nthreads);

#ifdef __cplusplus
}
#endif
#endif
