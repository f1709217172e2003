/* The element-wise op lists: one entry per op. Everything else is made from them: the C enums
 * (eltwise.h), the op names Python reads at import (pytpp_ew_op_name, so no integer code is
 * written twice), the row kernels and the kernel table of every level (eltwise_rows.inc,
 * eltwise_table.inc). Adding an op is one entry here (with its vector function, if new) and its
 * tests.
 *
 * The expressions are read only by the kernel template, in terms of its shim (V_* vector
 * operations on vec_t x, y; float64 scalars x, y); everywhere else an entry's trailing arguments
 * are ignored. The name is the op's name in pytpp.tpp, and the kernel symbol is
 * tpp_ew_<name>_<dtype>_<isa>_row (eltwise_ukr.inc, EW_FN). */
#ifndef PYTPP_ELTWISE_OPS_H
#define PYTPP_ELTWISE_OPS_H

/* Unary ops computed alike at every dtype, vectorised: X(ENUM, name, prefetch, expression of x).
 * prefetch: software prefetch in the streaming form (it costs the 1-3.5 cycle ops 10-20% on
 * Zen 3, whose hardware prefetcher keeps up with them alone). */
#define PYTPP_EW_UNARY_SIMPLE(X)                                                               \
    X(SQUARE, square, 0, V_MUL(x, x))                                                          \
    X(INC, increment, 0, V_ADD(x, V_SET1(1)))                                                  \
    X(DEC, decrement, 0, V_SUB(x, V_SET1(1)))                                                  \
    X(NEGATE, negate, 0, V_SUB(V_ZERO(), x))                                                   \
    X(ABS, abs, 0, V_ABS(x))                                                                   \
    X(SQRT, sqrt, 1, V_SQRT(x))                                                                \
    X(RECIPROCAL, reciprocal, 0, V_DIV(V_SET1(1), x))                                          \
    X(RSQRT, rsqrt, 1, V_DIV(V_SET1(1), V_SQRT(x)))                                            \
    X(RELU, relu, 0, V_MAX(V_ZERO(), x))

/* Transcendental unary ops: X(ENUM, name, float32 vector expression, float64 vector
 * expression), both in eltwise_math.inc: float32 within a few ulp, float64 within a few ulp of
 * libm. */
#define PYTPP_EW_UNARY_MATH(X)                                                                 \
    X(EXP, exp, ew_exp_acc(x), ew_exp_dv(x))                                                   \
    X(TANH, tanh, ew_tanh_acc(x), ew_tanh_dv(x))                                               \
    X(SIGMOID, sigmoid, ew_sigmoid_acc(x), ew_sigmoid_dv(x))                                   \
    X(GELU, gelu, ew_gelu_acc(x), ew_gelu_dv(x))                                               \
    X(GELU_TANH, gelu_tanh, ew_gelu_tanh_acc(x), ew_gelu_tanh_dv(x))

/* Approximations of those (float32; float64 runs the exact op):
 * X(ENUM, name, float32 vector expression, ENUM and name of the exact op). The first one listed
 * for an exact op is the one approx=True picks; the others are named by their suffix
 * (approx="pade"). */
#define PYTPP_EW_UNARY_APPROX(X)                                                               \
    X(EXP_APPROX, exp_approx, ew_exp_approx(x), EXP, exp)                                      \
    X(TANH_PADE, tanh_pade, ew_tanh_pade(x), TANH, tanh)                                       \
    X(TANH_MINIMAX, tanh_minimax, ew_tanh_mm(x), TANH, tanh)                                   \
    X(SIGMOID_APPROX, sigmoid_approx, ew_sigmoid_approx(x), SIGMOID, sigmoid)                  \
    X(SIGMOID_PADE, sigmoid_pade, ew_sigmoid_pade(x), SIGMOID, sigmoid)                        \
    X(GELU_MINIMAX, gelu_minimax, ew_gelu_mm(x), GELU, gelu)                                   \
    X(GELU_TANH_PADE, gelu_tanh_pade, ew_gelu_tanh_pade(x), GELU_TANH, gelu_tanh)

