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

/* Statistics are sums s1 = sum(x - shift), s2 = sum((x - shift)^2) over n elements in one pass
 * around a shift near the mean; their rounding error grows with (mean - shift)^2 / var. Past 1
 * (the shift more than a standard deviation off, or var not positive) the caller sums again
 * around the mean (norm_rows.inc for rows, frame/norm_chan.c for channels and groups). */
static inline int pytpp_norm_shift_too_far(double s1, double s2, double n)
{
    const double d = s1 / n, v = s2 / n - d * d;
    return !(d * d <= v);
}

#ifdef __cplusplus
extern "C" {
#endif

/* Flags of a forward call: y by streaming stores (outputs beyond the caches; ignored for a
 * bf16 y); x and/or y stored as bfloat16 (float32 tables only: widened on load, y rounded to
 * nearest even once). */
enum pytpp_norm_flags { PYTPP_NORM_STREAM = 1, PYTPP_NORM_X_BF16 = 2, PYTPP_NORM_Y_BF16 = 4 };

/* m rows of n elements (x: row stride ldx, y: ldy) of the table's dtype (or bf16, flags); w, b:
 * n elements or NULL (scale 1, shift 0); mean, rstd: m elements written (mean may be NULL for
 * RMS). */
typedef void (*pytpp_norm_fwd_fn)(int64_t m, int64_t n, const void *x, int64_t ldx, const void *w,
                                  const void *b, double eps, void *y, int64_t ldy, void *mean,
                                  void *rstd, int flags);
/* Backward of m rows: dx from g (ldg), x (ldx), the saved mean (NULL for RMS) and rstd, and w
 * (NULL: 1). gw, gb (n elements, may be NULL) accumulate sum over rows of g * xhat and g.
 * stream: dx by streaming stores. */
typedef void (*pytpp_norm_bwd_fn)(int64_t m, int64_t n, const void *g, int64_t ldg, const void *x,
                                  int64_t ldx, const void *mean, const void *rstd, const void *w,
                                  void *dx, int64_t lddx, void *gw, void *gb, int stream);

/* Building blocks of the channel norms (norm_chan.inc; doubles are rounded to the element type
 * where they meet elements). plane_*: one contiguous plane of n elements, scalar statistics;
 * col_*: rows x C channels (row stride ld), per-channel arrays of C elements. */
typedef void (*pytpp_norm_plane_sums_fn)(int64_t n, const void *x, double shift, double *s1,
                                         double *s2);
typedef void (*pytpp_norm_plane_apply_fn)(int64_t n, const void *x, double mu, double r, double w,
                                          double b, void *y, int stream, const void *xnext);
typedef void (*pytpp_norm_plane_bwd_sums_fn)(int64_t n, const void *g, const void *x, double mu,
                                             double r, double *sg, double *sgh);
typedef void (*pytpp_norm_plane_bwd_apply_fn)(int64_t n, const void *g, const void *x, double mu,
                                              double r, double w, double ma, double mp, void *dx,
                                              int stream);
typedef void (*pytpp_norm_col_sums_fn)(int64_t rows, int64_t C, const void *x, int64_t ldx,
                                       const void *shift, void *acc1, void *acc2);
typedef void (*pytpp_norm_col_apply_fn)(int64_t rows, int64_t C, const void *x, int64_t ldx,
                                        const void *mu, const void *r, const void *w,
                                        const void *b, void *y, int64_t ldy, int stream);
typedef void (*pytpp_norm_col_bwd_sums_fn)(int64_t rows, int64_t C, const void *g, int64_t ldg,
                                           const void *x, int64_t ldx, const void *mu,
                                           const void *r, void *acc_g, void *acc_gh);
typedef void (*pytpp_norm_col_bwd_apply_fn)(int64_t rows, int64_t C, const void *g, int64_t ldg,
                                            const void *x, int64_t ldx, const void *mu,
                                            const void *r, const void *w, const void *ma,
                                            const void *mp, void *dx, int64_t lddx, int stream);

typedef struct pytpp_norm_kernels {
    const char *name;          /* ISA level */
    pytpp_table_info info;
    int esz;                   /* element size: 4 (f32) or 8 (f64) */
    pytpp_norm_fwd_fn layer_fwd, rms_fwd;
    pytpp_norm_bwd_fn layer_bwd, rms_bwd;
    pytpp_norm_plane_sums_fn plane_sums;
    pytpp_norm_plane_apply_fn plane_apply;
    pytpp_norm_plane_bwd_sums_fn plane_bwd_sums;
    pytpp_norm_plane_bwd_apply_fn plane_bwd_apply;
    pytpp_norm_col_sums_fn col_sums;
    pytpp_norm_col_apply_fn col_apply;
    pytpp_norm_col_bwd_sums_fn col_bwd_sums;
    pytpp_norm_col_bwd_apply_fn col_bwd_apply;
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

/* Channel norms on C-contiguous x of N samples, C channels and hw elements per channel (NCHW:
 * planes of hw; NHWC with nhwc set: rows of C). w, b: C elements or NULL; all statistics and
 * w, b, gw, gb of the compute dtype.
 * group_norm: num_groups groups of C / num_groups channels per sample; mean, rstd (N x groups)
 *   written. Backward: gw, gb (may be NULL) written (not accumulated).
 * batch_norm forward: training (mean, var written: the batch's mean and biased variance per
 *   channel, then used) or eval (mean and var given); rstd = 1/sqrt(var + eps) written either
 *   way. Backward (training form): gw, gb written.
 * Return 0, or -1 when scratch cannot be allocated. */
int pytpp_group_norm_forward(const pytpp_norm_kernels *kt, int64_t N, int64_t C, int64_t hw,
                             int64_t groups, const void *x, const void *w, const void *b,
                             double eps, void *y, void *mean, void *rstd, int nthreads);
int pytpp_group_norm_backward(const pytpp_norm_kernels *kt, int64_t N, int64_t C, int64_t hw,
                              int64_t groups, const void *g, const void *x, const void *mean,
                              const void *rstd, const void *w, void *dx, void *gw, void *gb,
                              int nthreads);
int pytpp_batch_norm_forward(const pytpp_norm_kernels *kt, int nhwc, int training, int64_t N,
                             int64_t C, int64_t hw, const void *x, const void *w, const void *b,
                             double eps, void *y, void *mean, void *var, void *rstd,
                             int nthreads);
int pytpp_batch_norm_backward(const pytpp_norm_kernels *kt, int nhwc, int64_t N, int64_t C,
                              int64_t hw, const void *g, const void *x, const void *mean,
                              const void *rstd, const void *w, void *dx, void *gw, void *gb,
                              int nthreads);

extern const pytpp_norm_kernels pytpp_norm_f64_ref, pytpp_norm_f32_ref;
extern const pytpp_norm_kernels pytpp_norm_f64_avx2, pytpp_norm_f32_avx2;
extern const pytpp_norm_kernels pytpp_norm_f64_avx512, pytpp_norm_f32_avx512;

#ifdef __cplusplus
}
#endif
#endif
