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


cdef inline int compute_code(cnp.ndarray a) noexcept:
    """enum pytpp_dtype the row kernels compute a validated operand in: float64 for float64,
    float32 for float32 and bfloat16 storage."""
    return PYTPP_F64 if cnp.PyArray_TYPE(a) == cnp.NPY_DOUBLE else PYTPP_F32


cdef inline void *data_or_null(object a):
    """The data of an ndarray, NULL for None (an optional operand)."""
    return NULL if a is None else cnp.PyArray_DATA(<cnp.ndarray>a)


cdef inline int64_t row_ld(cnp.ndarray a):
    """Row stride in elements of a validated 2-D operand (a whole number of elements)."""
    return cnp.PyArray_STRIDE(a, 0) // cnp.PyArray_ITEMSIZE(a)


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


cdef inline bint overlaps(const char *p, int64_t pbytes, const char *q,
                          int64_t qbytes) noexcept nogil:
    """[p, p + pbytes) and [q, q + qbytes) share a byte."""
    return pbytes > 0 and qbytes > 0 and p < q + qbytes and q < p + pbytes


cdef inline char *operand(object arr, str fn, str name, int typenum, int64_t need, bint writable,
                          int64_t *size) except NULL:
    """Data pointer of a kernel handle's operand, which must be an ndarray of the kernel's dtype
    (numpy type number `typenum`) in native byte order, C-contiguous (handles address flat
    buffers with their leading dimensions), writable when written, holding at least `need`
    elements; its element count goes to *size unless size is NULL. Errors name fn and name."""
    if not cnp.PyArray_Check(arr):
        raise TypeError(f"{fn}: {name} must be a numpy.ndarray, got {type(arr).__name__}")
    cdef cnp.ndarray x = <cnp.ndarray>arr
    cdef int flags = cnp.PyArray_FLAGS(x)
    if cnp.PyArray_TYPE(x) != typenum:
        raise TypeError(f"{fn}: {name} has dtype {x.dtype}; expected "
                        f"{<object>cnp.PyArray_DescrFromType(typenum)}")
    if not cnp.PyArray_ISNOTSWAPPED(x):
        raise ValueError(f"{fn}: {name} has non-native byte order ({x.dtype.str}); kernel "
                         f"handles read native data: convert with .astype(dtype.newbyteorder('='))")
    if not (flags & cnp.NPY_ARRAY_C_CONTIGUOUS):
        raise ValueError(f"{fn}: {name} must be C-contiguous (kernel handles address flat buffers "
                         f"with the descriptor's leading dimensions)")
    if writable and not (flags & cnp.NPY_ARRAY_WRITEABLE):
        raise ValueError(f"{fn}: {name} is read-only; the kernel writes into it")
    if cnp.PyArray_SIZE(x) < need:
        raise ValueError(f"{fn}: {name} has {cnp.PyArray_SIZE(x)} elements; the kernel "
                         f"addresses {need}")
    if size != NULL:
        size[0] = cnp.PyArray_SIZE(x)
    cdef char *p = <char *>cnp.PyArray_DATA(x)
    return p if p != NULL else <char *>1   # never dereferenced past the extent checks


cdef inline int64_t operand_layout(bint trans, int64_t rows, int64_t cols, int64_t ld,
                                   int64_t *rs, int64_t *cs) noexcept:
    """Element strides (row, column) of a rows x cols operand stored row-major with row stride
    ld, or stored transposed (cols x rows); returns the elements it spans (0 when empty)."""
    if trans:
        rs[0], cs[0] = 1, ld
        return 0 if rows == 0 or cols == 0 else (cols - 1) * ld + rows
    rs[0], cs[0] = ld, 1
    return 0 if rows == 0 or cols == 0 else (rows - 1) * ld + cols
