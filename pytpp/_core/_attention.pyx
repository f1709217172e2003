# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Glue of the fused attention, forward and backward (pytpp/_core/include/pytpp/attention.h): pointers in, C engine
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



cdef struct sdpa_call:
    const pytpp_gemm_kernels *gk
    const pytpp_ew_kernels *ew
    int64_t batch, L, S, E, Ev
    const void *q
    const void *k
    const void *v
    const void *mask
    pytpp_sdpa_dropout drop
    int nt


cdef sdpa_call _call(cnp.ndarray q, cnp.ndarray k, cnp.ndarray v, object mask, uint64_t seed,
                     uint32_t thresh, double keep):
    """What the forward and the backward share: the active level's tables for q's dtype, the
    sizes, the operands' data, the dropout and the thread count."""
    cdef sdpa_call c
    cdef int dt = PYTPP_F64 if cnp.PyArray_TYPE(q) == cnp.NPY_DOUBLE else PYTPP_F32
    cdef int isa = active_isa()
    c.gk = level(isa).brgemm[dt]
    c.ew = level(isa).eltwise[dt]
    c.batch, c.L, c.E = cnp.PyArray_DIM(q, 0), cnp.PyArray_DIM(q, 1), cnp.PyArray_DIM(q, 2)
    c.S, c.Ev = cnp.PyArray_DIM(k, 1), cnp.PyArray_DIM(v, 2)
    c.q, c.k, c.v = cnp.PyArray_DATA(q), cnp.PyArray_DATA(k), cnp.PyArray_DATA(v)
    c.mask = NULL if mask is None else cnp.PyArray_DATA(<cnp.ndarray>mask)
    c.drop.seed, c.drop.thresh, c.drop.keep = seed, thresh, keep
    c.nt = num_threads()
    return c

def sdpa_forward(cnp.ndarray q, cnp.ndarray k, cnp.ndarray v, cnp.ndarray o, object mask,
                 int64_t msb, int64_t msl, int64_t mss, bint causal, double scale,
                 uint64_t seed=0, uint32_t thresh=0, double keep=1.0, int path=0):
    """thresh > 0: dropout of the probabilities (attention.h's pytpp_sdpa_dropout). path: 0 picks
    the loop structure, 1 keys in tiles (online softmax), 2 full score rows (attention.h)."""
    if path not in (0, 1, 2):
        raise ValueError(f"sdpa_forward: path must be 0, 1 or 2, got {path}")
    cdef sdpa_call c = _call(q, k, v, mask, seed, thresh, keep)
    cdef void *po = cnp.PyArray_DATA(o)
    cdef int err
    with nogil:
        err = pytpp_sdpa_forward(c.gk, c.ew, c.batch, c.L, c.S, c.E, c.Ev, c.q, c.k, c.v, po,
                                 c.mask, msb, msl, mss, causal, scale,
                                 &c.drop if thresh else NULL, path, c.nt)
    if err:
        raise MemoryError("pytpp.nn.scaled_dot_product_attention: no memory for the tiles")


def sdpa_backward(cnp.ndarray go, cnp.ndarray q, cnp.ndarray k, cnp.ndarray v, cnp.ndarray dq,
                  cnp.ndarray dk, cnp.ndarray dv, object mask, int64_t msb, int64_t msl,
                  int64_t mss, bint causal, double scale, uint64_t seed=0, uint32_t thresh=0,
                  double keep=1.0):
    """Gradients dq, dk, dv (written) of the attention of q, k, v for the output gradient go
    (attention.h's pytpp_sdpa_backward); thresh > 0: the forward's dropout."""
    cdef sdpa_call c = _call(q, k, v, mask, seed, thresh, keep)
    cdef const void *pg = cnp.PyArray_DATA(go)
    cdef void *pdq = cnp.PyArray_DATA(dq)
    cdef void *pdk = cnp.PyArray_DATA(dk)
    cdef void *pdv = cnp.PyArray_DATA(dv)
    cdef int err
    with nogil:
        err = pytpp_sdpa_backward(c.gk, c.ew, c.batch, c.L, c.S, c.E, c.Ev, c.q, c.k, c.v, pg,
                                  pdq, pdk, pdv, c.mask, msb, msl, mss, causal, scale,
                                  &c.drop if thresh else NULL, c.nt)
    if err:
        raise MemoryError("pytpp.nn.scaled_dot_product_attention_backward: no memory for the "
                          "score blocks")
