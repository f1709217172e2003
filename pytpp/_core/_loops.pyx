# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Glue of the C loop nests (pytpp/_core/include/pytpp/loops.h, loop_gemm.h): a nest parsed by
pytpp.loops held in C, run with a C body (the blocked GEMM, or a trace for the tests) with the
GIL released. The caller (pytpp.loops, pytpp.linalg) validated the nest and the arrays."""
cimport numpy as cnp
import numpy as np
from libc.stdint cimport int64_t
from pytpp._core._runtime cimport active_isa, level
from pytpp._core.cengine cimport PYTPP_F64, PYTPP_F32, pytpp_gemm_kernels
from pytpp._core._equation cimport Program, pytpp_eqn_prog, pytpp_ew_operand
from libc.stdlib cimport malloc, free
from pytpp._core._matmul cimport acquire_workspace, release_workspace

cnp.import_array()

cdef extern from "pytpp/loops.h" nogil:
    enum:
        PYTPP_LOOP_MAX_LOOPS
        PYTPP_LOOP_MAX_LEVELS

    ctypedef struct pytpp_loop_level:
        int loop
        int first
        int64_t step
        int64_t block
        int par
        int barrier

    ctypedef struct pytpp_loop_nest:
        int nlevels, nloops
        pytpp_loop_level lv[64]
        int64_t start[26]
        int64_t end[26]
        int sched
        int64_t chunk
        int grid_r, grid_c

cdef extern from "pytpp/loop_gemm.h" nogil:
    ctypedef struct pytpp_loop_gemm:
        const pytpp_gemm_kernels *gk
        const char *a
        const char *b
        char *c
        int64_t m, n, kb, bm, bn, bk, k_step, lda, pw, ldc, esz
        int dtype

    ctypedef struct pytpp_loop_trace:
        int64_t *rows
        int64_t cap, count
        int nloops

    ctypedef struct pytpp_loop_eqn:
        int isa, strategy, row_loop, col_loop
        const pytpp_eqn_prog *p
        const pytpp_ew_operand *in_ "in"
        const pytpp_ew_operand *out
        int64_t m, n, bm, bn
        int err

    int pytpp_loop_eqn_run(const pytpp_loop_nest *n, int nthreads, pytpp_loop_eqn *e)
    int pytpp_loop_gemm_run(const pytpp_loop_nest *n, int nthreads, const pytpp_loop_gemm *g)
    int pytpp_loop_trace_run(const pytpp_loop_nest *n, int nthreads, pytpp_loop_trace *t)
    int64_t pytpp_loop_gemm_panel(const pytpp_gemm_kernels *gk, int64_t bn)
    void pytpp_loop_gemm_pack_b(int dtype, const void *b, int64_t rsb, int64_t csb, int64_t k,
                                int64_t n, int64_t kp, int64_t n_pad, int64_t pw, void *dst,
                                int nthreads)

MAX_LOOPS, MAX_LEVELS = PYTPP_LOOP_MAX_LOOPS, PYTPP_LOOP_MAX_LEVELS


def gemm_panel_width(bint f64, int64_t bn):
    """Columns per B panel of the blocked GEMM (loop_gemm.h) at the active level."""
    return pytpp_loop_gemm_panel(level(active_isa()).brgemm[PYTPP_F64 if f64 else PYTPP_F32],
                                 bn)


cdef class CNest:
    """A loop nest in C: levels (loop, first, step, block, par, barrier), per-loop start and
    end, schedule code and chunk, thread grid (0, 0 for none)."""
    cdef pytpp_loop_nest nest

    def __cinit__(self, list levels, list starts, list ends, int sched, int64_t chunk,
                  int grid_r, int grid_c):
        cdef int k
        if len(levels) > PYTPP_LOOP_MAX_LEVELS or len(starts) > PYTPP_LOOP_MAX_LOOPS:
            raise ValueError("pytpp.loops: too many loop levels for the C nest")
        self.nest.nlevels = len(levels)
        self.nest.nloops = len(starts)
        for k, (loop, first, step, block, par, barrier) in enumerate(levels):
            self.nest.lv[k].loop = loop
            self.nest.lv[k].first = first
            self.nest.lv[k].step = step
            self.nest.lv[k].block = block
            self.nest.lv[k].par = par
            self.nest.lv[k].barrier = barrier
        for k in range(len(starts)):
            self.nest.start[k] = starts[k]
            self.nest.end[k] = ends[k]
        self.nest.sched = sched
        self.nest.chunk = chunk
        self.nest.grid_r = grid_r
        self.nest.grid_c = grid_c

    def trace(self, int nthreads, int64_t cap):
        """(calls, 1 + nloops) int64 rows (thread, indices...) in the order they were made."""
        cdef cnp.ndarray rows = np.zeros((max(cap, 1), self.nest.nloops + 1), np.int64)
        cdef pytpp_loop_trace t
        cdef int err
        t.rows = <int64_t *>cnp.PyArray_DATA(rows)
        t.cap = cap
        t.count = 0
        t.nloops = self.nest.nloops
        with nogil:
            err = pytpp_loop_trace_run(&self.nest, nthreads, &t)
        if err:
            raise RuntimeError("pytpp.loops: the C nest could not run (threads or memory)")
        return rows[:min(t.count, cap)]

    def gemm(self, int nthreads, cnp.ndarray a, cnp.ndarray b, cnp.ndarray c, int64_t m,
             int64_t n, int64_t kb, int64_t bm, int64_t bn, int64_t bk, int64_t k_step,
             int64_t pw):
        """c (m x n, row-major, unit column stride) = a @ b with a (m x kb * bk, unit column
        stride) and b (k x n of c's dtype, strides in whole elements), which is packed here into
        the panels of loop_gemm.h (in the shared packing workspace when it is free)."""
        cdef pytpp_loop_gemm g
        cdef int dt = PYTPP_F64 if cnp.PyArray_TYPE(c) == cnp.NPY_DOUBLE else PYTPP_F32
        cdef int err
        cdef int64_t es = cnp.PyArray_ITEMSIZE(c)
        cdef int64_t k = cnp.PyArray_DIM(b, 0), kp = kb * bk, n_pad = (n + bn - 1) // bn * bn
        cdef int64_t rsb = cnp.PyArray_STRIDE(b, 0) // es, csb = cnp.PyArray_STRIDE(b, 1) // es
        cdef const char *src = <const char *>cnp.PyArray_DATA(b)
        cdef size_t need = <size_t>(n_pad * kp * es)
        cdef void *ws = NULL
        cdef size_t wsb = 0
        cdef cnp.ndarray own
        g.gk = level(active_isa()).brgemm[dt]
        g.a = <const char *>cnp.PyArray_DATA(a)
        g.c = <char *>cnp.PyArray_DATA(c)
        g.m, g.n, g.kb, g.bm, g.bn, g.bk, g.k_step, g.pw = m, n, kb, bm, bn, bk, k_step, pw
        g.lda = cnp.PyArray_STRIDE(a, 0) // es if m > 1 else kp
        g.ldc = cnp.PyArray_STRIDE(c, 0) // es if m > 1 else n
        g.esz = es
        g.dtype = dt
        locked = acquire_workspace(need, &ws, &wsb)
        try:
            if not locked:
                own = np.empty(need, np.uint8)
                ws = cnp.PyArray_DATA(own)
            g.b = <const char *>ws
            with nogil:
                pytpp_loop_gemm_pack_b(dt, src, rsb, csb, k, n, kp, n_pad, pw, ws, nthreads)
                err = pytpp_loop_gemm_run(&self.nest, nthreads, &g)
        finally:
            if locked:
                release_workspace()
        if err:
            raise RuntimeError("pytpp.linalg.matmul(loops=): the C nest could not run")

    def equation(self, int nthreads, Program prog, list inputs, list specs, cnp.ndarray out,
                 int out_dtype, int strategy, int row_loop, int col_loop, int64_t bm,
                 int64_t bn):
        """The planned equation on each (rows, columns) tile the nest visits: inputs[i] with
        specs[i] = (ld, dtype code, bcast code), as Program.run takes them."""
        cdef int nin = len(inputs), q, err
        cdef pytpp_ew_operand *ops = <pytpp_ew_operand *>malloc(
            sizeof(pytpp_ew_operand) * max(1, nin))
        cdef pytpp_ew_operand o
        cdef pytpp_loop_eqn e
        if ops == NULL:
            raise MemoryError()
        for q in range(nin):
            ops[q].p = cnp.PyArray_DATA(<cnp.ndarray>inputs[q])
            ops[q].ld, ops[q].dtype, ops[q].bcast = specs[q]
        o.p = cnp.PyArray_DATA(out)
        o.ld = (cnp.PyArray_STRIDE(out, 0) // cnp.PyArray_ITEMSIZE(out)
                if cnp.PyArray_DIM(out, 0) > 1 else cnp.PyArray_DIM(out, 1))
        o.dtype = out_dtype
        o.bcast = 0
        e.isa = active_isa()
        e.strategy = strategy
        e.row_loop = row_loop
        e.col_loop = col_loop
        e.p = &prog.prog
        e.in_ = ops
        e.out = &o
        e.m = cnp.PyArray_DIM(out, 0)
        e.n = cnp.PyArray_DIM(out, 1)
        e.bm = bm
        e.bn = bn
        with nogil:
            err = pytpp_loop_eqn_run(&self.nest, nthreads, &e)
        free(ops)
        if err:
            raise RuntimeError("pytpp.loops: the equation body failed (threads or memory)")
