# Cython-level access to small-GEMM kernel handles (pytpp.tpp.gemm):
#
#     from pytpp._core._smallgemm cimport GemmKernel
#     cdef GemmKernel k = pytpp.tpp.gemm(5, 5, 5, beta=0.0)
#     with nogil:
#         k.run(pa, pb, pc)                       # one product, flat buffers with the handle's ld*
#         k.run_stack(count, pa, sa, pb, sb, pc, sc, nthreads)  # count products, element strides
#
# No checks happen there: the caller owns the bounds. run() is thread-safe (it keeps no state),
# so a `prange` may call one handle from every thread.
from libc.stdint cimport int64_t
from pytpp._core.csmallgemm cimport pytpp_smm_plan

cdef class GemmKernel:
    cdef pytpp_smm_plan plan
    cdef int64_t ext_a, ext_b, ext_c   # elements one product addresses
    cdef int64_t blk_a, blk_b, blk_c   # block strides of stack()
    cdef int typenum
    cdef bint release_gil
    cdef readonly object descriptor
    cdef void run(self, const void *a, const void *b, void *c) noexcept nogil
    cdef int run_stack(self, int64_t count, const void *a, int64_t sa, const void *b, int64_t sb,
                       void *c, int64_t sc, int nthreads) noexcept nogil
