# C declarations of the equation engine (pytpp/_core/include/pytpp/equation.h) and the planned
# program object, for the glue modules that run equations from C (_loops: equation bodies).
from libc.stdint cimport int64_t

cdef extern from "pytpp/equation.h" nogil:
    enum:
        PYTPP_EQN_OUT
        PYTPP_EQN_UNARY
        PYTPP_EQN_BINARY
        PYTPP_EQN_TERNARY
        PYTPP_EQN_REDUCE
        PYTPP_EQN_MATMUL
        PYTPP_EQN_MAX_VTEMPS

    ctypedef struct pytpp_ew_operand:
        void *p
        int64_t ld
        int dtype
        int bcast

    ctypedef struct pytpp_eqn_instr:
        int kind, op
        int src[3]
        int dst
        int col
        int64_t k

    ctypedef struct pytpp_eqn_prog:
        int ninstr, ntemps, ninputs
        const pytpp_eqn_instr *ins
        int dtype
        int has_reduce, has_matmul

    int pytpp_eqn_run(int isa, const pytpp_eqn_prog *p, int64_t m, int64_t n,
                      const pytpp_ew_operand *inp, const pytpp_ew_operand *out, int strategy,
                      int nthreads)


cdef class Program:
    cdef pytpp_eqn_prog prog
    cdef pytpp_eqn_instr *ins
