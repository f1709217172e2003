/* Optimizer steps as single fused passes over contiguous parameter arrays, updating in place:
 * SGD with momentum and weight decay, AdamW, and the bf16 split-SGD of the TPP paper (5.1.3: the
 * float32 master weight kept as its bf16 high half, which the model reads, and a 16-bit low
 * half). Each element is read and written once; nothing is allocated. */
#ifndef PYTPP_OPTIM_H
#define PYTPP_OPTIM_H
#include <stdint.h>
#include "pytpp/kernel_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.optim.SGD (dampening 0): d = g + wd * p; buf = momentum * buf + d (buf may be NULL when
 * momentum is 0: d itself); p -= lr * buf. */
typedef void (*pytpp_optim_sgd_fn)(int64_t n, void *p, const void *g, void *buf, double lr,
                                   double momentum, double wd, int stream);
/* torch.optim.AdamW: p *= 1 - lr * wd; m += (1 - b1) * (g - m); v = b2 * v + (1 - b2) * g * g;
 * p -= (lr / bc1) * m / (sqrt(v) / bc2_sqrt + eps), bc1 = 1 - b1^step, bc2_sqrt = sqrt(1 - b2^step).
 * stream (both): the arrays written get streaming stores where their alignments allow. */
typedef void (*pytpp_optim_adamw_fn)(int64_t n, void *p, const void *g, void *m, void *v,
                                     double lr, double b1, double b2, double eps, double wd,
                                     double bc1, double bc2_sqrt, int stream);
/* master = float32 with bits (hi << 16) | lo; master -= lr * g; hi, lo = its halves. g is
 * float32, or bfloat16 when g_bf16. */
typedef void (*pytpp_optim_split_sgd_fn)(int64_t n, uint16_t *hi, uint16_t *lo, const void *g,
                                         int g_bf16, double lr);

typedef struct pytpp_optim_kernels {
    const char *name;
    pytpp_table_info info;
    int esz;
    pytpp_optim_sgd_fn sgd;
    pytpp_optim_adamw_fn adamw;
    pytpp_optim_split_sgd_fn split_sgd;    /* float32 tables only */
} pytpp_optim_kernels;

enum pytpp_optim_kind { PYTPP_OPTIM_SGD = 0, PYTPP_OPTIM_ADAMW = 1, PYTPP_OPTIM_SPLIT_SGD = 2 };

/* The arguments of one step; a kernel reads the ones of its kind. */
typedef struct pytpp_optim_step {
    int kind;
    int64_t n;
    void *p, *buf, *m, *v;
    const void *g;
    uint16_t *hi, *lo;
    int g_bf16;
    double lr, momentum, wd, b1, b2, eps, bc1, bc2_sqrt;
} pytpp_optim_step;

/* Runs a step over up to nthreads threads (chunks of whole cache lines). */
void pytpp_optim_run(const pytpp_optim_kernels *kt, const pytpp_optim_step *s, int nthreads);

extern const pytpp_optim_kernels pytpp_optim_f64_ref, pytpp_optim_f32_ref;
extern const pytpp_optim_kernels pytpp_optim_f64_avx2, pytpp_optim_f32_avx2;
extern const pytpp_optim_kernels pytpp_optim_f64_avx512, pytpp_optim_f32_avx512;

#ifdef __cplusplus
}
#endif
#endif
