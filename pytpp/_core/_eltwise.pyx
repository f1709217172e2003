# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Glue of the element-wise TPPs: pointers and strides in, C engine out, GIL released.

Callers (pytpp.tpp._eltwise, pytpp.nn) have validated dtypes, shapes and extents; these entry
points only pick the kernel table for the ISA level and run the driver."""
cimport numpy as cnp
from libc.stdint cimport int64_t, uint64_t, uint32_t, uint16_t, uint8_t
from pytpp._core.celtwise cimport *
from pytpp._core._runtime cimport num_threads, level
from pytpp._core._arrays cimport operand
from pytpp._core.cengine cimport PYTPP_NISA, PYTPP_NDTYPES

cnp.import_array()

# storage dtype codes (enum pytpp_ew_dtype) and call kinds (enum pytpp_ew_kind), read from C
F64, F32, BF16 = PYTPP_EW_F64, PYTPP_EW_F32, PYTPP_EW_BF16
KIND_UNARY, KIND_BINARY = PYTPP_EW_KIND_UNARY, PYTPP_EW_KIND_BINARY
KIND_TERNARY = PYTPP_EW_KIND_TERNARY
KIND_CMP, KIND_BLEND, KIND_RAND, KIND_SOFTMAX = (PYTPP_EW_KIND_CMP, PYTPP_EW_KIND_BLEND,
                                                 PYTPP_EW_KIND_RAND, PYTPP_EW_KIND_SOFTMAX)
KIND_DROPOUT, KIND_DROPOUT_INV = PYTPP_EW_KIND_DROPOUT, PYTPP_EW_KIND_DROPOUT_INV
# integer storage of the (de)quantize TPPs (enum pytpp_q_dtype)
Q_U8, Q_S8, Q_I32 = PYTPP_Q_U8, PYTPP_Q_S8, PYTPP_Q_I32
# how their parameters vary (enum pytpp_q_params)
Q_PER_TENSOR, Q_PER_COLUMN, Q_PER_ROW = PYTPP_Q_PER_TENSOR, PYTPP_Q_PER_COLUMN, PYTPP_Q_PER_ROW


cdef dict op_codes(int family):
    """{op name: C code} of a family, in the order of its op list (eltwise_ops.h)."""
    cdef dict codes = {}
    cdef int op = 0
    cdef const char *name = pytpp_ew_op_name(family, op)
    while name != NULL:
        codes[name.decode()] = op
        op += 1
        name = pytpp_ew_op_name(family, op)
    return codes


# op name -> code, per family; the only source of the codes Python passes to C
UNARY_CODES = op_codes(PYTPP_EW_FAM_UNARY)
BINARY_CODES = op_codes(PYTPP_EW_FAM_BINARY)
TERNARY_CODES = op_codes(PYTPP_EW_FAM_TERNARY)
CMP_CODES = op_codes(PYTPP_EW_FAM_CMP)
REDUCE_CODES = op_codes(PYTPP_EW_FAM_REDUCE)
# approximation name -> the exact op it approximates, in list order (the first is approx=True's)
APPROX_OF = {name: next(n for n, c in UNARY_CODES.items() if c == pytpp_ew_approx_of(code))
             for name, code in UNARY_CODES.items() if pytpp_ew_approx_of(code) >= 0}



cdef inline const pytpp_ew_kernels *table(int isa, int cdt) except NULL:
    if isa < 0 or isa >= PYTPP_NISA or cdt < 0 or cdt >= PYTPP_NDTYPES:
        raise ValueError(f"no element-wise kernel table for isa={isa}, compute dtype={cdt}")
    return level(isa).eltwise[cdt]


def table_name(int isa, int cdt):
    return table(isa, cdt).name.decode()


def table_slots(int isa, int cdt):
    """{family: [(op name, filled?)]} of the slots every table must fill (the streaming and
    fused-bfloat16 forms may be absent): for the consistency tests."""
    cdef const pytpp_ew_kernels *kt = table(isa, cdt)
    cdef int i
    res = {"unary": [(n, kt.unary[c] != NULL) for n, c in UNARY_CODES.items()],
           "binary": [(n, kt.binary[c] != NULL) for n, c in BINARY_CODES.items()],
           "ternary": [(n, kt.ternary[c] != NULL) for n, c in TERNARY_CODES.items()]}
    res["other"] = [("cmp", kt.cmp != NULL), ("blend", kt.blend != NULL),
                    ("dropout", kt.dropout != NULL), ("dropout_inv", kt.dropout_inv != NULL),
                    ("rand", kt.rand != NULL), ("softmax", kt.softmax != NULL),
                    ("reduce_row", kt.reduce_row != NULL), ("reduce_acc", kt.reduce_acc != NULL),
                    ("transpose", kt.transpose != NULL),
                    ("dequantize", kt.dequantize != NULL),
                    # quantize runs in float64; float32 tables have its float32-input form
                    ("quantize" if cdt == PYTPP_EW_F64 else "quantize_f32",
                     (kt.quantize if cdt == PYTPP_EW_F64 else kt.quantize_f32) != NULL)]
    res["convert"] = []
    for i, dt in enumerate(("f64", "f32", "bf16")):
        res["convert"].append((f"load_{dt}", kt.load_cvt[i] != NULL))
        res["convert"].append((f"store_{dt}", kt.store_cvt[i] != NULL))
    return res


cdef inline void *ptr(cnp.ndarray a):
    return cnp.PyArray_DATA(a)


def check_buffer(arr, name, dtype, Py_ssize_t need, fn, bint writable=False):
    """The kernel handles' check of one operand (_arrays.operand), callable from Python: ~0.1 us
    per operand, where numpy attribute checks cost ~0.6."""
    operand(arr, fn, name, (<cnp.dtype>dtype).type_num, need, writable, NULL)
    return arr


def run(int kind, int op, int64_t m, int64_t n, tuple ins, out, int cdt, int isa,
        cnp.ndarray bits=None, int64_t ldm=0, uint64_t seed=0, uint64_t base=0,
        uint32_t thresh=0, double scale=1.0, int approx=0, threads=None):
    """ins: tuple of (array, ld, dtype code, bcast); out: (array, ld, dtype code) or None.
    Each array's data pointer addresses element (0, 0)."""
    cdef pytpp_ew_call c
    cdef const pytpp_ew_kernels *kt = table(isa, cdt)
    cdef int k, err, nt = num_threads() if threads is None else threads
    c.kind, c.op, c.nin, c.m, c.n = kind, op, len(ins), m, n
    for k in range(c.nin):
        arr, ld, dt, bc = ins[k]
        c.in_[k].p = ptr(<cnp.ndarray>arr)
        c.in_[k].ld, c.in_[k].dtype, c.in_[k].bcast = ld, dt, bc
    if out is not None:
        c.out.p = ptr(<cnp.ndarray>out[0])
        c.out.ld, c.out.dtype, c.out.bcast = out[1], out[2], 0
    else:
        c.out.p = NULL
        c.out.ld, c.out.dtype, c.out.bcast = n, cdt, 0
    c.bits = <uint8_t *>ptr(bits) if bits is not None else NULL
    c.ldm, c.seed, c.base, c.thresh, c.scale, c.approx = ldm, seed, base, thresh, scale, approx
    with nogil:
        err = pytpp_ew_run(kt, &c, nt)
    if err:
        raise MemoryError("pytpp: element-wise scratch allocation failed")


