/* Element-wise TPPs: unary / binary / ternary ops on 2D row-major tensors, transforms,
 * reductions and the per-ISA row-kernel tables they run on.
 *
 * A 2D operand is (m rows, n columns, ld = row stride in elements, unit column stride).
 * Inputs may be broadcast: BCAST_ROW (one row of n, reused by every row), BCAST_COL (one
 * column of m: a scalar per row, read at x[i*ld]) or BCAST_SCALAR (x[0] everywhere).
 *
 * Kernels run in a compute dtype (float32 or float64) on contiguous rows; the driver (frame/)
 * converts other storage dtypes (bfloat16 as uint16, float32 <-> float64) through small
 * L1-resident chunk buffers. Bitmasks (compare, blend, dropout) hold one bit per element,
 * little-endian inside each byte (numpy.packbits(..., bitorder="little")), each row starting
 * at a byte boundary: row i of a mask starts at byte i * ldm. */
#ifndef PYTPP_ELTWISE_H
#define PYTPP_ELTWISE_H

#include <stdint.h>
#include <stddef.h>
#include "pytpp/eltwise_ops.h"
#include "pytpp/kernel_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* storage dtypes (values of F64/F32 match enum pytpp_dtype in gemm.h) */
enum pytpp_ew_dtype { PYTPP_EW_F64 = 0, PYTPP_EW_F32 = 1, PYTPP_EW_BF16 = 2, PYTPP_EW_NDT = 3 };

enum pytpp_ew_bcast { PYTPP_EW_BCAST_NONE = 0, PYTPP_EW_BCAST_ROW = 1, PYTPP_EW_BCAST_COL = 2,
                      PYTPP_EW_BCAST_SCALAR = 3 };

/* The op enums, made from the op lists of eltwise_ops.h (their order is of no consequence:
 * Python reads the codes by name at import). */
#define PYTPP_EW_ENUM_ENTRY(E, ...) PYTPP_EW_##E,
enum pytpp_ew_unary_op { PYTPP_EW_UNARY_OPS(PYTPP_EW_ENUM_ENTRY) PYTPP_EW_N_UNARY };
enum pytpp_ew_binary_op { PYTPP_EW_BINARY_OPS(PYTPP_EW_ENUM_ENTRY) PYTPP_EW_N_BINARY };
enum pytpp_ew_ternary_op { PYTPP_EW_TERNARY_OPS(PYTPP_EW_ENUM_ENTRY) PYTPP_EW_N_TERNARY };
enum pytpp_ew_cmp { PYTPP_EW_CMP_OPS(PYTPP_EW_ENUM_ENTRY) PYTPP_EW_N_CMP };
enum pytpp_ew_reduce { PYTPP_EW_REDUCE_OPS(PYTPP_EW_ENUM_ENTRY) PYTPP_EW_N_RED };
enum pytpp_ew_family { PYTPP_EW_FAMILIES(PYTPP_EW_ENUM_ENTRY) PYTPP_EW_N_FAMILIES };

/* Name of op `op` of a family (enum pytpp_ew_family), NULL past the end; for an approximation,
 * the unary op it approximates (else -1). */
const char *pytpp_ew_op_name(int family, int op);
int pytpp_ew_approx_of(int op);

/* Row kernels on contiguous compute-dtype data. bc bit 0: x is one scalar, bit 1: y, bit 2: z. */
typedef void (*pytpp_ew_unary_fn)(int64_t n, const void *x, void *y);
typedef void (*pytpp_ew_binary_fn)(int64_t n, const void *x, const void *y, void *o, int bc);
typedef void (*pytpp_ew_ternary_fn)(int64_t n, const void *x, const void *y, const void *z,
                                    void *o, int bc);
/* bits: bit j of the row set <=> x[j] op y[j] */
typedef void (*pytpp_ew_cmp_fn)(int64_t n, const void *x, const void *y, uint8_t *bits, int bc,
                                int op);
/* o[j] = bit j ? y[j] : x[j] */
typedef void (*pytpp_ew_blend_fn)(int64_t n, const void *x, const void *y, const uint8_t *bits,
                                  void *o, int bc);
/* Dropout of one row whose first element has logical index `base`: keep iff hash(seed, index)
 * >= thresh; y = keep ? x * scale : 0; keep-bits written when bits != NULL. */
typedef void (*pytpp_ew_dropout_fn)(int64_t n, const void *x, void *y, uint8_t *bits,
                                    uint64_t base, uint64_t seed, uint32_t thresh, double scale);
