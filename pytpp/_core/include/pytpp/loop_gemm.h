/* C bodies of the loop nests (frame/loop_gemm.c). */
#ifndef PYTPP_LOOP_GEMM_H
#define PYTPP_LOOP_GEMM_H
#include <stdint.h>
#include "pytpp/gemm.h"
#include "pytpp/loops.h"
#include "pytpp/equation.h"

/* 001 Listing 1: A blocked [Mb][Kb][bm][bk], B blocked [Nb][Kb][bk][bn] (row-major blocks,
 * zero-padded), C (m x n, ldc) row-major; logical loops a = K blocks (step k_step: the batch of
 * one BRGEMM), b = M blocks, c = N blocks. The first K block of a C block overwrites it. */
typedef struct pytpp_loop_gemm {
    const pytpp_gemm_kernels *gk;
    const char *a, *b;
    char *c;
    int64_t m, n, kb, bm, bn, bk, k_step, ldc, esz;
    int dtype;
} pytpp_loop_gemm;

int pytpp_loop_gemm_run(const pytpp_loop_nest *n, int nthreads, const pytpp_loop_gemm *g);

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
