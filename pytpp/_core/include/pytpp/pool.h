/* 2D max and average pooling forward (torch's semantics, pytpp.nn.max_pool2d / avg_pool2d):
 * floor mode, padding at most half the kernel. Max: padding is -inf (never wins), a later tap
 * replaces the running max only when strictly greater or when it is NaN and the max is not (the
 * first maximum and the first NaN win, as the numpy reference's taps did). Average: the taps are
 * summed in (r, s) order starting from the first, padding contributing +0.0, then multiplied by
 * 1 / (kh * kw) rounded in the element type (torch's count_include_pad divisor).
 *
 * Portable loops (frame/pool.c, no ISA code): NHWC vectorised over the contiguous channels of a
 * pixel, NCHW over the output columns of a row; threads over output rows. */
#ifndef PYTPP_POOL_H
#define PYTPP_POOL_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum pytpp_pool_op { PYTPP_POOL_MAX = 0, PYTPP_POOL_AVG = 1 };

typedef struct pytpp_pool_shape {
    int64_t N, C, H, W, P, Q;      /* input and output sizes */
    int64_t kh, kw, sh, sw, ph, pw;
} pytpp_pool_shape;

/* y = pool(x). nhwc: x (N, H, W, C) with element strides (xs[0], xs[1], xs[2], 1) and y
 * (N, P, Q, C) C-contiguous; else x (N, C, H, W) with strides (xs[0], xs[1], xs[2], 1) and y
 * (N, C, P, Q) C-contiguous. esz 4 (float) or 8 (double). */
void pytpp_pool2d_forward(int op, int64_t esz, int nhwc, const pytpp_pool_shape *s,
                          const void *x, const int64_t xs[3], void *y, int nthreads);

#ifdef __cplusplus
}
#endif
#endif
