# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Glue of the low-precision BRGEMM (pytpp/_core/include/pytpp/gemm_lowp.h): kernel choice,
pointers in, the C driver out, GIL released. The caller (pytpp.tpp._lowp) validated shapes,
strides, dtypes and bounds: this module only turns them into the C descriptor."""
cimport numpy as cnp
import ml_dtypes
import numpy as np
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from libc.stdint cimport int64_t, int32_t, uint32_t
from pytpp._core._runtime cimport num_threads, features, level, cache_info
from pytpp._core.cengine cimport pytpp_batch, PYTPP_BATCH_STRIDE
from pytpp._core._matmul cimport pytpp_pk_kernels
from pytpp._core.cdispatch cimport (pytpp_i8_kernels, pytpp_i8_select, pytpp_i8_kernel_list,
                                    PYTPP_I8_NKERNELS, pytpp_bf16_select, pytpp_bf16_kernels,
                                    PYTPP_BF16_NKERNELS)
from pytpp._core import _runtime

cdef extern from "pytpp/cpu.h" nogil:
    enum:
        PYTPP_ISA_AVX2

cnp.import_array()

cdef extern from "pytpp/gemm_lowp.h" nogil:
    int pytpp_lowp_qlinear(const pytpp_lowp_kernels *ks, const float *x, int64_t m, int64_t k,
                           int64_t ldx, int qmax, const void *packed_b, int64_t n,
                           const int64_t *colsum, const double *w_scale, const float *bias,
                           int relu, float *y, int64_t ldy, cnp.uint8_t *q, int nthreads,
                           double *scale_out, int *zp_out)
    int pytpp_lowp_qlinear_u8(const pytpp_lowp_kernels *ks, const cnp.uint8_t *q, int64_t m,
                              int64_t k, int64_t ldq, double scale, int zp, const void *packed_b,
                              int64_t n, const int64_t *colsum, const double *w_scale,
                              const float *bias, int relu, float *y, int64_t ldy, int nthreads)

U8, S8, BF16, I32, F32 = PYTPP_LP_U8, PYTPP_LP_S8, PYTPP_LP_BF16, PYTPP_LP_I32, PYTPP_LP_F32
# kernel choice (dispatch.h enum pytpp_i8_kernel / pytpp_bf16_kernel): 0 = the level's best;
# the bf16 list ends with the AVX2 lane kernels (the level row's bf16_lanes)
I8_KERNELS = tuple(pytpp_i8_kernel_list[i].name.decode() for i in range(PYTPP_I8_NKERNELS))
BF16_KERNELS = tuple(pytpp_bf16_kernels[i].name.decode() for i in range(PYTPP_BF16_NKERNELS)) \
    + ("avx2_lanes",)
cdef int _BF16_LANES = PYTPP_BF16_NKERNELS
cdef int _best_isa = _runtime.LEVELS.index(_runtime.best_isa())


cdef int _BF16_TYPENUM = np.dtype(ml_dtypes.bfloat16).num


cdef inline pytpp_batch stride_batch(int64_t count, int64_t stride_a,
                                     int64_t stride_b) noexcept nogil:
    """A stride-mode batch: count blocks, element strides stride_a / stride_b apart."""
    cdef pytpp_batch bt
    bt.mode = PYTPP_BATCH_STRIDE
    bt.count = count
    bt.stride_a = stride_a
    bt.stride_b = stride_b
    bt.off_a = NULL
    bt.off_b = NULL
    bt.ptr_a = NULL
    bt.ptr_b = NULL
    return bt


cdef inline int _typenum(int lp_type) noexcept:
    """numpy's type number of an operand type (enum pytpp_lowp_type)."""
    if lp_type == PYTPP_LP_U8:
        return cnp.NPY_UINT8
    if lp_type == PYTPP_LP_S8:
        return cnp.NPY_INT8
    if lp_type == PYTPP_LP_I32:
        return cnp.NPY_INT32
    if lp_type == PYTPP_LP_F32:
        return cnp.NPY_FLOAT32
    return _BF16_TYPENUM


def i8_kernels_available(bint a_signed=False, bint b_signed=True, bint a7=False):
    """Names of the 8-bit kernels this CPU runs for that signedness (for tests); with `a7`,
    also those that need A in [0, 127]."""
    return tuple(I8_KERNELS[i] for i in range(1, PYTPP_I8_NKERNELS)
                 if pytpp_i8_select(_best_isa, features(), i, a_signed, b_signed) != NULL
                 and (a7 or not pytpp_i8_kernel_list[i].a7_only))


