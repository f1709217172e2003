# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Glue of the tiled attention (pytpp/_core/include/pytpp/attention.h): pointers in, C engine
out, GIL released. The caller (pytpp.nn._attention) validated everything: q, k, v, o are
C-contiguous (batch, rows, features) of one engine dtype; mask None or an array of that dtype
whose (batch, L, S) element strides are given."""
cimport numpy as cnp
from libc.stdint cimport int64_t, uint64_t, uint32_t
from pytpp._core._runtime cimport num_threads, active_isa, level
from pytpp._core.cengine cimport PYTPP_F64, PYTPP_F32, pytpp_gemm_kernels
from pytpp._core.celtwise cimport pytpp_ew_kernels

cnp.import_array()

cdef extern from "pytpp/attention.h" nogil:
    ctypedef struct pytpp_sdpa_dropout:
        uint64_t seed
        uint32_t thresh
        double keep
    int pytpp_sdpa_forward(const pytpp_gemm_kernels *gk, const pytpp_ew_kernels *ew,
                           int64_t batch, int64_t L, int64_t S, int64_t E, int64_t Ev,
                           const void *q, const void *k, const void *v, void *o,
                           const void *mask, int64_t msb, int64_t msl, int64_t mss, int causal,
                           double scale, const pytpp_sdpa_dropout *drop, int path,
                           int nthreads)
    int pytpp_sdpa_backward(const pytpp_gemm_kernels *gk, const pytpp_ew_kernels *ew,
                            int64_t batch, int64_t L, int64_t S, int64_t E, int64_t Ev,
                            const void *q, const void *k, const void *v, const void *go,
                            void *dq, void *dk, void *dv, const void *mask, int64_t msb,
                            int64_t msl, int64_t mss, int causal, double scale,
                            const pytpp_sdpa_dropout *drop, int nthreads)


def sdpa_forward(cnp.ndarray q, cnp.ndarray k, cnp.ndarray v, cnp.ndarray o, object mask,
                 int64_t msb, int64_t msl, int64_t mss, bint causal, double scale,
                 uint64_t seed=0, uint32_t thresh=0, double keep=1.0, int path=0):
    """thresh > 0: dropout of the probabilities (attention.h's pytpp_sdpa_dropout). path: 0 picks
    the loop structure, 1 keys in tiles (online softmax), 2 full score rows (attention.h)."""
    if path not in (0, 1, 2):
        raise ValueError(f"sdpa_forward: path must be 0, 1 or 2, got {path}")
    cdef int dt = PYTPP_F64 if cnp.PyArray_TYPE(q) == cnp.NPY_DOUBLE else PYTPP_F32
    cdef int isa = active_isa()
    cdef const pytpp_gemm_kernels *gk = level(isa).brgemm[dt]
    cdef const pytpp_ew_kernels *ew = level(isa).eltwise[dt]
    cdef int64_t batch = cnp.PyArray_DIM(q, 0), L = cnp.PyArray_DIM(q, 1)
    cdef int64_t E = cnp.PyArray_DIM(q, 2), S = cnp.PyArray_DIM(k, 1), Ev = cnp.PyArray_DIM(v, 2)
    cdef const void *pq = cnp.PyArray_DATA(q)
    cdef const void *pk = cnp.PyArray_DATA(k)
    cdef const void *pv = cnp.PyArray_DATA(v)
    cdef void *po = cnp.PyArray_DATA(o)
    cdef const void *pm = NULL if mask is None else cnp.PyArray_DATA(<cnp.ndarray>mask)
    cdef int nt = num_threads()
    cdef int err
    cdef pytpp_sdpa_dropout drop
    drop.seed = seed
    drop.thresh = thresh
    drop.keep = keep
    with nogil:
        err = pytpp_sdpa_forward(gk, ew, batch, L, S, E, Ev, pq, pk, pv, po, pm, msb, msl, mss,
                                 causal, scale, &drop if thresh else NULL, path, nt)
    if err:
        raise MemoryError("pytpp.nn.scaled_dot_product_attention: no memory for the tiles")


def sdpa_backward(cnp.ndarray go, cnp.ndarray q, cnp.ndarray k, cnp.ndarray v, cnp.ndarray dq,
                  cnp.ndarray dk, cnp.ndarray dv, object mask, int64_t msb, int64_t msl,
                  int64_t mss, bint causal, double scale, uint64_t seed=0, uint32_t thresh=0,
                  double keep=1.0):
    """Gradients dq, dk, dv (written) of the attention of q, k, v for the output gradient go
    (attention.h's pytpp_sdpa_backward); thresh > 0: the forward's dropout."""
    cdef int dt = PYTPP_F64 if cnp.PyArray_TYPE(q) == cnp.NPY_DOUBLE else PYTPP_F32
    cdef int isa = active_isa()
    cdef const pytpp_gemm_kernels *gk = level(isa).brgemm[dt]
    cdef const pytpp_ew_kernels *ew = level(isa).eltwise[dt]
    cdef int64_t batch = cnp.PyArray_DIM(q, 0), L = cnp.PyArray_DIM(q, 1)
    cdef int64_t E = cnp.PyArray_DIM(q, 2), S = cnp.PyArray_DIM(k, 1), Ev = cnp.PyArray_DIM(v, 2)
    cdef const void *pg = cnp.PyArray_DATA(go)
    cdef const void *pq = cnp.PyArray_DATA(q)
    cdef const void *pk = cnp.PyArray_DATA(k)
    cdef const void *pv = cnp.PyArray_DATA(v)
    cdef void *pdq = cnp.PyArray_DATA(dq)
    cdef void *pdk = cnp.PyArray_DATA(dk)
    cdef void *pdv = cnp.PyArray_DATA(dv)
    cdef const void *pm = NULL if mask is None else cnp.PyArray_DATA(<cnp.ndarray>mask)
    cdef int nt = num_threads()
    cdef int err
    cdef pytpp_sdpa_dropout drop
    drop.seed = seed
    drop.thresh = thresh
    drop.keep = keep
    with nogil:
        err = pytpp_sdpa_backward(gk, ew, batch, L, S, E, Ev, pq, pk, pv, pg, pdq, pdk, pdv, pm,
                                  msb, msl, mss, causal, scale, &drop if thresh else NULL, nt)
    if err:
        raise MemoryError("pytpp.nn.scaled_dot_product_attention_backward: no memory for the "
                          "score blocks")