def reduce(cnp.ndarray x, int64_t m, int64_t n, int64_t ldx, int x_dt, cnp.ndarray out, int out_dt,
           int axis, int op, bint squared, int cdt, int isa):
    cdef const pytpp_ew_kernels *kt = table(isa, cdt)
    cdef void *px = ptr(x)
    cdef void *po = ptr(out)
    cdef int err, nt = num_threads()
    with nogil:
        err = pytpp_ew_reduce(kt, m, n, px, ldx, x_dt, po, out_dt, axis, op, squared, nt)
    if err:
        raise MemoryError("pytpp: reduction scratch allocation failed")


def transpose(cnp.ndarray x, int64_t m, int64_t n, int64_t ldx, cnp.ndarray y, int64_t ldy,
              int esz, int isa):
    cdef const pytpp_ew_kernels *k32 = table(isa, 1)
    cdef const pytpp_ew_kernels *k64 = table(isa, 0)
    cdef void *px = ptr(x)
    cdef void *py = ptr(y)
    cdef int nt = num_threads()
    with nogil:
        pytpp_ew_transpose(k32, k64, esz, m, n, px, ldx, py, ldy, nt)


def quantize(cnp.ndarray x, int64_t m, int64_t n, int64_t ldx, int x_dt, cnp.ndarray q,
             int64_t ldq, bint q_signed, cnp.ndarray s, cnp.ndarray z, int pmode, int64_t period,
             int isa, threads=None):
    """q (m x n bytes) = the quantized x (eltwise.h pytpp_ew_quantize); s, z: C-contiguous
    float64 parameters the caller checked. Returns True when x held a NaN."""
    cdef const pytpp_ew_kernels *kt32 = table(isa, PYTPP_EW_F32)
    cdef const pytpp_ew_kernels *kt64 = table(isa, PYTPP_EW_F64)
    cdef const void *px = ptr(x)
    cdef uint8_t *pq = <uint8_t *>ptr(q)
    cdef const double *ps = <const double *>ptr(s)
    cdef const double *pz = <const double *>ptr(z)
    cdef int err, nt = num_threads() if threads is None else threads
    with nogil:
        err = pytpp_ew_quantize(kt32, kt64, m, n, px, ldx, x_dt, pq, ldq, q_signed, ps, pz,
                                pmode, period, nt)
    if err < 0:
        raise MemoryError("pytpp: quantize scratch allocation failed")
    return err == 1