cdef int select(int isa, int which, int a_type, int b_type, pytpp_lowp_kernels *ks) except -1:
    ks.i8 = NULL
    ks.bf16 = NULL
    ks.l1 = cache_info().l1
    cdef int at = isa if which == 0 else _best_isa
    if a_type == PYTPP_LP_BF16:
        if which == _BF16_LANES or (which == 0 and level(isa).bf16_lanes != NULL):
            ks.i8 = level(at if which else isa).bf16_lanes
            if ks.i8 == NULL:   # the lanes need the AVX2 level
                ks.i8 = level(PYTPP_ISA_AVX2).bf16_lanes if _best_isa >= PYTPP_ISA_AVX2 else NULL
            if ks.i8 == NULL:
                raise ValueError("bf16 kernel 'avx2_lanes' is not available on this CPU")
            return 0
        ks.bf16 = pytpp_bf16_select(at, features(), which)
        if ks.bf16 == NULL:
            raise ValueError(f"bf16 kernel {BF16_KERNELS[which]!r} is not available on this CPU")
    else:
        ks.i8 = pytpp_i8_select(at, features(), which, a_type == PYTPP_LP_S8,
                                b_type == PYTPP_LP_S8)
        if ks.i8 == NULL:
            raise ValueError(f"8-bit kernel {I8_KERNELS[which]!r} is not available on this CPU "
                             f"for these operand types")
    return 0


def kernel_name(int isa, int which, int a_type, int b_type):
    """The table a call with these arguments runs (for tests and `info`)."""
    cdef pytpp_lowp_kernels ks
    select(isa, which, a_type, b_type, &ks)
    if ks.bf16 != NULL:
        return ks.bf16.name.decode()
    return ks.i8.name.decode()



cdef int fill_desc(pytpp_lowp_desc *d, tuple geom) except -1:
    (d.m, d.n, d.k, d.rsa, d.csa, d.g, d.rs_g, d.rs_e, d.cs, d.ldc, d.a_type, d.b_type,
     d.c_type, d.accumulate) = geom[:14]
    d.b_packed = geom[14] if len(geom) > 14 else 0
    d.colsum_scale = geom[15] if len(geom) > 15 else 0
    d.b_colsum = NULL
    d.epilogue = NULL
    d.epi_ctx = NULL
    return 0


def packed_bytes(int isa, int which, int a_type, int b_type, int64_t k, int64_t n):
    """Bytes of a k x n B pre-packed for the kernels a call with these arguments runs."""
    cdef pytpp_lowp_kernels ks
    select(isa, which, a_type, b_type, &ks)
    return pytpp_lowp_packed_bytes(&ks, k, n)


def pack_b(int isa, int which, tuple geom, cnp.ndarray b, cnp.ndarray dst):
    """Pack B (geom as for `run`; its k, n, B layout and types) into dst (uint8, at least
    packed_bytes long) for those kernels."""
    cdef pytpp_lowp_desc d
    fill_desc(&d, geom)
    cdef pytpp_lowp_kernels ks
    select(isa, which, d.a_type, d.b_type, &ks)
    if cnp.PyArray_NBYTES(dst) < pytpp_lowp_packed_bytes(&ks, d.k, d.n):
        raise ValueError("pack_b: dst is too small")
    cdef const void *pb = cnp.PyArray_DATA(b)
    cdef void *pd = cnp.PyArray_DATA(dst)
    with nogil:
        pytpp_lowp_pack_b(&ks, &d, pb, pd)


def packed_colsums(int isa, int which, int a_type, int64_t k, int64_t n, cnp.ndarray packed):
    """The (n,) int32 column sums of a B packed by pack_b for these kernels (run's b_colsum),
    or None for kernels without them."""
    cdef pytpp_lowp_kernels ks
    select(isa, which, a_type, PYTPP_LP_S8, &ks)
    cdef cnp.ndarray out = cnp.PyArray_EMPTY(1, [max(n, 1)], cnp.NPY_INT32, 0)
    cdef const void *pp = cnp.PyArray_DATA(packed)
    cdef int32_t *po = <int32_t *>cnp.PyArray_DATA(out)
    cdef int err
    with nogil:
        err = pytpp_lowp_packed_colsums(&ks, k, n, pp, po)
    return None if err else out


