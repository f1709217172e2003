# Small inline checks on ndarrays shared by the glue modules (compiled into each that cimports).
cimport numpy as cnp
from libc.stdint cimport int64_t


cdef inline bint elem_strides(cnp.ndarray x, int64_t esz) noexcept:
    """Every stride is a whole number of elements of size esz."""
    cdef int i
    for i in range(x.ndim):
        if x.strides[i] % esz:
            return False
    return True
