# C-level runtime state shared by every glue module: thread count, active ISA level, CPU features,
# cache sizes, and the dispatch table's row of a level:
# `from pytpp._core._runtime cimport num_threads, active_isa, level`, then
# `level(isa).brgemm[dtype]` and so on (pytpp/_core/include/pytpp/dispatch.h).
from libc.stdint cimport uint32_t
from pytpp._core.cengine cimport pytpp_cache_info
from pytpp._core.cdispatch cimport pytpp_level_kernels

cdef int num_threads() noexcept nogil
cdef int active_isa() noexcept nogil
cdef uint32_t features() noexcept nogil
cdef const pytpp_cache_info *cache_info() noexcept nogil
cdef const pytpp_level_kernels *level(int isa) noexcept nogil