def run(int isa, int which, object a, object b, cnp.ndarray c, tuple geom, int mode,
        int64_t count, int64_t stride_a, int64_t stride_b, object off_a, object off_b,
        object comp, object b_colsum=None):
    """One BRGEMM. geom = (m, n, k, rsa, csa, g, rs_g, rs_e, cs, ldc, a_type, b_type, c_type,
    accumulate[, b_packed[, colsum_scale]]), strides in elements. mode 0 stride (a, b arrays at
    their first block), 1 offset (off_a / off_b int64 arrays), 2 address (a, b sequences of
    arrays). b_colsum: a pre-packed B's column sums (packed_colsums) or None."""
    cdef pytpp_lowp_desc d
    fill_desc(&d, geom)
    if b_colsum is not None:
        d.b_colsum = <const int32_t *>cnp.PyArray_DATA(<cnp.ndarray>b_colsum)
    cdef pytpp_lowp_kernels ks
    select(isa, which, d.a_type, d.b_type, &ks)
    cdef pytpp_batch bt = stride_batch(count, stride_a, stride_b)
    bt.mode = mode
    cdef const void *pa = NULL
    cdef const void *pb = NULL
    cdef const void **ptrs = NULL
    cdef cnp.ndarray oa, ob
    cdef const int32_t *pcomp = NULL
    cdef int64_t i
    cdef int err
    if comp is not None:
        pcomp = <const int32_t *>cnp.PyArray_DATA(<cnp.ndarray>comp)
    if mode == 1:
        oa, ob = off_a, off_b
        bt.off_a = <const int64_t *>cnp.PyArray_DATA(oa)
        bt.off_b = <const int64_t *>cnp.PyArray_DATA(ob)
    if mode == 2:
        ptrs = <const void **>PyMem_Malloc(2 * max(count, 1) * sizeof(void *))
        if ptrs == NULL:
            raise MemoryError()
        for i in range(count):
            ptrs[i] = cnp.PyArray_DATA(<cnp.ndarray>a[i])
            ptrs[count + i] = cnp.PyArray_DATA(<cnp.ndarray>b[i])
        bt.ptr_a = ptrs
        bt.ptr_b = ptrs + count
    else:
        pa = cnp.PyArray_DATA(<cnp.ndarray>a)
        pb = cnp.PyArray_DATA(<cnp.ndarray>b)
    cdef void *pc = cnp.PyArray_DATA(c)
    cdef int nt = num_threads()
    try:
        with nogil:
            err = pytpp_lowp_brgemm(&ks, &d, pa, pb, pc, &bt, pcomp, nt)
    finally:
        PyMem_Free(ptrs)
    if err == -1:
        raise MemoryError("pytpp: no memory for the packed panels")
    if err:
        raise ValueError("pytpp: the 8-bit kernel cannot take these operand types")


cdef object _qlinear(int isa, int which, cnp.ndarray x, cnp.ndarray q, double scale, int zp,
                     int qmax, cnp.ndarray packed, cnp.ndarray colsum, cnp.ndarray w_scale,
                     object bias, bint relu, cnp.ndarray y):
    """qlinear on float32 x (q None: the layer quantizes it; qmax) or qlinear_u8 on uint8 q
    (x None: scale and zp given); returns (scale, zp)."""
    cdef pytpp_lowp_kernels ks
    select(isa, which, PYTPP_LP_U8, PYTPP_LP_S8, &ks)
    cdef cnp.ndarray src = x if x is not None else q
    cdef int64_t m = src.shape[0], k = src.shape[1], n = y.shape[1]
    cdef int64_t lds = src.strides[0] // src.itemsize if m > 1 else k
    cdef int64_t ldy = y.strides[0] // 4 if m > 1 else n
    cdef const void *pp = cnp.PyArray_DATA(packed)
    cdef const int64_t *pcs = <const int64_t *>cnp.PyArray_DATA(colsum)
    cdef const double *pws = <const double *>cnp.PyArray_DATA(w_scale)
    cdef const float *pbias = NULL
    if bias is not None:
        pbias = <const float *>cnp.PyArray_DATA(<cnp.ndarray>bias)
    cdef float *py = <float *>cnp.PyArray_DATA(y)
    cdef int nt = num_threads()
    cdef int err
    cdef cnp.ndarray scratch
    cdef const float *px
    cdef cnp.uint8_t *pq
    if x is not None:
        scratch = cnp.PyArray_EMPTY(1, [max(m * k, 1)], cnp.NPY_UINT8, 0)
        px = <const float *>cnp.PyArray_DATA(x)
        pq = <cnp.uint8_t *>cnp.PyArray_DATA(scratch)
        with nogil:
            err = pytpp_lowp_qlinear(&ks, px, m, k, lds, qmax, pp, n, pcs, pws, pbias, relu, py,
                                     ldy, pq, nt, &scale, &zp)
    else:
        pq = <cnp.uint8_t *>cnp.PyArray_DATA(q)
        with nogil:
            err = pytpp_lowp_qlinear_u8(&ks, pq, m, k, lds, scale, zp, pp, n, pcs, pws, pbias,
                                        relu, py, ldy, nt)
    if err == -3:
        raise ValueError("pytpp.quant.QuantizedLinear: x holds NaN or inf")
    if err == -1:
        raise MemoryError("pytpp: no memory for the packed panels")
    if err:
        raise ValueError("pytpp: the 8-bit kernel cannot take these operand types")
    return scale, zp


