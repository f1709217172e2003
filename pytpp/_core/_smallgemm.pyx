# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Small-GEMM glue: kernel handles for one small product (``pytpp.tpp.gemm``), strided stacks
(``batched_matmul``) and DBCSR-style indexed stacks (``pytpp.linalg.matmul_stack``).
Validation happens here or in the Python callers, with the GIL; the C engine runs without it."""
import numpy as np
cimport numpy as cnp
from pytpp._core._arrays cimport dtype_code, elem_strides, operand, operand_layout, overlaps

_FN = "pytpp.tpp.gemm kernel"
from libc.stdint cimport int64_t
from pytpp._core.cengine cimport PYTPP_F64, PYTPP_F32, PYTPP_HANDLE_NOGIL_FLOPS
from pytpp._core.csmallgemm cimport *
from pytpp._core._runtime cimport num_threads, active_isa, level
from pytpp._core.cdispatch cimport pytpp_level_kernels

cnp.import_array()


# Tuning switch (benchmarks, tests): -1 lets the cost model choose the vector flavour, 0/1 forces it.
cdef int _force_flavour = -1



cdef int64_t _chunk = 0
cdef int _force_pf = -1


def set_chunk(int64_t n):
    """Tuning switch: products per kernel call in a stack (0: the planner's choice)."""
    global _chunk
    _chunk = n


def set_prefetch(int which):
    """Tuning switch: 1 runs the prefetching stack kernels for every stack, 0 never, -1 as planned
    (PF_AHEAD kernels only for stacks too large for the cache)."""
    global _force_pf
    _force_pf = which


def set_flavour(int which):
    """Force the vector flavour (0: widest, 1: ymm on AVX-512 or xmm on AVX2) or let the planner
    choose (-1)."""
    global _force_flavour
    _force_flavour = which


cdef void make_plan(pytpp_smm_plan *p, int isa, int dt, int64_t m, int64_t n, int64_t k,
                    int64_t rsa, int64_t csa, int64_t rsb, int64_t csb, int64_t rsc, int64_t csc,
                    double alpha, double beta, int flags=PYTPP_SMM_ALLOW_COPIES) noexcept nogil:
    cdef const pytpp_level_kernels *lv = level(isa)
    cdef int force = _force_flavour if _force_flavour < lv.smm_flavours else -1
    pytpp_smm_plan_make(p, lv.smm[dt], lv.smm_flavours, force, dt, m, n, k,
                        rsa, csa, rsb, csb, rsc, csc, alpha, beta, flags)
    if _chunk > 0:
        p.per_chunk = _chunk
    if _force_pf >= 0:
        p.pf = 2 if _force_pf else 0


def plan_info(int64_t m, int64_t n, int64_t k, dtype, int64_t rsa, int64_t csa, int64_t rsb,
              int64_t csb, int64_t rsc, int64_t csc, double alpha=1.0, double beta=0.0):
    """The planner's choice for a shape and layout, as a dict (for tests and tuning)."""
    cdef pytpp_smm_plan p
    cdef int dt = dtype_code(np.dtype(dtype).num)
    if dt < 0:
        raise TypeError(f"dtype {dtype!r}: expected float64 or float32")
    make_plan(&p, active_isa(), dt, m, n, k, rsa, csa, rsb, csb, rsc, csc, alpha, beta)
    return dict(table=p.kt.name.decode(), vl=p.kt.vl, swap=bool(p.swap), pack_b=bool(p.pack_b),
                scratch_c=bool(p.scratch_c), nvec=p.nvec, n_ib=p.n_ib, n_jb=p.n_jb,
                n_last=p.n_last, tail=("none", "mask", "shift")[p.tail], mr=p.mr,
                nfull=p.nfull, nshort=p.nshort, per_chunk=min(p.per_chunk, 1 << 62),
                pf=bool(p.pf), pfd=p.pfd, cost=p.cost)


# ------------------------------------------------------------------------------------------------
# strided stacks: out[l] = alpha * a[l] @ b[l] + beta * out[l]

def stack_matmul(cnp.ndarray a, cnp.ndarray b, cnp.ndarray out, double alpha=1.0, double beta=0.0):
    """out[l] = alpha * a[l] @ b[l] + beta * out[l] for 3-D a (L|1, m, k), b (L|1, k, n) and
    out (L, m, n) of any strides (stride 0 broadcasts). The caller checked shapes; operands of
    another float dtype than out, or with strides that are not whole elements, are converted."""
    cdef int typenum = cnp.PyArray_TYPE(out)
    cdef int dt = dtype_code(typenum)
    if dt < 0:
        raise TypeError(f"out has dtype {out.dtype}; expected float64 or float32")
    cdef int64_t esz = out.itemsize
    if cnp.PyArray_TYPE(a) != typenum or not elem_strides(a, esz):
        a = np.asarray(a, dtype=out.dtype, order="C") if cnp.PyArray_TYPE(a) != typenum \
            else np.ascontiguousarray(a)
    if cnp.PyArray_TYPE(b) != typenum or not elem_strides(b, esz):
        b = np.asarray(b, dtype=out.dtype, order="C") if cnp.PyArray_TYPE(b) != typenum \
            else np.ascontiguousarray(b)
    cdef cnp.ndarray work = out
    if not elem_strides(out, esz):
        work = np.ascontiguousarray(out) if beta != 0.0 else np.empty_like(out, order="C")
    cdef int64_t L = work.shape[0], m = work.shape[1], n = work.shape[2], k = a.shape[2]
    cdef int64_t sa = 0 if a.shape[0] == 1 else a.strides[0] // esz
    cdef int64_t sb = 0 if b.shape[0] == 1 else b.strides[0] // esz
    cdef int64_t sc = work.strides[0] // esz
    cdef pytpp_smm_plan p
    cdef int err = 0
    cdef const void *pa = cnp.PyArray_DATA(a)
    cdef const void *pb = cnp.PyArray_DATA(b)
    cdef void *pc = cnp.PyArray_DATA(work)
    make_plan(&p, active_isa(), dt, m, n, k, a.strides[1] // esz, a.strides[2] // esz,
              b.strides[1] // esz, b.strides[2] // esz, work.strides[1] // esz,
              work.strides[2] // esz, alpha, beta)
    with nogil:
        err = pytpp_smm_stack(&p, L, pa, sa, pb, sb, pc, sc, num_threads())
    if err:
        raise MemoryError("pytpp: small-GEMM scratch allocation failed")
    if work is not out:
        out[...] = work
    return out


# ------------------------------------------------------------------------------------------------
# DBCSR stacks: c[c_index[i]] += alpha * a[a_index[i]] @ b[b_index[i]]

def indexed_matmul(cnp.ndarray a, cnp.ndarray b, cnp.ndarray c, cnp.ndarray a_index,
                   cnp.ndarray b_index, cnp.ndarray c_index, double alpha):
    """The caller validated dtypes (a, b, c alike), shapes, index ranges (contiguous int64 arrays of
    one length) and element strides. Returns False, doing nothing, when b or c lacks the unit
    strides the kernels need (the caller then passes contiguous copies)."""
    cdef int dt = dtype_code(cnp.PyArray_TYPE(c))
    cdef int64_t esz = c.itemsize
    cdef int64_t m = c.shape[1], n = c.shape[2], k = a.shape[2], nc = c.shape[0]
    cdef int64_t count = a_index.shape[0]
    cdef pytpp_smm_plan p
    cdef int err = 0
    make_plan(&p, active_isa(), dt, m, n, k, a.strides[1] // esz, a.strides[2] // esz,
              b.strides[1] // esz, b.strides[2] // esz, c.strides[1] // esz, c.strides[2] // esz,
              alpha, 1.0, PYTPP_SMM_REDUCTION)
    if p.pack_b or p.scratch_c:
        return False
    cdef const void *pa = cnp.PyArray_DATA(a)
    cdef const void *pb = cnp.PyArray_DATA(b)
    cdef void *pc = cnp.PyArray_DATA(c)
    cdef const int64_t *ia = <const int64_t *>cnp.PyArray_DATA(a_index)
    cdef const int64_t *ib = <const int64_t *>cnp.PyArray_DATA(b_index)
    cdef const int64_t *ic = <const int64_t *>cnp.PyArray_DATA(c_index)
    cdef int64_t blk_a = a.strides[0] // esz, blk_b = b.strides[0] // esz, blk_c = c.strides[0] // esz
    with nogil:
        err = pytpp_smm_indexed(&p, pa, blk_a, pb, blk_b, pc, blk_c, nc, count, ia, ib, ic,
                                num_threads())
    if err:
        raise MemoryError("pytpp.linalg.matmul_stack: allocation failed")
    return True


# ------------------------------------------------------------------------------------------------
# kernel handles

cdef class GemmKernel:
    """A dispatched small GEMM: ``C = alpha * op(A) @ op(B) + beta * C`` for one product.

    Made by :func:`pytpp.tpp.gemm`; calling it checks only types, contiguity, sizes and
    aliasing. Cython code can ``cimport`` it and call ``run`` without the GIL.
    """

    def __init__(self, int64_t m, int64_t n, int64_t k, int dtype, int isa, int64_t lda,
                 int64_t ldb, int64_t ldc, bint trans_a, bint trans_b, double alpha, double beta,
                 descriptor):
        cdef int64_t rsa, csa, rsb, csb
        self.ext_a = operand_layout(trans_a, m, k, lda, &rsa, &csa)
        self.ext_b = operand_layout(trans_b, k, n, ldb, &rsb, &csb)
        self.blk_a = (k if trans_a else m) * lda     # a block spans its stored rows
        self.blk_b = (n if trans_b else k) * ldb
        self.blk_c = m * ldc
        self.ext_c = 0 if m == 0 or n == 0 else (m - 1) * ldc + n
        make_plan(&self.plan, isa, dtype, m, n, k, rsa, csa, rsb, csb, ldc, 1, alpha, beta)
        self.typenum = cnp.NPY_FLOAT64 if dtype == PYTPP_F64 else cnp.NPY_FLOAT32
        self.release_gil = 2.0 * m * n * k >= PYTPP_HANDLE_NOGIL_FLOPS   # (tuning.h)
        self.descriptor = descriptor

    @property
    def isa(self):
        """Kernel flavour the plan chose (e.g. 'avx512', 'avx512y' for ymm, 'avx2', 'ref')."""
        return self.plan.kt.name.decode()

    def __repr__(self):
        return f"<pytpp GEMM kernel {self.descriptor} isa={self.isa}>"

    cdef void run(self, const void *a, const void *b, void *c) noexcept nogil:
        pytpp_smm_run1(&self.plan, a, b, c, NULL)

    cdef int run_stack(self, int64_t count, const void *a, int64_t sa, const void *b, int64_t sb,
                       void *c, int64_t sc, int nthreads) noexcept nogil:
        return pytpp_smm_stack(&self.plan, count, a, sa, b, sb, c, sc, nthreads)

    def __call__(self, a, b, c):
        """``k(a, b, c)``: C-contiguous arrays of the kernel's dtype addressed with its lda/ldb/ldc;
        c is updated in place and returned."""
        cdef char *pc = operand(c, _FN, "c", self.typenum, self.ext_c, True, NULL)
        cdef const char *pa = operand(a, _FN, "a", self.typenum, self.ext_a, False, NULL)
        cdef const char *pb = operand(b, _FN, "b", self.typenum, self.ext_b, False, NULL)
        cdef int64_t esz = self.plan.esz
        if overlaps(pc, self.ext_c * esz, pa, self.ext_a * esz) or \
                overlaps(pc, self.ext_c * esz, pb, self.ext_b * esz):
            raise ValueError("pytpp.tpp.gemm kernel: c overlaps a or b; the output must not alias "
                             "an input")
        if self.release_gil:
            with nogil:
                pytpp_smm_run1(&self.plan, pa, pb, pc, NULL)
        else:
            pytpp_smm_run1(&self.plan, pa, pb, pc, NULL)
        return c

    def stack(self, a, b, c, int64_t count):
        """Run `count` products on consecutive blocks of the flat buffers a, b, c: block i of A
        starts at element i * rows * lda (rows = m, or k when trans_a), likewise B and C.
        Parallel over the products on ``pytpp.get_num_threads()`` threads."""
        if count < 0:
            raise ValueError(f"pytpp.tpp.gemm kernel: count must be >= 0, got {count}")
        cdef int64_t ea = self.blk_a, eb = self.blk_b, ec = self.blk_c
        # extents in Python integers: a count no buffer can hold must not wrap around int64
        pycount = int(count)
        need = [(pycount - 1) * int(blk) + int(ext) if pycount else 0
                for blk, ext in ((ea, self.ext_a), (eb, self.ext_b), (ec, self.ext_c))]
        for name, arr, nd in (("a", a, need[0]), ("b", b, need[1]), ("c", c, need[2])):
            if nd >= (1 << 59):   # more bytes than an address space holds
                raise ValueError(f"pytpp.tpp.gemm kernel: {count} products address {nd} elements "
                                 f"of {name}; no buffer holds that many")
        cdef int64_t na = need[0], nb_ = need[1], nc = need[2]
        cdef char *pc = operand(c, _FN, "c", self.typenum, nc, True, NULL)
        cdef const char *pa = operand(a, _FN, "a", self.typenum, na, False, NULL)
        cdef const char *pb = operand(b, _FN, "b", self.typenum, nb_, False, NULL)
        cdef int64_t esz = self.plan.esz
        if overlaps(pc, nc * esz, pa, na * esz) or overlaps(pc, nc * esz, pb, nb_ * esz):
            raise ValueError("pytpp.tpp.gemm kernel: c overlaps a or b; the output must not alias "
                             "an input")
        cdef int err
        with nogil:
            err = pytpp_smm_stack(&self.plan, count, pa, ea, pb, eb, pc, ec, num_threads())
        if err:
            raise MemoryError("pytpp: small-GEMM scratch allocation failed")
        return c
