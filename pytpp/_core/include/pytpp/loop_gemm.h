/* C bodies of the loop nests (frame/loop_gemm.c). */
#ifndef PYTPP_LOOP_GEMM_H
#define PYTPP_LOOP_GEMM_H
#include <stdint.h>
#include "pytpp/gemm.h"
#include "pytpp/loops.h"
#include "pytpp/equation.h"

/* 001 Listing 1 over these layouts: A row-major (rows of kb * bk elements, lda apart: a K block
 * of A is a column range), B in column panels [n_pad / pw][kb * bk][pw] (pw divides bn; panels
 * and K zero-padded), C (m x n, ldc) row-major; logical loops a = K blocks (step k_step: the batch
 * of one BRGEMM), b = M blocks, c = N blocks. The first K block of a C block overwrites it. */
typedef struct pytpp_loop_gemm {
    const pytpp_gemm_kernels *gk;
    const char *a, *b;
    char *c;
    int64_t m, n, kb, bm, bn, bk, k_step, lda, pw, ldc, esz;
    int dtype;
} pytpp_loop_gemm;

int pytpp_loop_gemm_run(const pytpp_loop_nest *n, int nthreads, const pytpp_loop_gemm *g);
/* The B panel width pw for N blocks of bn columns with these kernels. */
int64_t pytpp_loop_gemm_panel(const pytpp_gemm_kernels *gk, int64_t bn);
/* B (k x n, strides rsb, csb in elements, f32 or f64) into the panels above: n_pad / pw
 * panels of kp >= k rows, zero-padded; the panels split among nthreads. */
void pytpp_loop_gemm_pack_b(int dtype, const void *b, int64_t rsb, int64_t csb, int64_t k,
                            int64_t n, int64_t kp, int64_t n_pad, int64_t pw, void *dst,
                            int nthreads);

/* An equation (equation.h) per body call on the tile of rows [ind[row_loop], + bm) and
 * columns [ind[col_loop], + bn) of out (m x n): the inputs and out addressed at the tile
 * (element-wise programs: no products), one thread per call. */
typedef struct pytpp_loop_eqn {
    int isa, strategy, row_loop, col_loop;
    const pytpp_eqn_prog *p;
    const pytpp_ew_operand *in;
    const pytpp_ew_operand *out;
    int64_t m, n, bm, bn;
    int err;
} pytpp_loop_eqn;

int pytpp_loop_eqn_run(const pytpp_loop_nest *n, int nthreads, pytpp_loop_eqn *e);

/* Records (thread, ind...) per body call into rows (cap rows of nloops + 1), count the calls. */
typedef struct pytpp_loop_trace {
    int64_t *rows;
    int64_t cap, count;
    int nloops;
} pytpp_loop_trace;

int pytpp_loop_trace_run(const pytpp_loop_nest *n, int nthreads, pytpp_loop_trace *t);
#endif
