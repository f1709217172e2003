# Declarations of the normalisation engine (pytpp/_core/include/pytpp/norm.h).
from libc.stdint cimport int64_t
from pytpp._core.cengine cimport pytpp_table_info
from pytpp._core.celtwise cimport pytpp_ew_kernels

cdef extern from "pytpp/norm.h" nogil:
    enum:
        PYTPP_NORM_LAYER
        PYTPP_NORM_RMS

    ctypedef struct pytpp_norm_kernels:
        const char *name
        pytpp_table_info info
        int esz

    int pytpp_norm_forward(const pytpp_norm_kernels *kt, const pytpp_ew_kernels *ew, int kind,
                           int64_t m, int64_t n, const void *x, int x_dt, int64_t ldx,
                           const void *w, const void *b, double eps, void *y, int y_dt,
                           int64_t ldy, void *mean, void *rstd, int nthreads)
    int pytpp_norm_backward(const pytpp_norm_kernels *kt, const pytpp_ew_kernels *ew, int kind,
                            int64_t m, int64_t n, const void *g, int g_dt, int64_t ldg,
                            const void *x, int x_dt, int64_t ldx, const void *mean,
                            const void *rstd, const void *w, void *dx, int dx_dt, int64_t lddx,
                            void *gw, void *gb, int nthreads)
    int pytpp_group_norm_forward(const pytpp_norm_kernels *kt, int64_t N, int64_t C, int64_t hw,
                                 int64_t groups, const void *x, const void *w, const void *b,
                                 double eps, void *y, void *mean, void *rstd, int nthreads)
    int pytpp_group_norm_backward(const pytpp_norm_kernels *kt, int64_t N, int64_t C, int64_t hw,
                                  int64_t groups, const void *g, const void *x, const void *mean,
                                  const void *rstd, const void *w, void *dx, void *gw, void *gb,
                                  int nthreads)
    int pytpp_batch_norm_forward(const pytpp_norm_kernels *kt, int nhwc, int training, int64_t N,
                                 int64_t C, int64_t hw, const void *x, const void *w,
                                 const void *b, double eps, void *y, void *mean, void *var,
                                 void *rstd, int nthreads)
    int pytpp_batch_norm_backward(const pytpp_norm_kernels *kt, int nhwc, int64_t N, int64_t C,
                                  int64_t hw, const void *g, const void *x, const void *mean,
                                  const void *rstd, const void *w, void *dx, void *gw, void *gb,
                                  int nthreads)