/* Backward: y = bit ? x * scale : 0 */
typedef void (*pytpp_ew_dropout_inv_fn)(int64_t n, const void *x, void *y, const uint8_t *bits,
                                        double scale);
/* uniform [0, 1) numbers from the same counter-based generator */
typedef void (*pytpp_ew_rand_fn)(int64_t n, void *y, uint64_t base, uint64_t seed);
/* Softmax of one row. */
typedef void (*pytpp_ew_softmax_fn)(int64_t n, const void *x, void *y, int approx);
/* Softmax of m rows (x: ldx, y: ldy) beyond the caches: y written by streaming stores (fenced)
 * through buf (2 n elements), overlapped with the next row's math. */
typedef void (*pytpp_ew_softmax_rows_fn)(int64_t m, int64_t n, const void *x, int64_t ldx,
                                         void *y, int64_t ldy, void *buf, int approx);
/* A softmax's numerators, one pass: y = exp(x - shift) over a row (approx: the approximate exp,
 * float32), their sum returned; the caller picks shift (no less than about max x, lest exp
 * overflow) and divides by the sum later (attention: on the rows of P @ V). */
typedef double (*pytpp_ew_exp_sum_fn)(int64_t n, const void *x, void *y, double shift,
                                      int approx);
/* Reductions: scalar of a row (reduce over columns), or acc[j] = op(acc[j], f(x[j])) (over rows);
 * squared: reduce x*x. */
typedef double (*pytpp_ew_reduce_row_fn)(int64_t n, const void *x, int op, int squared);
typedef void (*pytpp_ew_reduce_acc_fn)(int64_t n, const void *x, void *acc, int op, int squared);
/* y (n x m, ldy) = x^T for x (m x n, ldx) */
typedef void (*pytpp_ew_transpose_fn)(int64_t m, int64_t n, const void *x, int64_t ldx, void *y,
                                      int64_t ldy);
/* A transpose with rows in groups of nr (the convolution weight pack): y[(i / nr) * ys + i % nr
 * + (j % period) * a + (j / period) * b] = x[(i / nr) * xs + (i % nr) * ldx + j], i < m, j < n */
typedef void (*pytpp_ew_transpose_scatter_fn)(int64_t m, int64_t n, const void *x, int64_t ldx,
                                              int64_t xs, void *y, int64_t nr, int64_t ys,
                                              int64_t period, int64_t a, int64_t b);
typedef void (*pytpp_ew_cvt_fn)(int64_t n, const void *x, void *y);
/* 8-bit quantization (eltwise_quant.inc). Integer storage of the quantized side: */
enum pytpp_q_dtype { PYTPP_Q_U8 = 0, PYTPP_Q_S8 = 1, PYTPP_Q_I32 = 2 };
/* how the scales and zero points of an m x n call vary: one value, one per column (n), one per
 * row (row i takes entry i % period) */
enum pytpp_q_params { PYTPP_Q_PER_TENSOR = 0, PYTPP_Q_PER_COLUMN = 1, PYTPP_Q_PER_ROW = 2 };
/* q[j] = clip(rint(x[j] / s[j]) + z[j], qmin, qmax) over a row of x (storage dtype x_dt), the
 * quotient correctly rounded in float64, ties to even; s, z: n values (pv) or one. NaN gives
 * z[j]; returns 1 when the row held a NaN. Float64 tables only (NULL in float32 ones). */
typedef int (*pytpp_ew_quantize_fn)(int64_t n, const void *x, int x_dt, uint8_t *q,
                                    const double *s, const double *z, int pv, double qmin,
                                    double qmax);
/* The same in float32 for float32 / bfloat16 x (float32 tables): t = x * inv in float32 (inv =
 * 1 / s and zf = z as float32, n values when pv, else one); a vector with a lane that could round
 * otherwise than the float64 quotient (within 2^-13 of a half-integer, NaN, +-inf) and the
 * tail are done by `exact` (the float64 table's quantize) with s and z. */
typedef int (*pytpp_ew_quantize_f32_fn)(int64_t n, const void *x, int x_dt, uint8_t *q,
                                        const float *inv, const float *zf, const double *s,
                                        const double *z, int pv, double qmin, double qmax,
                                        pytpp_ew_quantize_fn exact);
/* y[j] = (q[j] - z[j]) * s[j] in the table's compute dtype, (q - z) exact: sc, zc in the compute
 * dtype (n values when pv, else one), zd the zero points as float64 (int32 q in float32). (Plain
 * stores: streaming ones measured 5-10% faster only for outputs of 64 MiB and more, slower at
 * 16 MiB.) */
