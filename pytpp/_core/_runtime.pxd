# C-level runtime state shared by every glue module: thread count, active ISA, cache sizes,
# kernel tables. cimport it: `from pytpp._core._runtime cimport num_threads, gemm_table`.
from pytpp._core.cengine cimport pytpp_gemm_kernels, pytpp_cache_info

cdef int num_threads() noexcept nogil
cdef int active_isa() noexcept nogil
cdef const pytpp_cache_info *cache_info() noexcept nogil
cdef const pytpp_gemm_kernels *gemm_table(int isa, int dtype) noexcept nogil