def qlinear(int isa, int which, cnp.ndarray x, cnp.ndarray packed, cnp.ndarray colsum,
            cnp.ndarray w_scale, object bias, bint relu, int qmax, cnp.ndarray y):
    """A dynamically quantized dense layer's forward pass (gemm_lowp.h pytpp_lowp_qlinear): x
    float32 (m, k) with unit column stride, packed the u8 x s8 weights packed for (isa, which),
    colsum int64 (n,), w_scale float64 (n,), bias float32 (n,) or None, y float32 (m, n) with unit
    column stride. Returns (scale, zero_point) of x; ValueError if x holds NaN or inf."""
    return _qlinear(isa, which, x, None, 1.0, 0, qmax, packed, colsum, w_scale, bias, relu, y)


def qlinear_u8(int isa, int which, cnp.ndarray q, double scale, int zp, cnp.ndarray packed,
               cnp.ndarray colsum, cnp.ndarray w_scale, object bias, bint relu, cnp.ndarray y):
    """The layer of `qlinear` on x already quantized (gemm_lowp.h pytpp_lowp_qlinear_u8): q
    uint8 (m, k) with unit column stride, its scale and zero point; the other arguments as
    there."""
    _qlinear(isa, which, None, q, scale, zp, 0, packed, colsum, w_scale, bias, relu, y)


