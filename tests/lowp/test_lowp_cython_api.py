"""A third-party Cython module cimports the low-precision handles' C side (LowpHandle,
pytpp/_core/_lowp.pxd) and calls it inside nogil, as tests/tpp/test_cython_api.py does for the
float handles: 8-bit (exact against int64) and bf16 (bit-equal to the Python handle), stride and
offset batches, and a pre-packed B with the zero-point compensation."""
import textwrap

import numpy as np
import pytest

import pytpp

ml_dtypes = pytest.importorskip("ml_dtypes")

PYX = textwrap.dedent('''
    # cython: language_level=3
    cimport numpy as cnp
    from libc.stdint cimport int32_t, int64_t
    from pytpp._core._lowp cimport LowpHandle
    from pytpp._core.cengine cimport pytpp_batch, PYTPP_BATCH_STRIDE, PYTPP_BATCH_OFFSET

    cdef pytpp_batch batch(LowpHandle h, long count):
        cdef pytpp_batch bt
        bt.mode = PYTPP_BATCH_STRIDE
        bt.count = count
        bt.stride_a = h.stride_a
        bt.stride_b = h.stride_b
        bt.off_a = NULL
        bt.off_b = NULL
        bt.ptr_a = NULL
        bt.ptr_b = NULL
        return bt

    def run(LowpHandle h, cnp.ndarray a, cnp.ndarray b, cnp.ndarray c, long count):
        cdef pytpp_batch bt = batch(h, count)
        cdef const void *pa = cnp.PyArray_DATA(a)
        cdef const void *pb = cnp.PyArray_DATA(b)
        cdef void *pc = cnp.PyArray_DATA(c)
        cdef int err
        with nogil:
            err = h.run(pa, pb, pc, &bt, NULL)
        return err

    def run_offsets(LowpHandle h, cnp.ndarray a, cnp.ndarray b, cnp.ndarray c,
                    cnp.ndarray off_a, cnp.ndarray off_b):
        cdef pytpp_batch bt = batch(h, off_a.shape[0])
        bt.mode = PYTPP_BATCH_OFFSET
        bt.off_a = <const int64_t *>cnp.PyArray_DATA(off_a)
        bt.off_b = <const int64_t *>cnp.PyArray_DATA(off_b)
        cdef const void *pa = cnp.PyArray_DATA(a)
        cdef const void *pb = cnp.PyArray_DATA(b)
        cdef void *pc = cnp.PyArray_DATA(c)
        cdef int err
        with nogil:
            err = h.run(pa, pb, pc, &bt, NULL)
        return err

    def run_packed(LowpHandle h, cnp.ndarray a, cnp.ndarray packed, cnp.ndarray c,
                   cnp.ndarray comp):
        cdef const void *pa = cnp.PyArray_DATA(a)
        cdef const void *pp = cnp.PyArray_DATA(packed)
        cdef void *pc = cnp.PyArray_DATA(c)
        cdef const int32_t *pcomp = <const int32_t *>cnp.PyArray_DATA(comp)
        cdef int err
        with nogil:
            err = h.run_packed(pa, pp, pc, pcomp)
        return err
''')

@pytest.fixture(scope="module")
def user_module(cython_user_module):
    return cython_user_module("user_lowp", PYX)


def ints(rng, shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


@pytest.mark.parametrize("m,n,k,count,vnni", [(1, 19, 37, 2, False), (3, 64, 9, 1, True),
                                              (13, 33, 70, 3, False), (4, 7, 5, 2, True)])
def test_int8_stride_batches_in_nogil(user_module, isa, rng, m, n, k, count, vnni):
    a, b = ints(rng, (count, m, k), np.uint8), ints(rng, (count, k, n), np.int8)
    h = pytpp.tpp.brgemm(m, n, k, dtype=np.uint8, b_dtype=np.int8, beta=0.0, b_vnni=vnni)
    bb = pytpp.linalg.vnni_pack(b) if vnni else b
    c = np.full((m, n), 5, np.int32)
    assert user_module.run(h.c_handle, a, bb, c, count) == 0
    want = np.einsum("bik,bkj->ij", a.astype(np.int64), b.astype(np.int64)).astype(np.int32)
    np.testing.assert_array_equal(c, want)


def test_int8_offsets_and_beta_one(user_module, isa, rng):
    m, n, k = 5, 21, 17
    a, b = ints(rng, (4, m, k), np.int8), ints(rng, (4, k, n), np.int8)
    h = pytpp.tpp.brgemm(m, n, k, dtype=np.int8, beta=1.0, batch="offset")
    pick = [3, 0, 2]
    c0 = ints(rng, (m, n), np.int8).astype(np.int32)
    c = c0.copy()
    off_a = np.array(pick, np.int64) * m * k
    off_b = np.array(pick, np.int64) * k * n
    assert user_module.run_offsets(h.c_handle, a, b, c, off_a, off_b) == 0
    want = np.einsum("bik,bkj->ij", a[pick].astype(np.int64), b[pick].astype(np.int64))
    np.testing.assert_array_equal(c, (c0 + want).astype(np.int32))


@pytest.mark.parametrize("adt,m", [(np.uint8, 2), (np.int8, 2), (np.int8, 40)])
def test_int8_packed_b_with_compensation(user_module, isa, rng, adt, m):
    # an s8 A on the quad kernels takes B's column sums from the packed bytes in each call here
    # (the Python handles cache them)
    n, k = 50, 300
    a, b = ints(rng, (m, k), adt), ints(rng, (k, n), np.int8)
    h = pytpp.tpp.gemm(m, n, k, dtype=adt, b_dtype=np.int8, beta=0.0).c_handle
    packed = h.pack_b(b)
    comp = ints(rng, (n,), np.int16).astype(np.int32)
    c = np.empty((m, n), np.int32)
    assert user_module.run_packed(h, a, packed, c, comp) == 0
    np.testing.assert_array_equal(c, (a.astype(np.int64) @ b + comp).astype(np.int32))


def test_bf16_equals_the_python_handle(user_module, isa, rng):
    bf16 = ml_dtypes.bfloat16
    m, n, k, count = 6, 35, 18, 2
    a = rng.standard_normal((count, m, k)).astype(bf16)
    b = rng.standard_normal((count, k, n)).astype(bf16)
    for vnni in (False, True):
        h = pytpp.tpp.brgemm(m, n, k, dtype=bf16, beta=0.0, b_vnni=vnni)
        bb = pytpp.linalg.vnni_pack(b) if vnni else b
        want = h(a, bb, np.empty((m, n), np.float32), count)
        c = np.full((m, n), np.nan, np.float32)
        assert user_module.run(h.c_handle, a, bb, c, count) == 0
        np.testing.assert_array_equal(c, want)
        ref = np.einsum("bik,bkj->ij", a.astype(np.float64), b.astype(np.float64))
        assert np.abs(c - ref).max() <= 1e-4 * np.abs(ref).max()
