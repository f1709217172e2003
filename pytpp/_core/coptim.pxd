# Declarations of the optimizer-step engine (pytpp/_core/include/pytpp/optim.h).
from libc.stdint cimport int64_t, uint16_t
from pytpp._core.cengine cimport pytpp_table_info

cdef extern from "pytpp/optim.h" nogil:
    enum:
        PYTPP_OPTIM_SGD
        PYTPP_OPTIM_ADAMW
        PYTPP_OPTIM_SPLIT_SGD

    ctypedef struct pytpp_optim_kernels:
        const char *name
        pytpp_table_info info
        int esz

    ctypedef struct pytpp_optim_step:
        int kind
        int64_t n
        void *p
        void *buf
        void *m
        void *v
        const void *g
        uint16_t *hi
        uint16_t *lo
        int g_bf16
        double lr, momentum, wd, b1, b2, eps, bc1, bc2_sqrt

    void pytpp_optim_run(const pytpp_optim_kernels *kt, const pytpp_optim_step *s, int nthreads)
