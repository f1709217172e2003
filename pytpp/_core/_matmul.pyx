# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Glue of pytpp.matmul: a fast path for plain 2-D float32/float64 products (checks, allocation
and the C call without leaving C), and strided entries the Python layer calls after validating.
Every C call runs without the GIL."""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int64_t, uint16_t, intptr_t
from pytpp._core.cengine cimport *
from pytpp._core._arrays cimport elem_strides, disjoint
from pytpp._core._runtime cimport num_threads, active_isa, cache_info, level, features
from pytpp._core.cdispatch cimport (pytpp_bf16_select, pytpp_bf16_rows_select,
                                    pytpp_bf16_kernels, PYTPP_BF16_NKERNELS)
from pytpp._core.celtwise cimport pytpp_ew_kernels
from pytpp._core import _runtime

cnp.import_array()

import threading

# Packing buffers reused across calls (fresh memory costs a page fault per 4 KiB on first touch:
# 1-2 ms for a 512^3 product). One workspace for the process, taken with a non-blocking lock: a
# concurrent call from another Python thread just lets C allocate its own buffers.
_ws_lock = threading.Lock()
cdef object _ws = None
cdef size_t _WS_MAX = 256 * 1024 * 1024


cdef bint acquire_workspace(size_t need, void **ws, size_t *wsb) except -1:
    """Lend the process-wide packing workspace (grown to `need` bytes) when no other thread
    holds it; returns whether it was taken (the caller releases `_ws_lock`). Otherwise the C
    driver allocates its own buffers."""
    global _ws
    if not need or need > _WS_MAX or not _ws_lock.acquire(False):
        return False
    if _ws is None or (<cnp.ndarray>_ws).nbytes < need:
        _ws = None
        _ws = np.empty(need + need // 4, np.uint8)
    ws[0] = cnp.PyArray_DATA(<cnp.ndarray>_ws)
    wsb[0] = (<cnp.ndarray>_ws).nbytes
    return True


cdef void release_workspace():
    """Give back the workspace acquire_workspace lent."""
    _ws_lock.release()


cdef int run_blocked(const pytpp_mm_kernels *ks, const pytpp_mm_blocking *bk,
                     const pytpp_mm_desc *d, const void *pa, const void *pb, void *pc,
                     bint prepacked=False, const pytpp_mm_epilogue *ep=NULL,
                     str fn="pytpp.matmul") except -1:
    """One product without the GIL (B raw, or pre-packed), with an optional epilogue and the
    shared workspace when it is free."""
    cdef int nt = num_threads()
    cdef size_t need = pytpp_matmul_workspace(ks, bk, d, prepacked, nt)
    cdef void *ws = NULL
    cdef size_t wsb = 0
    cdef int err
    cdef bint locked = False
    locked = acquire_workspace(need, &ws, &wsb)
    try:
        with nogil:
            if prepacked:
                err = pytpp_matmul_prepacked_fused(ks, bk, d, pa, pb, pc, nt, ws, wsb, ep)
            else:
                err = pytpp_matmul_fused(ks, bk, d, pa, pb, pc, nt, ws, wsb, ep)
    finally:
        if locked:
            _ws_lock.release()
    if err:
        raise MemoryError(f"{fn}: packing buffer allocation failed")
    return 0

# bf16 kernel choice (enum pytpp_bf16_kernel, dispatch.h): 0 auto, or one named for tests
BF16_KERNELS = tuple(pytpp_bf16_kernels[i].name.decode() for i in range(PYTPP_BF16_NKERNELS))
cdef int _best_isa = _runtime.LEVELS.index(_runtime.best_isa())

DT_F64 = PYTPP_F64
DT_F32 = PYTPP_F32
DT_BF16 = PYTPP_MM_BF16


def bf16_kernels_available():
    """Names of the bf16 kernels this CPU can run (for tests)."""
    return tuple(BF16_KERNELS[i] for i in range(1, PYTPP_BF16_NKERNELS)
                 if pytpp_bf16_select(_best_isa, features(), i) != NULL)


cdef int select(int dt, int isa, int bf16_kernel, pytpp_mm_kernels *ks) except -1:
    """The kernel tables of a product: the level's BRGEMM and packed-panel tables, or the bf16
    kernel (the level's best for 0, else the one named, which the CPU must have) and, for the
    level's best, the products of rows of a few rows of x."""
    ks.kt = NULL
    ks.kp = NULL
    ks.ew = NULL
    ks.rows_bt = NULL
    ks.rows_bn = NULL
    if dt != PYTPP_MM_BF16:
        ks.kt = level(isa).brgemm[dt]
        ks.kp = level(isa).packed[dt]
        ks.ew = level(isa).eltwise[dt]
        return 0
    ks.ew = level(isa).eltwise[PYTPP_F32]      # its 32-bit transpose packs w.T's pairs
    ks.kp = pytpp_bf16_select(isa if bf16_kernel == 0 else _best_isa, features(), bf16_kernel)
    if ks.kp == NULL:
        raise ValueError(f"bf16 kernel {BF16_KERNELS[bf16_kernel]!r} is not available on this CPU")
    # a named kernel runs alone (tests of that kernel), unless it has the rows kernels itself
    if bf16_kernel == 0:
        ks.rows_bt = pytpp_bf16_rows_select(isa, features(), 1)
        ks.rows_bn = pytpp_bf16_rows_select(isa, features(), 0)
    else:
        ks.rows_bt = ks.kp if ks.kp.dot_bt != NULL else NULL
        ks.rows_bn = ks.kp if ks.kp.dot_bn != NULL else NULL
    return 0


def kernel_name(int dt, int isa, int bf16_kernel=0):
    cdef pytpp_mm_kernels ks
    select(dt, isa, bf16_kernel, &ks)
    return ks.kp.name.decode()


cdef int _bf16_typenum = -1


def set_bf16_typenum(int num):
    """Register numpy's type number of ml_dtypes.bfloat16 (done by pytpp.linalg._matmul)."""
    global _bf16_typenum
    _bf16_typenum = num


def fast(a, b, out=None):
    """``a @ b`` for 1-D or 2-D ndarrays of one dtype float32/float64/bfloat16 (and, when given,
    an `out` of that dtype and the 2-D product's shape, unit column stride, not overlapping the
    inputs); None for anything else, which the general Python path then handles (and
    validates). A 1-D operand is a row (a) or a column (b), its dimension removed from the result
    as numpy does (1-D @ 1-D: a scalar)."""
    if type(a) is not cnp.ndarray or type(b) is not cnp.ndarray:
        return None
    cdef cnp.ndarray x = <cnp.ndarray>a, y = <cnp.ndarray>b, c
    cdef int nx = cnp.PyArray_NDIM(x), ny = cnp.PyArray_NDIM(y)
    if nx < 1 or nx > 2 or ny < 1 or ny > 2 or ((nx == 1 or ny == 1) and out is not None):
        return None
    cdef int t = cnp.PyArray_TYPE(x)
    cdef bint bf16 = t == _bf16_typenum and t >= 0
    if t != cnp.PyArray_TYPE(y) or (t != cnp.NPY_FLOAT32 and t != cnp.NPY_FLOAT64 and not bf16):
        return None
    cdef int64_t m = cnp.PyArray_DIM(x, 0) if nx == 2 else 1, k = cnp.PyArray_DIM(x, nx - 1)
    cdef int64_t n = cnp.PyArray_DIM(y, 1) if ny == 2 else 1
    if cnp.PyArray_DIM(y, 0) != k:
        return None
    cdef int64_t esz = 8 if t == cnp.NPY_FLOAT64 else (2 if bf16 else 4)
    cdef int ct = cnp.NPY_FLOAT32 if bf16 else t     # C's dtype (bf16 accumulates in fp32)
    cdef int64_t cesz = 4 if bf16 else esz
    if not cnp.PyArray_ISNOTSWAPPED(x) or not cnp.PyArray_ISNOTSWAPPED(y):
        return None
    if not elem_strides(x, esz) or not elem_strides(y, esz):
        return None
    cdef cnp.npy_intp dims[2]
    cdef int nc = nx + ny - 2
    if out is None:
        dims[0] = m if nx == 2 else n
        dims[1] = n
        c = cnp.PyArray_EMPTY(nc, dims, ct, 0)
    else:
        if type(out) is not cnp.ndarray:
            return None
        c = <cnp.ndarray>out
        if cnp.PyArray_NDIM(c) != 2 or cnp.PyArray_TYPE(c) != ct or cnp.PyArray_DIM(c, 0) != m \
                or cnp.PyArray_DIM(c, 1) != n or not cnp.PyArray_ISWRITEABLE(c) \
                or not cnp.PyArray_ISNOTSWAPPED(c) \
                or cnp.PyArray_STRIDE(c, 1) != cesz or cnp.PyArray_STRIDE(c, 0) % cesz:
            return None
        if not disjoint(c, x) or not disjoint(c, y):
            return None
    if m == 0 or n == 0:
        return c
    if k == 0:
        return None
    cdef pytpp_mm_desc d
    d.m, d.n, d.k = m, n, k
    d.csa = cnp.PyArray_STRIDE(x, nx - 1) // esz
    d.rsa = cnp.PyArray_STRIDE(x, 0) // esz if nx == 2 else k * d.csa
    d.rsb = cnp.PyArray_STRIDE(y, 0) // esz
    d.csb = cnp.PyArray_STRIDE(y, 1) // esz if ny == 2 else 1
    # C's row stride: (m, n) as given; (m,) a column of m rows; (n,) and () one row
    d.ldc = (cnp.PyArray_STRIDE(c, 0) // cesz if nc == 2 else 1 if nx == 2 else n)
    d.dtype = PYTPP_F64 if t == cnp.NPY_FLOAT64 else (PYTPP_MM_BF16 if bf16 else PYTPP_F32)
    cdef pytpp_mm_kernels ks
    cdef int isa = active_isa()
    select(d.dtype, isa, 0, &ks)
    cdef pytpp_mm_blocking bk
    pytpp_mm_blocking_init(&ks, cache_info(), d.dtype, &bk)
    run_blocked(&ks, &bk, &d, cnp.PyArray_DATA(x), cnp.PyArray_DATA(y), cnp.PyArray_DATA(c))
    return c[()] if nc == 0 else c


cdef inline void fill_desc(pytpp_mm_desc *d, cnp.ndarray a, cnp.ndarray b, cnp.ndarray c, int dt):
    """Core (last two) dimensions of a (m, k), b (k, n) and c (m, n) into a descriptor."""
    cdef int na = cnp.PyArray_NDIM(a), nb = cnp.PyArray_NDIM(b), nc = cnp.PyArray_NDIM(c)
    cdef int64_t ea = cnp.PyArray_ITEMSIZE(a), ec = cnp.PyArray_ITEMSIZE(c)
    d.m = cnp.PyArray_DIM(a, na - 2)
    d.k = cnp.PyArray_DIM(a, na - 1)
    d.n = cnp.PyArray_DIM(b, nb - 1)
    d.rsa, d.csa = cnp.PyArray_STRIDE(a, na - 2) // ea, cnp.PyArray_STRIDE(a, na - 1) // ea
    d.rsb, d.csb = cnp.PyArray_STRIDE(b, nb - 2) // ea, cnp.PyArray_STRIDE(b, nb - 1) // ea
    d.ldc = cnp.PyArray_STRIDE(c, nc - 2) // ec
    d.dtype = dt


def gemm_blocked(cnp.ndarray a, cnp.ndarray b, cnp.ndarray c, int dt, int isa, dict blk,
                 int bf16_kernel=0):
    """`gemm` with explicit blocking (a dict like `blocking()` returns): tuning and tests."""
    return gemm(a, b, c, dt, isa, bf16_kernel, blk)
    return c


def gemm(cnp.ndarray a, cnp.ndarray b, cnp.ndarray c, int dt, int isa, int bf16_kernel=0,
         dict blk=None):
    """c = a @ b for 2-D a (m, k), b (k, n) of the compute dtype `dt` (bf16 as its 2-byte dtype)
    and c (m, n) float32/float64 with unit column stride, blocked for the caches (or by `blk`).
    The caller validated everything."""
    cdef pytpp_mm_kernels ks
    select(dt, isa, bf16_kernel, &ks)
    cdef pytpp_mm_desc d
    fill_desc(&d, a, b, c, dt)
    cdef pytpp_mm_blocking bk
    if blk is None:
        pytpp_mm_blocking_init(&ks, cache_info(), dt, &bk)
    else:
        to_blocking(blk, &bk)
    run_blocked(&ks, &bk, &d, cnp.PyArray_DATA(a), cnp.PyArray_DATA(b), cnp.PyArray_DATA(c))
    return c


def gemm_batch(cnp.ndarray a, cnp.ndarray b, cnp.ndarray c, const int64_t[::1] off_a,
               const int64_t[::1] off_b, const int64_t[::1] off_c, int dt, int isa,
               int bf16_kernel=0):
    """c_l = a_l @ b_l for l < len(off_a): core matrices of a, b, c (last two dimensions' shapes
    and strides) at element offsets off_* from each array's data pointer."""
    cdef pytpp_mm_kernels ks
    select(dt, isa, bf16_kernel, &ks)
    cdef pytpp_mm_desc d
    fill_desc(&d, a, b, c, dt)
    cdef int64_t count = off_a.shape[0]
    if off_b.shape[0] != count or off_c.shape[0] != count:
        raise ValueError("offset arrays differ in length")
    cdef const void *pa = cnp.PyArray_DATA(a)
    cdef const void *pb = cnp.PyArray_DATA(b)
    cdef void *pc = cnp.PyArray_DATA(c)
    cdef int err = 0
    if count == 0:
        return c
    with nogil:
        err = pytpp_matmul_batch(&ks, cache_info(), &d, pa, pb, pc, count, &off_a[0], &off_b[0],
                                 &off_c[0], num_threads())
    if err:
        raise MemoryError("pytpp.matmul: packing buffer allocation failed")
    return c


def blocking(int dt, int isa, int bf16_kernel=0):
    """The register and cache blocking pytpp.matmul uses for this dtype and ISA level."""
    cdef pytpp_mm_kernels ks
    select(dt, isa, bf16_kernel, &ks)
    cdef pytpp_mm_blocking bk
    pytpp_mm_blocking_init(&ks, cache_info(), dt, &bk)
    return dict(mr=bk.mr, nr=bk.nr, vl=bk.vl, kc=bk.kc, mc=bk.mc, nc=bk.nc,
                nopack_bytes=bk.nopack_bytes, widened=bk.bf16_widened, dot_flags=bk.dot_flags,
                kernel=ks.kp.name.decode())


cdef void to_blocking(dict blk, pytpp_mm_blocking *bk) except *:
    bk.mr, bk.nr, bk.vl = blk["mr"], blk["nr"], blk["vl"]
    bk.kc, bk.mc, bk.nc = blk["kc"], blk["mc"], blk["nc"]
    bk.nopack_bytes = blk.get("nopack_bytes", 0)
    bk.bf16_widened = blk.get("widened", 0)
    bk.dot_flags = blk.get("dot_flags", 0)


def packed_size(dict blk, int dt, int64_t k, int64_t n):
    cdef pytpp_mm_blocking bk
    to_blocking(blk, &bk)
    return pytpp_mm_packed_size(&bk, dt, k, n)


def pack_b(dict blk, int dt, cnp.ndarray b, cnp.ndarray packed):
    """Whole B (k, n), any element strides, into `packed` (1-D, packed_size elements)."""
    cdef pytpp_mm_blocking bk
    to_blocking(blk, &bk)
    cdef int64_t esz = cnp.PyArray_ITEMSIZE(b)
    cdef int64_t k = cnp.PyArray_DIM(b, 0), n = cnp.PyArray_DIM(b, 1)
    cdef int64_t rsb = cnp.PyArray_STRIDE(b, 0) // esz, csb = cnp.PyArray_STRIDE(b, 1) // esz
    if cnp.PyArray_SIZE(packed) < pytpp_mm_packed_size(&bk, dt, k, n):
        raise ValueError("packed buffer too small")
    cdef const void *pb = cnp.PyArray_DATA(b)
    cdef void *pp = cnp.PyArray_DATA(packed)
    cdef int nt = num_threads()
    # the level's transpose kernel packs a transposed B (data movement: any level, same bits)
    cdef const pytpp_ew_kernels *ew = level(active_isa()).eltwise[PYTPP_F64 if dt == PYTPP_F64
                                                                  else PYTPP_F32]
    with nogil:
        pytpp_mm_pack_b_full(&bk, ew, dt, k, n, pb, rsb, csb, pp, nt)
    return packed


def gemm_prepacked(cnp.ndarray a, cnp.ndarray packed, int64_t n, cnp.ndarray c,
                   const int64_t[::1] off_a, const int64_t[::1] off_c, dict blk, int dt, int isa,
                   int bf16_kernel=0):
    """c_l = a_l @ B for a pre-packed B (k = a's last dimension, n columns)."""
    cdef pytpp_mm_kernels ks
    select(dt, isa, bf16_kernel, &ks)
    cdef pytpp_mm_blocking bk
    to_blocking(blk, &bk)
    cdef pytpp_mm_desc d
    fill_desc(&d, a, a, c, dt)   # (no B: it is packed)
    d.n = n
    d.rsb = d.csb = 0
    cdef int64_t count = off_a.shape[0]
    if off_c.shape[0] != count:
        raise ValueError("offset arrays differ in length")
    if count == 0:
        return c
    cdef const void *pa = cnp.PyArray_DATA(a)
    cdef const void *pp = cnp.PyArray_DATA(packed)
    cdef void *pc = cnp.PyArray_DATA(c)
    cdef int err
    cdef int nt = num_threads()
    cdef size_t need = pytpp_matmul_workspace(&ks, &bk, &d, 1, nt)
    cdef void *ws = NULL
    cdef size_t wsb = 0
    cdef bint locked = False
    locked = acquire_workspace(need, &ws, &wsb)
    try:
        with nogil:
            err = pytpp_matmul_prepacked(&ks, &bk, &d, pa, pp, pc, count, &off_a[0], &off_c[0],
                                         nt, ws, wsb)
    finally:
        if locked:
            _ws_lock.release()
    if err:
        raise MemoryError("pytpp.matmul: packing buffer allocation failed")
    return c


cdef int fill_epilogue(pytpp_mm_epilogue *ep, int isa, int dt, object bias, int act, int add,
                       object res) except -1:
    """The epilogue act(c + bias) + res with the element-wise kernels of C's dtype (float32 for
    bf16 products); act < 0: none."""
    cdef int cdt = PYTPP_F64 if dt == PYTPP_F64 else PYTPP_F32
    cdef const pytpp_ew_kernels *ew = level(isa).eltwise[cdt]
    ep.bias = NULL if bias is None else cnp.PyArray_DATA(<cnp.ndarray>bias)
    ep.res = NULL
    ep.ldr = 0
    if res is not None:
        ep.res = cnp.PyArray_DATA(<cnp.ndarray>res)
        ep.ldr = cnp.PyArray_STRIDE(<cnp.ndarray>res, 0) // cnp.PyArray_ITEMSIZE(<cnp.ndarray>res)
    ep.add = ew.binary[add]
    ep.act = NULL if act < 0 else ew.unary[act]
    return 0


def linear(cnp.ndarray a, cnp.ndarray b, cnp.ndarray c, int dt, int isa, object bias, int act,
           int add, object res):
    """c = act(a @ b + bias) + res, the epilogue applied to each block of c as it completes.
    a (m, k) and b (k, n) of the compute dtype `dt`, any element strides (b may be a transposed
    weight); c (m, n) of C's dtype with unit column stride; bias (n,) and res (m, n, unit column
    stride) of C's dtype or None; act an element-wise unary code or -1, add the ADD code. The
    caller validated everything."""
    cdef pytpp_mm_kernels ks
    select(dt, isa, 0, &ks)
    cdef pytpp_mm_desc d
    fill_desc(&d, a, b, c, dt)
    cdef pytpp_mm_blocking bk
    pytpp_mm_blocking_init(&ks, cache_info(), dt, &bk)
    cdef pytpp_mm_epilogue ep
    fill_epilogue(&ep, isa, dt, bias, act, add, res)
    run_blocked(&ks, &bk, &d, cnp.PyArray_DATA(a), cnp.PyArray_DATA(b), cnp.PyArray_DATA(c),
                False, &ep, "pytpp.nn.linear")
    return c


def linear_prepacked(cnp.ndarray a, cnp.ndarray packed, int64_t n, cnp.ndarray c, dict blk,
                     int dt, int isa, int bf16_kernel, object bias, int act, int add, object res):
    """`linear` with a pre-packed B (a PackedMatrix layout) for one 2-D a."""
    cdef pytpp_mm_kernels ks
    select(dt, isa, bf16_kernel, &ks)
    cdef pytpp_mm_blocking bk
    to_blocking(blk, &bk)
    cdef pytpp_mm_desc d
    fill_desc(&d, a, a, c, dt)
    d.n = n
    d.rsb = d.csb = 0
    cdef pytpp_mm_epilogue ep
    fill_epilogue(&ep, isa, dt, bias, act, add, res)
    run_blocked(&ks, &bk, &d, cnp.PyArray_DATA(a), cnp.PyArray_DATA(packed), cnp.PyArray_DATA(c),
                True, &ep, "pytpp.nn.PackedLinear")
    return c


def f32_to_bf16(cnp.ndarray src, cnp.ndarray dst):
    """dst (2-D, 2-byte elements, any strides) = src (2-D float32, unit column stride) rounded to
    bfloat16, nearest even."""
    cdef int64_t rows = cnp.PyArray_DIM(src, 0), cols = cnp.PyArray_DIM(src, 1)
    cdef int64_t srs = cnp.PyArray_STRIDE(src, 0) // 4
    cdef int64_t drs = cnp.PyArray_STRIDE(dst, 0) // 2, dcs = cnp.PyArray_STRIDE(dst, 1) // 2
    cdef const float *ps = <const float *>cnp.PyArray_DATA(src)
    cdef uint16_t *pd = <uint16_t *>cnp.PyArray_DATA(dst)
    with nogil:
        pytpp_cvt_f32_bf16(ps, pd, rows, cols, srs, drs, dcs)
    return dst
