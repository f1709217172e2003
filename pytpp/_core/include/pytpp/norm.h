/* Normalisation kernels (layer norm, RMS norm) over the rows of a 2D view: forward with the
 * statistics, and backward from the saved ones. Rows are the normalised groups; every row is
 * read once from memory (it stays in L1/L2 between the kernel's passes over it) and written once.
 *
 * Statistics: the mean from lane partials, then the centred sums of d = x - mean0 and d*d in a
 * second pass over the cached row (mean = mean0 + sum(d)/n corrects the first estimate; the
 * variance is (sum(d*d) - sum(d)^2/n)/n, never negative), so a large offset against a small
 * spread keeps its digits. rstd = 1/sqrt(var + eps) is formed in double. */
#ifndef PYTPP_NORM_H
#define PYTPP_NORM_H
#include <stdint.h>
#include "pytpp/kernel_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* m rows of n elements (x: row stride ldx, y: ldy) of the table's dtype; w, b: n elements or
 * NULL (scale 1, shift 0); mean, rstd: m elements written (mean may be NULL for RMS). stream:
 * y by streaming stores, for outputs beyond the caches. */
typedef void (*pytpp_norm_fwd_fn)(int64_t m, int64_t n, const void *x, int64_t ldx, const void *w,
                                  const void *b, double eps, void *y, int64_t ldy, void *mean,
                                  void *rstd, int stream);
/* Backward of m rows: dx from g (ldg), x (ldx), the saved mean (NULL for RMS) and rstd, and w
 * (NULL: 1). gw, gb (n elements, may be NULL) accumulate sum over rows of g * xhat and g.
 * stream: dx by streaming stores. */
typedef void (*pytpp_norm_bwd_fn)(int64_t m, int64_t n, const void *g, int64_t ldg, const void *x,
                                  int64_t ldx, const void *mean, const void *rstd, const void *w,
                                  void *dx, int64_t lddx, void *gw, void *gb, int stream);

typedef struct pytpp_norm_kernels {
    const char *name;          /* ISA level */
    pytpp_table_info info;
    int esz;                   /* element size: 4 (f32) or 8 (f64) */
    pytpp_norm_fwd_fn layer_fwd, rms_fwd;
    pytpp_norm_bwd_fn layer_bwd, rms_bwd;
} pytpp_norm_kernels;

enum pytpp_norm_kind { PYTPP_NORM_LAYER = 0, PYTPP_NORM_RMS = 1 };

/* Drivers: rows split over up to nthreads threads. Operands of another storage dtype than the
 * table's (enum pytpp_ew_dtype: x_dt, y_dt, g_dt, dx_dt; bfloat16 for float32 tables) go through
 * per-thread row buffers with the element-wise table `ew`'s conversions (same level and compute
 * dtype; unused when every operand has the compute dtype). w, b, mean, rstd, gw, gb have the
 * compute dtype. Backward gives every thread its own gw/gb partials and sums them. Return 0, or
 * -1 when the buffers cannot be allocated. */
struct pytpp_ew_kernels;
int pytpp_norm_forward(const pytpp_norm_kernels *kt, const struct pytpp_ew_kernels *ew, int kind,
                       int64_t m, int64_t n, const void *x, int x_dt, int64_t ldx, const void *w,
                       const void *b, double eps, void *y, int y_dt, int64_t ldy, void *mean,
                       void *rstd, int nthreads);
int pytpp_norm_backward(const pytpp_norm_kernels *kt, const struct pytpp_ew_kernels *ew, int kind,
                        int64_t m, int64_t n, const void *g, int g_dt, int64_t ldg,
                        const void *x, int x_dt, int64_t ldx, const void *mean, const void *rstd,
                        const void *w, void *dx, int dx_dt, int64_t lddx, void *gw, void *gb,
                        int nthreads);

extern const pytpp_norm_kernels pytpp_norm_f64_ref, pytpp_norm_f32_ref;
extern const pytpp_norm_kernels pytpp_norm_f64_avx2, pytpp_norm_f32_avx2;
extern const pytpp_norm_kernels pytpp_norm_f64_avx512, pytpp_norm_f32_avx512;

#ifdef __cplusplus
}
#endif
#endif
