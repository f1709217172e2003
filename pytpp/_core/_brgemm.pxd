# Cython-level access to BRGEMM kernel handles: `from pytpp._core._brgemm cimport BrgemmKernel`,
# then `kern.run(a, b, c, &batch)` inside `with nogil:` (no checks: the caller owns the bounds).
from pytpp._core.cengine cimport pytpp_gemm_desc, pytpp_gemm_kernels, pytpp_batch
from libc.stdint cimport int64_t

cdef class BrgemmKernel:
    cdef pytpp_gemm_desc desc
    cdef const pytpp_gemm_kernels *table
    cdef readonly int mode
    cdef readonly int64_t stride_a, stride_b
    cdef int64_t ext_a, ext_b, ext_c
    cdef int esz, typenum
    cdef readonly object descriptor
    cdef int run(self, const void *a, const void *b, void *c, const pytpp_batch *batch) noexcept nogil
    cdef _launch(self, const void *pa, const void *pb, char *pc, const pytpp_batch *bt)
    cdef _launch_addresses(self, const void **ptrs, int64_t count, char *pc)
    cdef _check_overlap(self, const char *pc, int64_t nc, const char *pa, int64_t na,
                        const char *pb, int64_t nb_)
    cdef _call_address_index(self, a, b, c, a_index, b_index, const char *pa, int64_t na,
                             const char *pb, int64_t nb_, char *pc, int64_t nc)
    cdef _call_address_lists(self, a, b, c, char *pc, int64_t nc)
