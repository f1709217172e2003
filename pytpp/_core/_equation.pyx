# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Glue of the TPP matrix equations (pytpp/_core/include/pytpp/equation.h): a planned program
held in C, inputs as pointers, the driver run with the GIL released. The caller
(pytpp.tpp.equation) planned the tree and validated every operand: each is 2-D with a unit
column stride (or a broadcast), of a storage dtype the program takes."""
cimport numpy as cnp
import numpy as np
from libc.stdint cimport int64_t
from libc.stdlib cimport malloc, free
from pytpp._core.celtwise cimport PYTPP_EW_F64, PYTPP_EW_F32, PYTPP_EW_BF16
from pytpp._core._runtime cimport num_threads, active_isa

cnp.import_array()

UNARY, BINARY, TERNARY, REDUCE, MATMUL = (PYTPP_EQN_UNARY, PYTPP_EQN_BINARY, PYTPP_EQN_TERNARY,
                                          PYTPP_EQN_REDUCE, PYTPP_EQN_MATMUL)
OUT = PYTPP_EQN_OUT
MAX_VTEMPS = PYTPP_EQN_MAX_VTEMPS
F64, F32, BF16 = PYTPP_EW_F64, PYTPP_EW_F32, PYTPP_EW_BF16


cdef _check(int err):
    """The driver's return code as an exception."""
    if err == -1:
        raise MemoryError("pytpp.tpp.equation: no memory for the tiles")
    if err:
        raise RuntimeError(f"pytpp.tpp.equation: the engine refused the program ({err})")


cdef class Program:
    """A planned equation in C: instructions (kind, op, src0, src1, src2, dst, col, k) with
    slots as equation.h numbers them; compute dtype code; number of temporaries and inputs."""

    def __cinit__(self, list instrs, int ntemps, int ninputs, int dtype):
        cdef int i
        self.ins = <pytpp_eqn_instr *>malloc(sizeof(pytpp_eqn_instr) * max(1, len(instrs)))
        if self.ins == NULL:
            raise MemoryError()
        self.prog.has_reduce = 0
        self.prog.has_matmul = 0
        for i, (kind, op, s0, s1, s2, dst, col, k) in enumerate(instrs):
            self.ins[i].kind = kind
            self.ins[i].op = op
            self.ins[i].src[0] = s0
            self.ins[i].src[1] = s1
            self.ins[i].src[2] = s2
            self.ins[i].dst = dst
            self.ins[i].col = col
            self.ins[i].k = k
            if kind == PYTPP_EQN_REDUCE:
                self.prog.has_reduce = 1
            if kind == PYTPP_EQN_MATMUL:
                self.prog.has_matmul = 1
        self.prog.ninstr = len(instrs)
        self.prog.ntemps = ntemps
        self.prog.ninputs = ninputs
        self.prog.dtype = dtype
        self.prog.ins = self.ins

    def __dealloc__(self):
        free(self.ins)

    def run_dense(self, tuple inputs, tuple in_types, tuple in_codes, list consts, object out,
                  object out_type, int out_code, int m, int n, int strategy):
        """The common call, checked and run here: every input a C-contiguous (m, n) ndarray of
        its dtype (in_types), out None or one too, sharing memory with an input only as the same
        view (each element read before it is written). Returns the result, or None when
        the call is not of this form (the caller's general path then checks and runs it)."""
        cdef int nin = len(inputs), nc = len(consts), q
        cdef cnp.ndarray x, o
        cdef char *lo
        cdef char *hi
        cdef char *xlo
        cdef pytpp_ew_operand ops[32]
        cdef pytpp_ew_operand od
        cdef int isa, nt, err
        if nin != len(in_types) or nin + nc > 32:
            return None
        for q in range(nin):
            x = inputs[q] if cnp.PyArray_CheckExact(inputs[q]) else None
            if (x is None or cnp.PyArray_NDIM(x) != 2 or cnp.PyArray_DIM(x, 0) != m
                    or cnp.PyArray_DIM(x, 1) != n or not cnp.PyArray_IS_C_CONTIGUOUS(x)
                    or <object>cnp.PyArray_DESCR(x) is not in_types[q]):
                return None
        if out is None:
            o = np.empty((m, n), out_type)
        else:
            o = out if cnp.PyArray_CheckExact(out) else None
            if (o is None or cnp.PyArray_NDIM(o) != 2 or cnp.PyArray_DIM(o, 0) != m
                    or cnp.PyArray_DIM(o, 1) != n or not cnp.PyArray_IS_C_CONTIGUOUS(o)
                    or not cnp.PyArray_ISWRITEABLE(o) or <object>cnp.PyArray_DESCR(o) is not out_type):
                return None
            lo = <char *>cnp.PyArray_DATA(o)
            hi = lo + cnp.PyArray_NBYTES(o)
            for q in range(nin):
                x = inputs[q]
                xlo = <char *>cnp.PyArray_DATA(x)
                if (xlo < hi and lo < xlo + cnp.PyArray_NBYTES(x)
                        and (xlo != lo or in_types[q] is not out_type)):
                    return None
        for q in range(nin):
            ops[q].p = cnp.PyArray_DATA(<cnp.ndarray>inputs[q])
            ops[q].ld = n
            ops[q].dtype = in_codes[q]
            ops[q].bcast = 0
        for q in range(nc):
            x = consts[q]
            ops[nin + q].p = cnp.PyArray_DATA(x)
            ops[nin + q].ld = 1
            ops[nin + q].dtype = self.prog.dtype
            ops[nin + q].bcast = 3
        od.p = cnp.PyArray_DATA(o)
        od.ld = n
        od.dtype = out_code
        od.bcast = 0
        isa, nt = active_isa(), num_threads()
        with nogil:
            err = pytpp_eqn_run(isa, &self.prog, m, n, ops, &od, strategy, nt)
        _check(err)
        return o

    def run(self, list inputs, list specs, cnp.ndarray out, int out_dtype, int strategy):
        """inputs[i]: ndarray; specs[i]: (ld, dtype code, bcast code)."""
        cdef int nin = len(inputs), q
        cdef pytpp_ew_operand *ops = <pytpp_ew_operand *>malloc(sizeof(pytpp_ew_operand) * max(1, nin))
        cdef pytpp_ew_operand o
        cdef int64_t m = cnp.PyArray_DIM(out, 0), n = cnp.PyArray_DIM(out, 1)
        cdef int isa = active_isa(), nt = num_threads(), err
        if ops == NULL:
            raise MemoryError()
        for q in range(nin):
            ops[q].p = cnp.PyArray_DATA(<cnp.ndarray>inputs[q])
            ops[q].ld, ops[q].dtype, ops[q].bcast = specs[q]
        o.p = cnp.PyArray_DATA(out)
        o.ld = cnp.PyArray_STRIDE(out, 0) // cnp.PyArray_ITEMSIZE(out) if m > 1 else n
        o.dtype = out_dtype
        o.bcast = 0
        with nogil:
            err = pytpp_eqn_run(isa, &self.prog, m, n, ops, &o, strategy, nt)
        free(ops)
        _check(err)
