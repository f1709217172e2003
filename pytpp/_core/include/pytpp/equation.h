/* TPP matrix equations (paper 000, section 4): an expression tree planned once in Python
 * (register scores, execution order, temporaries reused: pytpp/tpp/equation.py) and run here as
 * a small compiled program, a list of node instructions over row blocks.
 *
 * Operand slots: a slot >= 0 is temporary `slot`; PYTPP_EQN_INPUT(i) is input i; the root writes
 * PYTPP_EQN_OUT. Inputs are pytpp_ew_operand (storage dtype, ld, broadcast: NONE (m, n), ROW
 * (1, n), COL (m, 1), SCALAR (1, 1)); a matrix product's operands are (m, k) and (k, n).
 *
 * Two strategies (paper 4.3):
 *  1. tiles of rows x columns with the temporaries as L1-resident buffers: every instruction is
 *     one call of the level's element-wise row kernels (eltwise.h) per tile row, a product one
 *     BRGEMM per tile; row reductions take whole rows (frame/equation.c);
 *  2. trees of element-wise nodes only: one fused kernel per level (equation_rows.inc) walks the
 *     program per chunk of a row with the temporaries in a few local vectors, never written to
 *     memory between nodes. */
#ifndef PYTPP_EQUATION_H
#define PYTPP_EQUATION_H
#include <stdint.h>
#include "pytpp/eltwise.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PYTPP_EQN_OUT (-1)
#define PYTPP_EQN_INPUT(i) (-2 - (i))
#define PYTPP_EQN_IS_INPUT(s) ((s) <= -2)
#define PYTPP_EQN_INPUT_INDEX(s) (-2 - (s))
/* temporaries of strategy 2 (vector slots of one row chunk) */
#define PYTPP_EQN_MAX_VTEMPS 16

enum pytpp_eqn_kind {
    PYTPP_EQN_UNARY = 0,    /* op: enum pytpp_ew_unary_op */
    PYTPP_EQN_BINARY = 1,   /* op: enum pytpp_ew_binary_op */
    PYTPP_EQN_TERNARY = 2,  /* op: enum pytpp_ew_ternary_op */
    PYTPP_EQN_REDUCE = 3,   /* op: enum pytpp_ew_reduce, over the columns of a row -> (m, 1) */
    PYTPP_EQN_MATMUL = 4    /* src[0] (m, k) @ src[1] (k, n): inputs only */
};

typedef struct pytpp_eqn_instr {
    int kind, op;
    int src[3];
    int dst;
    int col;                /* the result is one value per row (m, 1) */
    int64_t k;              /* MATMUL: inner dimension; REDUCE: 1 reduces the squares */
} pytpp_eqn_instr;

typedef struct pytpp_eqn_prog {
    int ninstr, ntemps, ninputs;
    const pytpp_eqn_instr *ins;
    int dtype;              /* compute dtype: PYTPP_EW_F32 or PYTPP_EW_F64 */
    int has_reduce, has_matmul;
} pytpp_eqn_prog;

/* Strategy 2 on rows [r0, r1), columns [c0, c1) of the result; stream: streaming stores for the
 * output (beyond the caches). */
typedef void (*pytpp_eqn_rows_fn)(const pytpp_eqn_prog *p, const pytpp_ew_operand *in,
                                  const pytpp_ew_operand *out, int64_t r0, int64_t r1,
                                  int64_t c0, int64_t c1, int stream);

typedef struct pytpp_eqn_kernels {
    const char *name;
    pytpp_table_info info;
    int dtype, vl;
    pytpp_eqn_rows_fn rows;
} pytpp_eqn_kernels;

extern const pytpp_eqn_kernels pytpp_eqn_f64_ref, pytpp_eqn_f32_ref;
extern const pytpp_eqn_kernels pytpp_eqn_f64_avx2, pytpp_eqn_f32_avx2;
extern const pytpp_eqn_kernels pytpp_eqn_f64_avx512, pytpp_eqn_f32_avx512;

/* The fused kernels of level `isa` (enum pytpp_isa) for compute dtype `dt`. */
const pytpp_eqn_kernels *pytpp_eqn_table(int isa, int dt);

/* Runs program p: out (m x n) = the tree of the inputs, at level `isa`, strategy 1 or 2 (2 falls
 * back to 1 for a program with reductions or products), on up to nthreads threads.
 * Returns 0, -1 when a thread's buffers cannot be allocated, -2 for a bad program. */
int pytpp_eqn_run(int isa, const pytpp_eqn_prog *p, int64_t m, int64_t n,
                  const pytpp_ew_operand *in, const pytpp_ew_operand *out, int strategy,
                  int nthreads);

#ifdef __cplusplus
}
#endif
#endif