typedef void (*pytpp_ew_dequantize_fn)(int64_t n, const void *q, int q_dt, void *y,
                                       const void *sc, const void *zc, const double *zd, int pv);

/* softmax_rows_nt's two row buffers, each with a page of slack: the kernel places each one at a
 * chosen offset within a 4 KiB page (away from 4K aliasing with the rows of x). */
#define PYTPP_EW_SOFTMAX_BUF_SLACK 4096
#define PYTPP_EW_SOFTMAX_BUF_BYTES(n, esz) \
    ((size_t)(2 * ((n) * (esz) + PYTPP_EW_SOFTMAX_BUF_SLACK) + 64))

typedef struct pytpp_ew_kernels {
    const char *name;          /* ISA level, e.g. "avx512" */
    pytpp_table_info info;
    const char *unary_symbols[PYTPP_EW_N_UNARY];   /* symbol of the kernel in each slot */
    const char *binary_symbols[PYTPP_EW_N_BINARY];
    int dtype;                 /* compute dtype, PYTPP_EW_F32 or PYTPP_EW_F64 */
    int vl;
    pytpp_ew_unary_fn unary[PYTPP_EW_N_UNARY];
    /* bf16 in -> bf16 out (float32 compute, RNE), fused in the kernel; NULL where absent */
    pytpp_ew_unary_fn unary_bf16[PYTPP_EW_N_UNARY];
    /* the same two for arrays beyond the caches: streaming stores (fenced), input prefetched
     * ahead; NULL where absent (the driver then runs the plain kernel) */
    pytpp_ew_unary_fn unary_nt[PYTPP_EW_N_UNARY];
    pytpp_ew_unary_fn unary_bf16_nt[PYTPP_EW_N_UNARY];
    pytpp_ew_binary_fn binary[PYTPP_EW_N_BINARY];
    pytpp_ew_ternary_fn ternary[PYTPP_EW_N_TERNARY];
    pytpp_ew_cmp_fn cmp;
    pytpp_ew_blend_fn blend;
    pytpp_ew_dropout_fn dropout;
    pytpp_ew_dropout_inv_fn dropout_inv;
    pytpp_ew_rand_fn rand;
    pytpp_ew_softmax_fn softmax;
    /* rows beyond the caches; buf holds PYTPP_EW_SOFTMAX_BUF_BYTES(n, element size) */
    pytpp_ew_softmax_rows_fn softmax_rows_nt;
    pytpp_ew_exp_sum_fn exp_sum;
    pytpp_ew_reduce_row_fn reduce_row;
    pytpp_ew_reduce_acc_fn reduce_acc;
    pytpp_ew_transpose_fn transpose;
    pytpp_ew_transpose_scatter_fn transpose_scatter;
    /* streaming-store variant for outputs beyond the caches (NULL where absent): 64-byte aligned
     * output pointer and ldy * size a multiple of 64, else it runs the plain one */
    pytpp_ew_transpose_fn transpose_nt;
    /* 16-bit elements (bf16) on the 32-bit network, f32 tables only (NULL where absent) */
    pytpp_ew_transpose_fn transpose16, transpose16_nt;
    /* storage conversions: to compute dtype from [dt], from compute dtype to [dt] */
    pytpp_ew_quantize_fn quantize;
    pytpp_ew_quantize_f32_fn quantize_f32;
    pytpp_ew_dequantize_fn dequantize;
    pytpp_ew_cvt_fn load_cvt[PYTPP_EW_NDT];
    pytpp_ew_cvt_fn store_cvt[PYTPP_EW_NDT];
} pytpp_ew_kernels;

/* One operand of a 2D element-wise call. */
typedef struct pytpp_ew_operand {
    void *p;
    int64_t ld;        /* row stride in elements (ignored for ROW/SCALAR broadcast) */
    int dtype;         /* storage dtype */
    int bcast;         /* enum pytpp_ew_bcast */
} pytpp_ew_operand;

enum pytpp_ew_kind { PYTPP_EW_KIND_UNARY = 0, PYTPP_EW_KIND_BINARY, PYTPP_EW_KIND_TERNARY,
                     PYTPP_EW_KIND_CMP, PYTPP_EW_KIND_BLEND, PYTPP_EW_KIND_DROPOUT,
                     PYTPP_EW_KIND_DROPOUT_INV, PYTPP_EW_KIND_RAND, PYTPP_EW_KIND_SOFTMAX };

/* A 2D element-wise call: o (m x n) = op(in[0..nin-1]). Bitmask operands (cmp output, blend
 * input, dropout output/input) are `bits` with row stride `ldm` bytes. */
