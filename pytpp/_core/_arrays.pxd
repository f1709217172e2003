# Inline checks on ndarrays and byte ranges shared by the glue modules (compiled into each module
# that cimports them): dtype codes, element strides, extents and overlap.
cimport numpy as cnp
from libc.stdint cimport int64_t, intptr_t
from pytpp._core.cengine cimport PYTPP_F64, PYTPP_F32


cdef inline int dtype_code(int typenum) noexcept nogil:
    """enum pytpp_dtype of a numpy type number (float64, float32), else -1."""
    if typenum == cnp.NPY_FLOAT64:
        return PYTPP_F64
    if typenum == cnp.NPY_FLOAT32:
        return PYTPP_F32
    return -1


cdef inline bint elem_strides(cnp.ndarray x, int64_t esz) noexcept:
    """Every stride is a whole number of elements of size esz."""
    cdef int d
    for d in range(cnp.PyArray_NDIM(x)):
        if cnp.PyArray_STRIDE(x, d) % esz:
            return False
    return True


cdef inline void extent(cnp.ndarray x, intptr_t *lo, intptr_t *hi) noexcept:
    """Byte range [lo, hi) the elements of x span (empty for a zero-size array)."""
    cdef intptr_t base = <intptr_t>cnp.PyArray_DATA(x)
    cdef intptr_t l = base, h = base
    cdef int d
    cdef cnp.npy_intp s, n
    for d in range(cnp.PyArray_NDIM(x)):
        n = cnp.PyArray_DIM(x, d)
        if n == 0:
            lo[0] = hi[0] = base
            return
        s = cnp.PyArray_STRIDE(x, d)
        if s >= 0:
            h += s * (n - 1)
        else:
            l += s * (n - 1)
    lo[0] = l
    hi[0] = h + cnp.PyArray_ITEMSIZE(x)


cdef inline bint disjoint(cnp.ndarray x, cnp.ndarray y) noexcept:
    """The byte ranges of x and y do not meet (a conservative test: False may still be apart)."""
    cdef intptr_t xl, xh, yl, yh
    extent(x, &xl, &xh)
    extent(y, &yl, &yh)
    return xh <= yl or yh <= xl or xl == xh or yl == yh


cdef inline bint overlaps(const char *p, int64_t pbytes, const char *q, int64_t qbytes) noexcept nogil:
    """[p, p + pbytes) and [q, q + qbytes) share a byte."""
    return pbytes > 0 and qbytes > 0 and p < q + qbytes and q < p + pbytes