cdef class LowpHandle:
    """The C-level side of a low-precision handle (``handle.c_handle``): cimport it from
    pytpp/_core/_lowp.pxd and call ``run`` / ``run_packed`` inside ``nogil``."""

    def __init__(self, int isa, int which, int64_t m, int64_t n, int64_t k, int g, int a_type,
                 int b_type, int c_type, bint accumulate, object descriptor):
        select(isa, which, a_type, b_type, &self.ks)
        self.m, self.n, self.k = m, n, k
        self.descriptor = descriptor
        self.desc.m, self.desc.n, self.desc.k = m, n, k
        self.desc.rsa, self.desc.csa = k, 1
        self.desc.g = g
        if g == 1:      # plain (k, n) rows
            self.desc.rs_g, self.desc.rs_e, self.desc.cs = n, 0, 1
        else:           # VNNI (ceil(k/g), n, g)
            self.desc.rs_g, self.desc.rs_e, self.desc.cs = g * n, 1, g
        self.desc.ldc = n
        self.desc.a_type, self.desc.b_type, self.desc.c_type = a_type, b_type, c_type
        self.desc.accumulate = accumulate
        self.desc.b_packed = 0
        self.desc.colsum_scale = 0
        self.desc.b_colsum = NULL
        self.desc.epilogue = NULL
        self.desc.epi_ctx = NULL
        self.stride_a = m * k
        self.stride_b = ((k + g - 1) // g) * g * n

    cdef int run(self, const void *a, const void *b, void *c, const pytpp_batch *batch,
                 const int32_t *comp) noexcept nogil:
        return pytpp_lowp_brgemm(&self.ks, &self.desc, a, b, c, batch, comp, num_threads())

    cdef int run_packed(self, const void *a, const void *packed_b, void *c,
                        const int32_t *comp) noexcept nogil:
        cdef pytpp_lowp_desc d = self.desc
        d.b_packed = 1
        cdef pytpp_batch bt = stride_batch(1, 0, 0)
        return pytpp_lowp_brgemm(&self.ks, &d, a, packed_b, c, &bt, comp, num_threads())

    def pack_b(self, cnp.ndarray b):
        """B (C-contiguous, the handle's B layout and type) packed for run_packed: a uint8
        array to keep alive while it is used."""
        if not b.flags.c_contiguous:
            raise ValueError("LowpHandle.pack_b: b must be C-contiguous")
        if cnp.PyArray_NBYTES(b) < self.stride_b * (2 if self.desc.b_type == PYTPP_LP_BF16 else 1):
            raise ValueError("LowpHandle.pack_b: b is smaller than one B block")
        cdef cnp.ndarray dst = cnp.PyArray_ZEROS(
            1, [max(pytpp_lowp_packed_bytes(&self.ks, self.k, self.n), 1)], cnp.NPY_UINT8, 0)
        cdef const void *pb = cnp.PyArray_DATA(b)
        cdef void *pd = cnp.PyArray_DATA(dst)
        with nogil:
            pytpp_lowp_pack_b(&self.ks, &self.desc, pb, pd)
        return dst

    def fast_call(self, a, b, c, count=None):
        """Run ``h(a, b, c)`` (GEMM: count None) or ``h(a, b, c, count)`` (stride batch) at once
        when every operand is an exact numpy array, C-contiguous, aligned and in native byte
        order, of exactly this handle's types and shapes, c writeable and sharing no memory
        with a or b, count an int >= 0: the checks of the Python handle at a tenth of their
        cost (an in-cache 16 x 64^3 8-bit BRGEMM takes 8 us). Returns False, having done
        nothing, for anything else: the Python handle's checks then take the call."""
        cdef int64_t n_ = 1
        cdef int batched = count is not None
        if batched:
            if type(count) is not int or count < 0:
                return False
            n_ = count
        if type(a) is not cnp.ndarray or type(b) is not cnp.ndarray or type(c) is not cnp.ndarray:
            return False
        cdef cnp.ndarray xa = <cnp.ndarray>a, xb = <cnp.ndarray>b, xc = <cnp.ndarray>c
        if not (cnp.PyArray_IS_C_CONTIGUOUS(xa) and cnp.PyArray_ISBEHAVED_RO(xa)
                and cnp.PyArray_IS_C_CONTIGUOUS(xb) and cnp.PyArray_ISBEHAVED_RO(xb)
                and cnp.PyArray_IS_C_CONTIGUOUS(xc) and cnp.PyArray_ISBEHAVED(xc)):
            return False
        if (cnp.PyArray_TYPE(xa) != _typenum(self.desc.a_type)
                or cnp.PyArray_TYPE(xb) != _typenum(self.desc.b_type)
                or cnp.PyArray_TYPE(xc) != _typenum(self.desc.c_type)):
            return False
        cdef int g = self.desc.g
        cdef int lead = 1 if batched else 0
        if (xc.ndim != 2 or xc.shape[0] != self.m or xc.shape[1] != self.n
                or xa.ndim != 2 + lead or xa.shape[lead] != self.m or xa.shape[lead + 1] != self.k
                or xb.ndim != 2 + lead + (g > 1) or (batched and (xa.shape[0] < n_
                                                                 or xb.shape[0] < n_))):
            return False
        if g == 1 and (xb.shape[lead] != self.k or xb.shape[lead + 1] != self.n):
            return False
        if g > 1 and (xb.shape[lead] != (self.k + g - 1) // g or xb.shape[lead + 1] != self.n
                      or xb.shape[lead + 2] != g):
            return False
        cdef const char *pa = <const char *>cnp.PyArray_DATA(xa)
        cdef const char *pb = <const char *>cnp.PyArray_DATA(xb)
        cdef char *pc = <char *>cnp.PyArray_DATA(xc)
        cdef const char *ec = pc + cnp.PyArray_NBYTES(xc)
        if ((pc < pa + cnp.PyArray_NBYTES(xa) and pa < ec)
                or (pc < pb + cnp.PyArray_NBYTES(xb) and pb < ec)):
            return False
        cdef pytpp_batch bt = stride_batch(n_, self.stride_a, self.stride_b)
        cdef int err
        with nogil:
            err = pytpp_lowp_brgemm(&self.ks, &self.desc, pa, pb, pc, &bt, NULL, num_threads())
        if err == -1:
            raise MemoryError("pytpp: no memory for the packed panels")
        if err:
            raise ValueError("pytpp: the 8-bit kernel cannot take these operand types")
        return True

    def __repr__(self):
        return f"LowpHandle({self.descriptor!r})"