typedef struct pytpp_ew_call {
    int kind, op, nin;
    int64_t m, n;
    pytpp_ew_operand in[3];
    pytpp_ew_operand out;
    uint8_t *bits;
    int64_t ldm;
    /* dropout / rand */
    uint64_t seed, base;       /* base: logical index of element (0, 0) */
    uint32_t thresh;
    double scale;
    int approx;                /* softmax */
} pytpp_ew_call;

/* Runs a 2D element-wise call on up to nthreads threads. Returns 0. */
int pytpp_ew_run(const pytpp_ew_kernels *kt, const pytpp_ew_call *c, int nthreads);

/* Reduction of x (m x n) over rows (axis 0, out has n entries) or columns (axis 1, m entries),
 * out in dtype out_dt. */
int pytpp_ew_reduce(const pytpp_ew_kernels *kt, int64_t m, int64_t n, const void *x, int64_t ldx,
                    int x_dt, void *out, int out_dt, int axis, int op, int squared, int nthreads);

/* y (n x m, ldy) = x^T (x: m x n, ldx); esz 2, 4 or 8 bytes. kt32/kt64: tables with 32/64-bit
 * transpose kernels (NULL: portable loop). Returns 0. */
int pytpp_ew_transpose(const pytpp_ew_kernels *kt32, const pytpp_ew_kernels *kt64, int esz,
                       int64_t m, int64_t n, const void *x, int64_t ldx, void *y, int64_t ldy,
                       int nthreads);

/* (De)quantization of m x n (frame/quant.c). Parameters s, z (float64) as pmode (enum
 * pytpp_q_params) says: one value, n values, or `period` values for the rows. quantize: kt32 /
 * kt64 the level's float32 / float64 tables, q of signedness q_signed, row stride ldq bytes;
 * returns -1 on allocation failure, 1 when x held a NaN, else 0. dequantize: kt the table of y's
 * compute dtype (float32 for bfloat16 y); returns -1 on allocation failure, else 0. */
int pytpp_ew_quantize(const pytpp_ew_kernels *kt32, const pytpp_ew_kernels *kt64, int64_t m,
                      int64_t n, const void *x, int64_t ldx, int x_dt, uint8_t *q, int64_t ldq,
                      int q_signed, const double *s, const double *z, int pmode, int64_t period,
                      int nthreads);
int pytpp_ew_dequantize(const pytpp_ew_kernels *kt, int64_t m, int64_t n, const void *q,
                        int64_t ldq, int q_dt, void *y, int64_t ldy, int y_dt, const double *s,
                        const double *z, int pmode, int64_t period, int nthreads);

/* Data movement TPPs (portable; memory-bound). esz = element size in bytes. */
/* VNNI formatting: x (K x N, ldx) -> y [K/alpha][N][alpha] (K padded with zeros to alpha). */
void pytpp_ew_vnni(int esz, int alpha, int64_t k, int64_t n, const void *x, int64_t ldx, void *y);
/* VNNI -> VNNI-transpose: x [K/a][N][a] -> y [N/a][K][a] (N and K padded to a multiple of a). */
void pytpp_ew_vnni_transpose(int esz, int alpha, int64_t k, int64_t n, const void *x, void *y);
/* rows gather: y[i] = x[idx[i]]; scatter: y[idx[i]] = x[i]  (rows of n elements) */
void pytpp_ew_gather_rows(int esz, int64_t count, int64_t n, const void *x, int64_t ldx,
                          const int64_t *idx, void *y, int64_t ldy, int nthreads);
void pytpp_ew_scatter_rows(int esz, int64_t count, int64_t n, const void *x, int64_t ldx,
                           const int64_t *idx, void *y, int64_t ldy);
/* split float32 into bf16 hi/lo halves (raw bits) and back */
void pytpp_ew_unpack_f32(int64_t n, const uint32_t *x, uint16_t *hi, uint16_t *lo);
void pytpp_ew_pack_f32(int64_t n, const uint16_t *hi, const uint16_t *lo, uint32_t *x);

/* Kernel tables, one per (ISA, compute dtype); ISA ones only after a cpu check. */
extern const pytpp_ew_kernels pytpp_ew_f64_ref, pytpp_ew_f32_ref;
extern const pytpp_ew_kernels pytpp_ew_f64_avx2, pytpp_ew_f32_avx2;
extern const pytpp_ew_kernels pytpp_ew_f64_avx512, pytpp_ew_f32_avx512;

#ifdef __cplusplus
}
#endif
#endif
