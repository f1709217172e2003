# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""BRGEMM kernel handles (STRIDE / OFFSET / ADDRESS batch modes) and the strided-array entry used
by ``pytpp.brgemm``. Validation happens here, with the GIL; the C engine runs without it."""
import numpy as np
cimport numpy as cnp
from pytpp._core._arrays cimport (dtype_code, elem_strides, disjoint, operand, operand_layout,
                                  overlaps)
from libc.stdint cimport int64_t, intptr_t
from libc.stdlib cimport malloc, free
from pytpp._core.cengine cimport *
from pytpp._core._runtime cimport num_threads, cache_info, level

cnp.import_array()

MODES = ("stride", "offset", "address")
_FN = "pytpp.tpp.brgemm kernel"


cdef inline bint blocks_fit(int64_t count, int64_t stride, int64_t ext, int64_t size) noexcept:
    """(count - 1) * stride + ext <= size for count >= 1 blocks, without integer overflow."""
    if ext > size:
        return False
    return stride == 0 or count - 1 <= (size - ext) // stride


cdef int64_t[::1] as_offsets(object arr, str name, int64_t lo, int64_t hi, int64_t count):
    """int64 array of `count` entries, each in [lo, hi]; raises naming `name` otherwise."""
    try:
        x = np.ascontiguousarray(arr, dtype=np.int64) if np.asarray(arr).dtype.kind in "iu" \
            else None
    except (TypeError, ValueError):
        x = None
    if x is None or x.ndim != 1:
        raise TypeError(f"{_FN}: {name} must be a 1-D array of integers")
    if count >= 0 and x.shape[0] != count:
        raise ValueError(f"{_FN}: {name} has {x.shape[0]} entries; expected {count}")
    cdef int64_t[::1] v = x
    cdef Py_ssize_t i
    cdef int64_t bad = -1
    with nogil:
        for i in range(v.shape[0]):
            if v[i] < lo or v[i] > hi:
                bad = i
                break
    if bad >= 0:
        raise ValueError(f"{_FN}: {name}[{bad}] = {v[bad]} is out of range [{lo}, {hi}]")
    return v


cdef class BrgemmKernel:
    """A dispatched BRGEMM: ``C = alpha * sum_i op(A_i) @ op(B_i) + beta * C``.

    Made by :func:`pytpp.tpp.brgemm`; calling it checks only pointers, extents and dtypes.
    """

    def __init__(self, int64_t m, int64_t n, int64_t k, int dtype, int isa, int mode,
                 int64_t lda, int64_t ldb, int64_t ldc, bint trans_a, bint trans_b,
                 double alpha, double beta, int64_t stride_a, int64_t stride_b, descriptor):
        self.table = level(isa).brgemm[dtype]
        self.desc.m, self.desc.n, self.desc.k = m, n, k
        self.desc.dtype = dtype
        self.desc.alpha, self.desc.beta = alpha, beta
        self.ext_a = operand_layout(trans_a, m, k, lda, &self.desc.rsa, &self.desc.csa)
        self.ext_b = operand_layout(trans_b, k, n, ldb, &self.desc.ldb, &self.desc.csb)
        self.desc.ldc = ldc
        self.ext_c = 0 if m == 0 or n == 0 else (m - 1) * ldc + n
        self.mode = mode
        self.stride_a, self.stride_b = stride_a, stride_b
        self.esz = 8 if dtype == PYTPP_F64 else 4
        self.typenum = cnp.NPY_FLOAT64 if dtype == PYTPP_F64 else cnp.NPY_FLOAT32
        self.descriptor = descriptor

    @property
    def isa(self):
        return self.table.name.decode()

    def __repr__(self):
        return f"<pytpp BRGEMM kernel {self.descriptor} isa={self.isa}>"

    cdef int run(self, const void *a, const void *b, void *c, const pytpp_batch *batch) noexcept nogil:
        return pytpp_brgemm(self.table, cache_info(), &self.desc, a, b, c, batch, num_threads())

    def __call__(self, a, b, c, *batch):
        """Run the kernel.

        stride mode:  ``k(a, b, c, count=1)``: A_i = a.flat[i*stride_a:], B_i likewise.
        offset mode:  ``k(a, b, c, a_offsets, b_offsets)``: element offsets into a and b.
        address mode: ``k(a_blocks, b_blocks, c)`` with sequences of arrays, or
                      ``k(a, b, c, a_index, b_index)`` selecting blocks a[a_index[i]], b[b_index[i]].
        """
        cdef int64_t na = 0, nb_ = 0, nc = 0, count = 0, i
        cdef pytpp_batch bt
        cdef const char *pa = NULL
        cdef const char *pb = NULL
        cdef char *pc = operand(c, _FN, "c", self.typenum, 0, True, &nc)
        cdef int64_t[::1] offa, offb
        if self.ext_c > nc:
            raise ValueError(f"{_FN}: c has {nc} elements; the kernel writes {self.ext_c} (m, "
                             f"n, ldc)")
        bt.mode = self.mode
        bt.off_a = bt.off_b = NULL
        bt.ptr_a = bt.ptr_b = NULL
        bt.stride_a, bt.stride_b = self.stride_a, self.stride_b
        if self.mode == PYTPP_BATCH_ADDRESS and len(batch) == 0:
            return self._call_address_lists(a, b, c, pc, nc)
        pa = operand(a, _FN, "a", self.typenum, 0, False, &na)
        pb = operand(b, _FN, "b", self.typenum, 0, False, &nb_)
        if self.mode == PYTPP_BATCH_STRIDE:
            if len(batch) > 1:
                raise TypeError(f"{_FN}: a stride-mode kernel takes (a, b, c[, count])")
            count = batch[0] if batch else 1
            if count < 0:
                raise ValueError(f"{_FN}: count must be >= 0, got {count}")
            if count > 0 and not blocks_fit(count, self.stride_a, self.ext_a, na):
                raise ValueError(f"{_FN}: a has {na} elements; {count} blocks of stride "
                                 f"{self.stride_a} "
                                 f"need {(count - 1) * self.stride_a + self.ext_a}")
            if count > 0 and not blocks_fit(count, self.stride_b, self.ext_b, nb_):
                raise ValueError(f"{_FN}: b has {nb_} elements; {count} blocks of stride "
                                 f"{self.stride_b} "
                                 f"need {(count - 1) * self.stride_b + self.ext_b}")
        elif self.mode == PYTPP_BATCH_OFFSET:
            if len(batch) != 2:
                raise TypeError(f"{_FN}: an offset-mode kernel takes (a, b, c, a_offsets, "
                                f"b_offsets)")
            offa = as_offsets(batch[0], "a_offsets", 0, max(na - self.ext_a, -1), -1)
            count = offa.shape[0]
            offb = as_offsets(batch[1], "b_offsets", 0, max(nb_ - self.ext_b, -1), count)
            if count > 0:
                bt.off_a, bt.off_b = &offa[0], &offb[0]
        else:
            if len(batch) != 2:
                raise TypeError(f"{_FN}: an address-mode kernel takes (a_blocks, b_blocks, c) or "
                                "(a, b, c, a_index, b_index)")
            return self._call_address_index(a, b, c, batch[0], batch[1], pa, na, pb, nb_, pc, nc)
        bt.count = count
        if count > 0:
            self._check_overlap(pc, nc, pa, na, pb, nb_)
        self._launch(pa, pb, pc, &bt)
        return c

    cdef _launch(self, const void *pa, const void *pb, char *pc, const pytpp_batch *bt):
        """Run with the GIL released; the checks are done."""
        cdef int err
        with nogil:
            err = self.run(pa, pb, pc, bt)
        if err:
            raise MemoryError("pytpp.tpp.brgemm: scratch allocation failed")

    cdef _launch_addresses(self, const void **ptrs, int64_t count, char *pc):
        """Run an address batch: ptrs holds the count A blocks, then the count B blocks."""
        cdef pytpp_batch bt
        bt.mode = PYTPP_BATCH_ADDRESS
        bt.count = count
        bt.off_a = bt.off_b = NULL
        bt.ptr_a, bt.ptr_b = ptrs, ptrs + count
        self._launch(NULL, NULL, pc, &bt)

    cdef _check_overlap(self, const char *pc, int64_t nc, const char *pa, int64_t na,
                        const char *pb, int64_t nb_):
        if overlaps(pc, self.ext_c * self.esz, pa, na * self.esz):
            raise ValueError(f"{_FN}: c overlaps a; the output must not alias an input")
        if overlaps(pc, self.ext_c * self.esz, pb, nb_ * self.esz):
            raise ValueError(f"{_FN}: c overlaps b; the output must not alias an input")

    cdef _call_address_index(self, a, b, c, a_index, b_index, const char *pa, int64_t na,
                             const char *pb, int64_t nb_, char *pc, int64_t nc):
        cdef cnp.ndarray xa = <cnp.ndarray>a, xb = <cnp.ndarray>b
        if xa.ndim < 1 or xb.ndim < 1 or xa.shape[0] == 0 and na or xb.shape[0] == 0 and nb_:
            raise ValueError(f"{_FN}: a and b must have a leading block axis")
        cdef int64_t blk_a = na // xa.shape[0] if xa.shape[0] else 0
        cdef int64_t blk_b = nb_ // xb.shape[0] if xb.shape[0] else 0
        if self.ext_a > blk_a:
            raise ValueError(f"{_FN}: a's blocks hold {blk_a} elements; the kernel reads "
                             f"{self.ext_a}")
        if self.ext_b > blk_b:
            raise ValueError(f"{_FN}: b's blocks hold {blk_b} elements; the kernel reads "
                             f"{self.ext_b}")
        cdef int64_t[::1] ia = as_offsets(a_index, "a_index", 0, xa.shape[0] - 1, -1)
        cdef int64_t count = ia.shape[0]
        cdef int64_t[::1] ib = as_offsets(b_index, "b_index", 0, xb.shape[0] - 1, count)
        cdef const void **ptrs = <const void **>malloc(2 * max(count, 1) * sizeof(void *))
        cdef int64_t i
        if ptrs == NULL:
            raise MemoryError()
        try:
            for i in range(count):
                ptrs[i] = pa + ia[i] * blk_a * self.esz
                ptrs[count + i] = pb + ib[i] * blk_b * self.esz
            if count > 0:
                self._check_overlap(pc, nc, pa, na, pb, nb_)
            self._launch_addresses(ptrs, count, pc)
        finally:
            free(ptrs)
        return c

    cdef _call_address_lists(self, a, b, c, char *pc, int64_t nc):
        if not isinstance(a, (list, tuple)) or not isinstance(b, (list, tuple)):
            raise TypeError(f"{_FN}: an address-mode kernel takes sequences of arrays "
                            f"(a_blocks, b_blocks, c)"
                            " or (a, b, c, a_index, b_index)")
        cdef int64_t count = len(a), i, n
        if len(b) != count:
            raise ValueError(f"{_FN}: a_blocks has {count} arrays but b_blocks has {len(b)}")
        cdef const void **ptrs = <const void **>malloc(2 * max(count, 1) * sizeof(void *))
        if ptrs == NULL:
            raise MemoryError()
        try:
            for i in range(count):
                ptrs[i] = operand(a[i], _FN, f"a_blocks[{i}]", self.typenum, 0, False, &n)
                if n < self.ext_a:
                    raise ValueError(f"{_FN}: a_blocks[{i}] has {n} elements; the kernel reads "
                                     f"{self.ext_a}")
                self._check_overlap(pc, nc, <const char *>ptrs[i], n, NULL, 0)
                ptrs[count + i] = operand(b[i], _FN, f"b_blocks[{i}]", self.typenum, 0, False, &n)
                if n < self.ext_b:
                    raise ValueError(f"{_FN}: b_blocks[{i}] has {n} elements; the kernel reads "
                                     f"{self.ext_b}")
                self._check_overlap(pc, nc, NULL, 0, <const char *>ptrs[count + i], n)
            self._launch_addresses(ptrs, count, pc)
        finally:
            free(ptrs)
        return c


def brgemm_strided(cnp.ndarray a, cnp.ndarray b, cnp.ndarray out, double alpha, double beta, int isa):
    """out[l] = alpha * sum_i a[l, i] @ b[l, i] + beta * out[l] for 4-D views a (L, nb, m, k),
    b (L, nb, k, n) and 3-D out (L, m, n). Any element strides (the caller checked dtypes,
    shapes, itemsize-multiple strides and a unit column stride of out)."""
    cdef int dt = dtype_code(cnp.PyArray_TYPE(out))
    cdef int64_t esz = out.itemsize
    cdef pytpp_gemm_desc d
    cdef pytpp_batch bt
    cdef int err
    d.m, d.k, d.n = a.shape[2], a.shape[3], b.shape[3]
    d.rsa, d.csa = a.strides[2] // esz, a.strides[3] // esz
    d.ldb, d.csb = b.strides[2] // esz, b.strides[3] // esz
    d.ldc = out.strides[1] // esz
    d.dtype = dt
    d.alpha, d.beta = alpha, beta
    bt.mode = PYTPP_BATCH_STRIDE
    bt.count = a.shape[1]
    bt.stride_a, bt.stride_b = a.strides[1] // esz, b.strides[1] // esz
    bt.off_a = bt.off_b = NULL
    bt.ptr_a = bt.ptr_b = NULL
    cdef int64_t many = a.shape[0]
    cdef int64_t oa = a.strides[0] // esz, ob = b.strides[0] // esz, oc = out.strides[0] // esz
    cdef const pytpp_gemm_kernels *kt = level(isa).brgemm[dt]
    cdef const void *pa = cnp.PyArray_DATA(a)
    cdef const void *pb = cnp.PyArray_DATA(b)
    cdef void *pc = cnp.PyArray_DATA(out)
    with nogil:
        err = pytpp_brgemm_many(kt, cache_info(), &d, pa, pb, pc, &bt, many, oa, ob, oc,
                                num_threads())
    if err:
        raise MemoryError("pytpp.brgemm: scratch allocation failed")
    return out


def brgemm_fast(a, b, c, double beta, out, int isa):
    """pytpp.brgemm's common case in C speed: 3-D a, b of one dtype (float32/64), c and out None or
    (m, n) arrays of that dtype with whole-element strides, out with unit column stride and
    clearly apart from a and b. Returns None when any of that does not hold (the Python path then
    handles it, including every error message)."""
    if not (cnp.PyArray_CheckExact(a) and cnp.PyArray_CheckExact(b)):
        return None
    cdef cnp.ndarray xa = <cnp.ndarray>a, xb = <cnp.ndarray>b, xc, xo
    cdef int typenum = cnp.PyArray_TYPE(xa)
    if xa.ndim != 3 or xb.ndim != 3 or cnp.PyArray_TYPE(xb) != typenum:
        return None
    if not (cnp.PyArray_ISNOTSWAPPED(xa) and cnp.PyArray_ISNOTSWAPPED(xb)):
        return None
    cdef int dt = dtype_code(typenum)
    if dt < 0:
        return None
    cdef int64_t esz = xa.itemsize
    if not (elem_strides(xa, esz) and elem_strides(xb, esz)):
        return None
    cdef int64_t nb = xa.shape[0], m = xa.shape[1], k = xa.shape[2], n = xb.shape[2]
    if xb.shape[0] != nb or xb.shape[1] != k:
        return None
    cdef cnp.npy_intp dims[2]
    dims[0], dims[1] = m, n
    if c is not None:
        if not cnp.PyArray_CheckExact(c):
            return None
        xc = <cnp.ndarray>c
        if (xc.ndim != 2 or cnp.PyArray_TYPE(xc) != typenum or xc.shape[0] != m or xc.shape[1] != n
                or not cnp.PyArray_ISNOTSWAPPED(xc)):
            return None
    else:
        beta = 0.0
    if out is None:
        xo = cnp.PyArray_EMPTY(2, dims, typenum, 0)
    else:
        if not cnp.PyArray_CheckExact(out):
            return None
        xo = <cnp.ndarray>out
        if (xo.ndim != 2 or cnp.PyArray_TYPE(xo) != typenum or xo.shape[0] != m or xo.shape[1] != n
                or not cnp.PyArray_ISWRITEABLE(xo) or not cnp.PyArray_ISNOTSWAPPED(xo)
                or xo.strides[1] != esz
                or xo.strides[0] % esz or not disjoint(xo, xa) or not disjoint(xo, xb)):
            return None
    if c is not None and c is not out:
        if cnp.PyArray_CopyInto(xo, xc) < 0:
            raise RuntimeError("pytpp.brgemm: copying c into out failed")
    if m == 0 or n == 0:
        return xo
    cdef pytpp_gemm_desc d
    cdef pytpp_batch bt
    cdef int err
    d.m, d.n, d.k = m, n, k
    d.rsa, d.csa = xa.strides[1] // esz, xa.strides[2] // esz
    d.ldb, d.csb = xb.strides[1] // esz, xb.strides[2] // esz
    d.ldc = xo.strides[0] // esz
    d.dtype = dt
    d.alpha, d.beta = 1.0, beta
    bt.mode = PYTPP_BATCH_STRIDE
    bt.count = nb
    bt.stride_a, bt.stride_b = xa.strides[0] // esz, xb.strides[0] // esz
    bt.off_a = bt.off_b = NULL
    bt.ptr_a = bt.ptr_b = NULL
    cdef const pytpp_gemm_kernels *kt = level(isa).brgemm[dt]
    cdef const void *pa = cnp.PyArray_DATA(xa)
    cdef const void *pb = cnp.PyArray_DATA(xb)
    cdef void *pc = cnp.PyArray_DATA(xo)
    with nogil:
        err = pytpp_brgemm(kt, cache_info(), &d, pa, pb, pc, &bt, num_threads())
    if err:
        raise MemoryError("pytpp.brgemm: scratch allocation failed")
    return xo