/* Data movement: X(ENUM, name) (kernels written out in eltwise_rows.inc) */
#define PYTPP_EW_UNARY_MOVE(X) X(IDENTITY, identity) X(ZERO, zero)

#define PYTPP_EW_UNARY_OPS(X)                                                                  \
    PYTPP_EW_UNARY_MOVE(X) PYTPP_EW_UNARY_SIMPLE(X) PYTPP_EW_UNARY_MATH(X)                     \
    PYTPP_EW_UNARY_APPROX(X)

/* Binary ops alike at every dtype: X(ENUM, name, vector expression of x and y). The *_inv ops
 * are activation backward passes: x = incoming gradient, y = the forward input (relu, gelu) or
 * the forward output (tanh, sigmoid, exp). */
#define PYTPP_EW_BINARY_SIMPLE(X)                                                              \
    X(ADD, add, V_ADD(x, y))                                                                   \
    X(SUB, sub, V_SUB(x, y))                                                                   \
    X(MUL, mul, V_MUL(x, y))                                                                   \
    X(DIV, div, V_DIV(x, y))                                                                   \
    X(MAX, max, V_MAX(y, x))                                                                   \
    X(MIN, min, V_MIN(y, x))                                                                   \
    X(RELU_INV, relu_inv, V_SEL(V_CMP(y, V_ZERO(), EW_PRED_GT), V_ZERO(), x))                  \
    X(TANH_INV, tanh_inv, V_MUL(x, V_FNMA(y, y, V_SET1(1))))                                   \
    X(SIGMOID_INV, sigmoid_inv, V_MUL(x, V_MUL(y, V_SUB(V_SET1(1), y))))                       \
    X(EXP_INV, exp_inv, V_MUL(x, y))

/* Binary ops with transcendental parts: X(ENUM, name, float32 vector expression, float64 vector
 * expression). */
#define PYTPP_EW_BINARY_MATH(X)                                                                \
    X(GELU_INV, gelu_inv, V_MUL(x, ew_gelu_grad(y)), V_MUL(x, ew_gelu_grad_dv(y)))             \
    X(GELU_TANH_INV, gelu_tanh_inv, V_MUL(x, ew_gelu_tanh_grad(y)),                            \
      V_MUL(x, ew_gelu_tanh_grad_dv(y)))

#define PYTPP_EW_BINARY_OPS(X) PYTPP_EW_BINARY_SIMPLE(X) PYTPP_EW_BINARY_MATH(X)

/* Ternary ops: X(ENUM, name, vector expression of x, y, z). */
#define PYTPP_EW_TERNARY_OPS(X)                                                                \
    X(MULADD, muladd, V_FMA(x, y, z))                                                          \
    X(NMULADD, nmuladd, V_FNMA(x, y, z))

/* Comparisons (binary "compare" -> bitmask): X(ENUM, name, predicate of the shim) */
#define PYTPP_EW_CMP_OPS(X)                                                                    \
    X(CMP_EQ, eq, EW_PRED_EQ) X(CMP_NE, ne, EW_PRED_NE) X(CMP_LT, lt, EW_PRED_LT)              \
    X(CMP_LE, le, EW_PRED_LE) X(CMP_GT, gt, EW_PRED_GT) X(CMP_GE, ge, EW_PRED_GE)

/* Reductions: X(ENUM, name) */
#define PYTPP_EW_REDUCE_OPS(X) X(RED_SUM, sum) X(RED_MUL, mul) X(RED_MAX, max) X(RED_MIN, min)

/* Op families, as pytpp_ew_op_name takes them: X(ENUM, name, list) */
#define PYTPP_EW_FAMILIES(X)                                                                   \
    X(FAM_UNARY, unary, PYTPP_EW_UNARY_OPS) X(FAM_BINARY, binary, PYTPP_EW_BINARY_OPS)         \
    X(FAM_TERNARY, ternary, PYTPP_EW_TERNARY_OPS) X(FAM_CMP, compare, PYTPP_EW_CMP_OPS)        \
    X(FAM_REDUCE, reduce, PYTPP_EW_REDUCE_OPS)

#endif