def dequantize(cnp.ndarray q, int64_t m, int64_t n, int64_t ldq, int q_dt, cnp.ndarray y,
               int64_t ldy, int y_dt, cnp.ndarray s, cnp.ndarray z, int pmode, int64_t period,
               int isa, threads=None):
    """y (m x n, storage y_dt) = the dequantized q (eltwise.h pytpp_ew_dequantize)."""
    cdef const pytpp_ew_kernels *kt = table(isa, PYTPP_EW_F64 if y_dt == PYTPP_EW_F64
                                            else PYTPP_EW_F32)
    cdef const void *pq = ptr(q)
    cdef void *py = ptr(y)
    cdef const double *ps = <const double *>ptr(s)
    cdef const double *pz = <const double *>ptr(z)
    cdef int err, nt = num_threads() if threads is None else threads
    with nogil:
        err = pytpp_ew_dequantize(kt, m, n, pq, ldq, q_dt, py, ldy, y_dt, ps, pz, pmode, period,
                                  nt)
    if err < 0:
        raise MemoryError("pytpp: dequantize scratch allocation failed")


def vnni(cnp.ndarray x, int64_t k, int64_t n, int64_t ldx, cnp.ndarray y, int esz, int alpha):
    cdef void *px = ptr(x)
    cdef void *py = ptr(y)
    with nogil:
        pytpp_ew_vnni(esz, alpha, k, n, px, ldx, py)


def vnni_transpose(cnp.ndarray x, int64_t k, int64_t n, cnp.ndarray y, int esz, int alpha):
    cdef void *px = ptr(x)
    cdef void *py = ptr(y)
    with nogil:
        pytpp_ew_vnni_transpose(esz, alpha, k, n, px, py)


def gather_rows(cnp.ndarray x, int64_t ldx, const int64_t[::1] idx, int64_t n, cnp.ndarray y,
                int64_t ldy, int esz):
    cdef void *px = ptr(x)
    cdef void *py = ptr(y)
    cdef int64_t count = idx.shape[0]
    cdef int nt = num_threads()
    if count == 0:
        return
    with nogil:
        pytpp_ew_gather_rows(esz, count, n, px, ldx, &idx[0], py, ldy, nt)


def scatter_rows(cnp.ndarray x, int64_t ldx, const int64_t[::1] idx, int64_t n, cnp.ndarray y,
                 int64_t ldy, int esz):
    cdef void *px = ptr(x)
    cdef void *py = ptr(y)
    cdef int64_t count = idx.shape[0]
    if count == 0:
        return
    with nogil:
        pytpp_ew_scatter_rows(esz, count, n, px, ldx, &idx[0], py, ldy)


def unpack_f32(cnp.ndarray x, cnp.ndarray hi, cnp.ndarray lo):
    cdef int64_t n = cnp.PyArray_SIZE(x)
    cdef const uint32_t *px = <const uint32_t *>ptr(x)
    cdef uint16_t *ph = <uint16_t *>ptr(hi)
    cdef uint16_t *pl = <uint16_t *>ptr(lo)
    with nogil:
        pytpp_ew_unpack_f32(n, px, ph, pl)


def pack_f32(cnp.ndarray hi, cnp.ndarray lo, cnp.ndarray x):
    cdef int64_t n = cnp.PyArray_SIZE(x)
    cdef uint32_t *px = <uint32_t *>ptr(x)
    cdef const uint16_t *ph = <const uint16_t *>ptr(hi)
    cdef const uint16_t *pl = <const uint16_t *>ptr(lo)
    with nogil:
        pytpp_ew_pack_f32(n, ph, pl, px)
