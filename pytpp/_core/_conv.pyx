# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Glue of the BRGEMM convolutions (pytpp/_core/include/pytpp/conv.h): pointers in, C engine
out, GIL released. The caller (pytpp.nn._conv) validated everything: arrays C-contiguous (the
NHWC source of nhwc_pad only needs unit channel stride), float32 or float64 (the bf16 entries
and layout transforms: bfloat16 as each says), one dtype per call, shapes consistent."""
cimport numpy as cnp
from libc.stdint cimport int64_t, uint16_t, uint32_t
from pytpp._core._runtime cimport num_threads, active_isa, level, cache_info, features
from pytpp._core.cengine cimport (PYTPP_F64, PYTPP_F32, PYTPP_BATCH_STRIDE, pytpp_gemm_kernels,
                                  pytpp_gemm_desc, pytpp_batch, pytpp_brgemm_many)
from pytpp._core.celtwise cimport pytpp_ew_kernels
from pytpp._core.cdispatch cimport (pytpp_pool_kernels, pytpp_pk_kernels, pytpp_bf16_select,
                                    PYTPP_BF16_AUTO)

cnp.import_array()

cdef extern from "pytpp/conv.h" nogil:
    ctypedef struct pytpp_conv_shape:
        int64_t N, C, H, W, K, R, S, P, Q
        int64_t sh, sw, dh, dw, groups

    void pytpp_conv_blocking(const pytpp_gemm_kernels *gk, int64_t kg, int64_t *nr, int64_t *bk)
    int64_t pytpp_conv_packed_elems(int64_t K, int64_t cg, int64_t R, int64_t S, int64_t groups,
                                    int64_t nr, int64_t bk)
    void pytpp_conv_pack_weight(const pytpp_ew_kernels *ew, int64_t K, int64_t cg, int64_t R,
                                int64_t S, int64_t groups, int64_t nr, int64_t bk, int64_t esz,
                                const void *w, const int64_t *st, void *wpk, int nthreads)
    int pytpp_conv2d_forward(const pytpp_gemm_kernels *gk, const pytpp_ew_kernels *ew,
                             const pytpp_conv_shape *s, const void *x, const void *wpk,
                             int64_t nr, int64_t bk, const void *bias, int act, void *out,
                             int out_nchw, int nthreads)
    int pytpp_conv2d_backward_weight(const pytpp_gemm_kernels *gk, int64_t esz,
                                     const pytpp_conv_shape *s, const void *x, const void *go,
                                     int64_t go_w, void *gw, int nthreads)
    void pytpp_conv_nchw_to_nhwc_pad(const pytpp_ew_kernels *ew, int64_t esz, int64_t N,
                                     int64_t C, int64_t Cd,
                                     int64_t H, int64_t W, int64_t pt, int64_t pb, int64_t pl,
                                     int64_t pr, const void *x, void *y, int nthreads)
    void pytpp_conv_nhwc_pad(int64_t esz, int64_t N, int64_t C, int64_t Cd, int64_t H,
                             int64_t W, int64_t sn, int64_t sh, int64_t sw, int64_t pt, int64_t pb,
                             int64_t pl, int64_t pr, const void *x, void *y, int nthreads)
    void pytpp_conv_nhwc_to_nchw(const pytpp_ew_kernels *ew, int64_t esz, int64_t N, int64_t C,
                                 int64_t H, int64_t W, const void *x, void *y, int nthreads)
    void pytpp_conv_col2im_nhwc(int64_t esz, int64_t N, int64_t H, int64_t W, int64_t C,
                                int64_t p0, int64_t P, int64_t Q, int64_t R, int64_t S,
                                int64_t sh, int64_t sw, int64_t dh, int64_t dw, int64_t pt,
                                int64_t pl, const void *cols, void *x, int nthreads)

    void pytpp_conv_bf16_pairs_swapped(const uint32_t *x, float *y, int64_t n, int nthreads)
    int64_t pytpp_conv_bf16_packed_elems(int64_t K, int64_t C, int64_t R, int64_t S,
                                         int64_t nr)
    void pytpp_conv_bf16_pack(const pytpp_ew_kernels *ew32, int64_t K, int64_t C, int64_t R,
                              int64_t S, int64_t nr, const uint16_t *w, const int64_t *st,
                              uint16_t *wpk, int nthreads)
    int pytpp_conv2d_forward_widened(const pytpp_gemm_kernels *gk32,
                                     const pytpp_ew_kernels *ew32, const pytpp_conv_shape *s,
                                     const float *x,
                                     const float *wpk, int64_t nr, int64_t bk,
                                     const float *bias, int act, void *out, int out_bf16,
                                     int out_nchw, int nthreads)
    int pytpp_conv2d_forward_bf16(const pytpp_pk_kernels *bf, const pytpp_ew_kernels *ew32,
                                  const pytpp_conv_shape *s, const void *x, const void *wpk,
                                  const float *bias, int act, void *out, int out_bf16,
                                  int out_nchw, int nthreads)

cdef extern from "pytpp/pool.h" nogil:
    ctypedef struct pytpp_pool_shape:
        int64_t N, C, H, W, P, Q
        int64_t kh, kw, sh, sw, ph, pw
    int pytpp_pool2d_forward(const pytpp_pool_kernels *kt, int op, int nhwc,
                             const pytpp_pool_shape *s, const void *x, const int64_t *xs,
                             void *y, int64_t *idx, int nthreads)
    int pytpp_pool2d_backward(const pytpp_pool_kernels *kt, int op, int nhwc,
                              const pytpp_pool_shape *s, const void *g, const void *x,
                              const int64_t *idx, void *gx, int nthreads)
    int PYTPP_POOL_BAD_INDEX

cdef extern from "pytpp/yaconv.h" nogil:
    int pytpp_yaconv_forward(const pytpp_gemm_kernels *gk, const pytpp_ew_kernels *ew,
                             const pytpp_conv_shape *s, int64_t pt, int64_t pl, const void *x,
                             int64_t sn, int64_t sxh, int64_t sxw, const void *wpk, int64_t nr,
                             const void *bias, int act, void *out, int nthreads)


cdef inline int _dt(cnp.ndarray a):
    return PYTPP_F64 if cnp.PyArray_TYPE(a) == cnp.NPY_DOUBLE else PYTPP_F32


def blocking(int64_t kg, bint f64):
    """(nr, bk) of the packed layout at the active ISA level for K/groups = kg."""
    cdef int64_t nr = 0, bk = 0
    pytpp_conv_blocking(level(active_isa()).brgemm[PYTPP_F64 if f64 else PYTPP_F32], kg, &nr,
                        &bk)
    return nr, bk


def packed_elems(int64_t K, int64_t cg, int64_t R, int64_t S, int64_t groups, int64_t nr,
                 int64_t bk):
    return pytpp_conv_packed_elems(K, cg, R, S, groups, nr, bk)


def pack_weight(cnp.ndarray w5, int64_t nr, int64_t bk, cnp.ndarray wpk):
    """w5 (groups, K/groups, C/groups, R, S), any strides (a view) -> wpk (packed_elems,) of
    w5's dtype."""
    cdef int64_t G = cnp.PyArray_DIM(w5, 0), kg = cnp.PyArray_DIM(w5, 1)
    cdef int64_t cg = cnp.PyArray_DIM(w5, 2), R = cnp.PyArray_DIM(w5, 3)
    cdef int64_t S = cnp.PyArray_DIM(w5, 4), esz = cnp.PyArray_ITEMSIZE(w5)
    cdef int64_t st[5]
    cdef int i
    for i in range(5):
        st[i] = cnp.PyArray_STRIDE(w5, i) // esz
    cdef const void *pw = cnp.PyArray_DATA(w5)
    cdef void *pk = cnp.PyArray_DATA(wpk)
    cdef int nt = num_threads()
    cdef const pytpp_ew_kernels *ew = level(active_isa()).eltwise[_dt(w5)]
    with nogil:
        pytpp_conv_pack_weight(ew, G * kg, cg, R, S, G, nr, bk, esz, pw, st, pk, nt)


cdef pytpp_conv_shape _shape(tuple g):
    cdef pytpp_conv_shape s
    (s.N, s.C, s.H, s.W, s.K, s.R, s.S, s.P, s.Q, s.sh, s.sw, s.dh, s.dw, s.groups) = g
    return s


def forward(cnp.ndarray xp, cnp.ndarray wpk, int64_t nr, int64_t bk, object bias,
            cnp.ndarray out, tuple geom, int act, bint out_nchw):
    """geom: (N, C, Hp, Wp, K, R, S, P, Q, sh, sw, dh, dw, groups); xp padded NHWC."""
    cdef pytpp_conv_shape s = _shape(geom)
    cdef int dt = _dt(xp)
    cdef int isa = active_isa()
    cdef const pytpp_gemm_kernels *gk = level(isa).brgemm[dt]
    cdef const pytpp_ew_kernels *ew = level(isa).eltwise[dt]
    cdef const void *px = cnp.PyArray_DATA(xp)
    cdef const void *pw = cnp.PyArray_DATA(wpk)
    cdef const void *pb = NULL if bias is None else cnp.PyArray_DATA(<cnp.ndarray>bias)
    cdef void *po = cnp.PyArray_DATA(out)
    cdef int nt = num_threads()
    cdef int err
    with nogil:
        err = pytpp_conv2d_forward(gk, ew, &s, px, pw, nr, bk, pb, act, po, out_nchw, nt)
    if err:
        raise MemoryError("pytpp.nn.conv2d: no memory for the tiles")


cdef const pytpp_pk_kernels *_bf16_table() noexcept nogil:
    return pytpp_bf16_select(active_isa(), features(), PYTPP_BF16_AUTO)


def bf16_widened():
    """Whether the active level's bf16 table widens to float32 (AVX2): bf16 convolutions then
    run forward_bf16 on the widened float32 engine, else on the table's direct kernels."""
    cdef const pytpp_pk_kernels *bf = _bf16_table()
    return bool(bf.bf16_widened or bf.brd[0][0][0] == NULL)


def bf16_panel():
    """Columns per packed bf16 weight panel at the active ISA level (forward_bf16)."""
    cdef const pytpp_pk_kernels *bf = _bf16_table()
    return bf.vl * bf.nv_main


def bf16_pack(cnp.ndarray w, int64_t nr):
    """w (K, C, R, S) bfloat16, any strides -> the packed weight of conv2d_forward_bf16 (bf16
    words, C padded to even, K to whole panels of nr)."""
    cdef int64_t K = cnp.PyArray_DIM(w, 0), C = cnp.PyArray_DIM(w, 1)
    cdef int64_t R = cnp.PyArray_DIM(w, 2), S = cnp.PyArray_DIM(w, 3)
    cdef int64_t st[4]
    cdef int i
    for i in range(4):
        st[i] = cnp.PyArray_STRIDE(w, i) // 2
    cdef cnp.ndarray wpk = cnp.PyArray_EMPTY(1, [pytpp_conv_bf16_packed_elems(K, C, R, S, nr)],
                                             cnp.NPY_UINT16, 0)
    cdef const uint16_t *pw = <const uint16_t *>cnp.PyArray_DATA(w)
    cdef uint16_t *pk = <uint16_t *>cnp.PyArray_DATA(wpk)
    cdef const pytpp_ew_kernels *ew32 = level(active_isa()).eltwise[PYTPP_F32]
    cdef int nt = num_threads()
    with nogil:
        pytpp_conv_bf16_pack(ew32, K, C, R, S, nr, pw, st, pk, nt)
    return wpk


def forward_bf16(cnp.ndarray xp, cnp.ndarray wpk, int64_t nr, int64_t bk, object bias,
                 cnp.ndarray out, tuple geom, int act, bint out_nchw):
    """bf16 forward, geom as forward's (one group; C even), bias float32 (K,) or None, out
    (N, P, Q, K), or (N, K, P, Q) with out_nchw, C-contiguous float32 or bfloat16. On the bf16
    table's direct kernels: xp padded NHWC bfloat16, wpk from bf16_pack at nr = bf16_panel() (bk
    unused). Where that table widens (bf16_widened()): xp and wpk (pack_weight's, at nr, bk)
    float32, widened with each channel pair swapped, on the float32 engine: the same bits."""
    cdef pytpp_conv_shape s = _shape(geom)
    cdef int isa = active_isa()
    cdef const pytpp_pk_kernels *bf = _bf16_table()
    cdef const pytpp_gemm_kernels *gk = level(isa).brgemm[PYTPP_F32]
    cdef const pytpp_ew_kernels *ew = level(isa).eltwise[PYTPP_F32]
    cdef bint widened = bf16_widened()
    cdef const void *px = cnp.PyArray_DATA(xp)
    cdef const void *pw = cnp.PyArray_DATA(wpk)
    cdef const float *pb = NULL
    if bias is not None:
        pb = <const float *>cnp.PyArray_DATA(<cnp.ndarray>bias)
    cdef void *po = cnp.PyArray_DATA(out)
    cdef int out_bf16 = cnp.PyArray_ITEMSIZE(out) == 2
    cdef int nt = num_threads()
    cdef int err
    with nogil:
        if widened:
            err = pytpp_conv2d_forward_widened(gk, ew, &s, <const float *>px,
                                               <const float *>pw, nr, bk, pb, act, po,
                                               out_bf16, out_nchw, nt)
        else:
            err = pytpp_conv2d_forward_bf16(bf, ew, &s, px, pw, pb, act, po, out_bf16,
                                            out_nchw, nt)
    if err:
        raise MemoryError("pytpp.nn.conv2d: no memory for the tiles")


def yaconv_forward(cnp.ndarray x, cnp.ndarray wpk, int64_t nr, object bias, cnp.ndarray out,
                   tuple geom, int64_t pt, int64_t pl, int act):
    """YaConv (pytpp/_core/include/pytpp/yaconv.h): x UNPADDED NHWC with unit channel stride
    (other strides in whole elements), out (N, P, Q, K) C-contiguous; geom as forward's with the
    unpadded H, W and stride = dilation = groups = 1; pt, pl the top and left padding."""
    cdef pytpp_conv_shape s = _shape(geom)
    cdef int dt = _dt(x)
    cdef int isa = active_isa()
    cdef const pytpp_gemm_kernels *gk = level(isa).brgemm[dt]
    cdef const pytpp_ew_kernels *ew = level(isa).eltwise[dt]
    cdef int64_t esz = cnp.PyArray_ITEMSIZE(x)
    cdef int64_t sn = cnp.PyArray_STRIDE(x, 0) // esz, sxh = cnp.PyArray_STRIDE(x, 1) // esz
    cdef int64_t sxw = cnp.PyArray_STRIDE(x, 2) // esz
    cdef const void *px = cnp.PyArray_DATA(x)
    cdef const void *pw = cnp.PyArray_DATA(wpk)
    cdef const void *pb = NULL if bias is None else cnp.PyArray_DATA(<cnp.ndarray>bias)
    cdef void *po = cnp.PyArray_DATA(out)
    cdef int nt = num_threads()
    cdef int err
    with nogil:
        err = pytpp_yaconv_forward(gk, ew, &s, pt, pl, px, sn, sxh, sxw, pw, nr, pb, act, po, nt)
    if err:
        raise MemoryError("pytpp.nn.conv2d: no memory for YaConv's packed image")


def pool2d_forward(int op, cnp.ndarray x, cnp.ndarray y, bint nhwc, tuple geom,
                   cnp.ndarray idx=None):
    """Pooling forward (pytpp/_core/include/pytpp/pool.h): op 0 max, 1 average; x 4-D with unit
    innermost stride (other strides in whole elements), y C-contiguous of x's dtype;
    geom (N, C, H, W, P, Q, kh, kw, sh, sw, ph, pw). idx (max only): C-contiguous int64 of y's
    shape, filled with each output's index (max_pool2d's return_indices)."""
    cdef pytpp_pool_shape s
    (s.N, s.C, s.H, s.W, s.P, s.Q, s.kh, s.kw, s.sh, s.sw, s.ph, s.pw) = geom
    cdef int64_t esz = cnp.PyArray_ITEMSIZE(x)
    cdef int64_t xs[3]
    cdef int i
    for i in range(3):
        xs[i] = cnp.PyArray_STRIDE(x, i) // esz
    cdef const pytpp_pool_kernels *kt = level(active_isa()).pool[_dt(x)]
    cdef const void *px = cnp.PyArray_DATA(x)
    cdef void *py = cnp.PyArray_DATA(y)
    cdef int64_t *pi = NULL if idx is None else <int64_t *>cnp.PyArray_DATA(idx)
    cdef int nt = num_threads()
    cdef int err = 0
    with nogil:
        err = pytpp_pool2d_forward(kt, op, nhwc, &s, px, xs, py, pi, nt)
    if err:
        raise MemoryError("pytpp.nn: no memory for the pooling forward's tap table")


def pool2d_backward(int op, cnp.ndarray g, cnp.ndarray x, cnp.ndarray gx, bint nhwc,
                    tuple geom, cnp.ndarray idx=None):
    """Pooling backward (pytpp/_core/include/pytpp/pool.h): op 0 max, 1 average; g, x and gx
    C-contiguous of one dtype (x read by max without idx only); geom as pool2d_forward's.
    idx (max only): the forward's indices, C-contiguous int64 of g's shape, scattered to."""
    cdef pytpp_pool_shape s
    (s.N, s.C, s.H, s.W, s.P, s.Q, s.kh, s.kw, s.sh, s.sw, s.ph, s.pw) = geom
    cdef const pytpp_pool_kernels *kt = level(active_isa()).pool[_dt(gx)]
    cdef const void *pg = cnp.PyArray_DATA(g)
    cdef const void *px = cnp.PyArray_DATA(x)
    cdef const int64_t *pi = NULL
    if idx is not None:
        pi = <const int64_t *>cnp.PyArray_DATA(idx)
    cdef void *pgx = cnp.PyArray_DATA(gx)
    cdef int nt = num_threads()
    cdef int err
    with nogil:
        err = pytpp_pool2d_backward(kt, op, nhwc, &s, pg, px, pi, pgx, nt)
    if err == PYTPP_POOL_BAD_INDEX:
        raise ValueError(f"pytpp.nn.max_pool2d_backward: indices must lie in [0, H * W) = "
                         f"[0, {s.H * s.W}) of their plane")
    if err:
        raise MemoryError("pytpp.nn: no memory for the pooling backward's tap table")


def backward_weight(cnp.ndarray xp, cnp.ndarray go, cnp.ndarray gw, tuple geom):
    """gw (K, C/groups, R, S) from padded NHWC xp and NHWC go (N, P, go_w, K):
    go_w = Q, or the padded width with zero columns past Q (stride 1: whole-image reductions)."""
    cdef pytpp_conv_shape s = _shape(geom)
    cdef int dt = _dt(xp)
    cdef int isa = active_isa()
    cdef const pytpp_gemm_kernels *gk = level(isa).brgemm[dt]
    cdef int64_t esz = cnp.PyArray_ITEMSIZE(xp)
    cdef const void *px = cnp.PyArray_DATA(xp)
    cdef const void *pg = cnp.PyArray_DATA(go)
    cdef void *pw = cnp.PyArray_DATA(gw)
    cdef int64_t go_w = cnp.PyArray_DIM(go, 2)
    cdef int nt = num_threads()
    cdef int err
    with nogil:
        err = pytpp_conv2d_backward_weight(gk, esz, &s, px, pg, go_w, pw, nt)
    if err:
        raise MemoryError("pytpp.nn.conv2d_backward_weight: no memory for the batch pointers")


def backward_weight_taps(cnp.ndarray xp, cnp.ndarray go, cnp.ndarray gwt, tuple geom):
    """gwt (R, S*C, K) = the weight gradient of one group with unit column dilation, its (s, c)
    axis as the rows of a BRGEMM per tap row r: gwt[r] = sum over images and output rows p of
    A_p (S*C x Q: image row p*sh + r*dh from column q*sw, rows overlapping) @ go[n, p] (Q x K).
    xp padded NHWC and go (N, P, Q, K), both C-contiguous; geom = (sh, sw, dh)."""
    cdef int64_t sh, sw, dh
    sh, sw, dh = geom
    cdef int64_t N = cnp.PyArray_DIM(xp, 0), Wp = cnp.PyArray_DIM(xp, 2)
    cdef int64_t C = cnp.PyArray_DIM(xp, 3), Hp = cnp.PyArray_DIM(xp, 1)
    cdef int64_t P = cnp.PyArray_DIM(go, 1), Q = cnp.PyArray_DIM(go, 2), K = cnp.PyArray_DIM(go, 3)
    cdef int64_t R = cnp.PyArray_DIM(gwt, 0), SC = cnp.PyArray_DIM(gwt, 1)
    cdef int64_t esz = cnp.PyArray_ITEMSIZE(xp)
    cdef int dt = _dt(xp)
    cdef const pytpp_gemm_kernels *gk = level(active_isa()).brgemm[dt]
    cdef pytpp_gemm_desc d
    d.m, d.n, d.k = SC, K, Q
    d.rsa, d.csa = 1, sw * C
    d.ldb, d.csb, d.ldc = K, 1, K
    d.dtype = dt
    d.alpha = 1.0
    cdef pytpp_batch bt
    bt.mode = PYTPP_BATCH_STRIDE
    bt.count = P
    bt.stride_a, bt.stride_b = sh * Wp * C, Q * K
    bt.off_a = bt.off_b = NULL
    bt.ptr_a = bt.ptr_b = NULL
    cdef const char *px = <const char *>cnp.PyArray_DATA(xp)
    cdef const char *pg = <const char *>cnp.PyArray_DATA(go)
    cdef void *pw = cnp.PyArray_DATA(gwt)
    cdef int nt = num_threads()
    cdef int err = 0
    cdef int64_t n
    with nogil:
        for n in range(N):
            d.beta = 1.0 if n else 0.0
            err = pytpp_brgemm_many(gk, cache_info(), &d, px + n * Hp * Wp * C * esz,
                                    pg + n * P * Q * K * esz, pw, &bt, R, dh * Wp * C, 0,
                                    SC * K, nt)
            if err:
                break
    if err:
        raise MemoryError("pytpp.nn.conv2d_backward_weight: no memory for the BRGEMM scratch")


def nchw_to_nhwc_pad(cnp.ndarray x, cnp.ndarray y, int64_t pt, int64_t pb, int64_t pl,
                     int64_t pr):
    """x (N, C, H, W) C-contiguous -> y (N, H+pt+pb, W+pl+pr, Cd >= C), border and channels
    past C zero; float64, float32 or bfloat16."""
    cdef int dt = _dt(x)
    cdef int64_t esz = cnp.PyArray_ITEMSIZE(x)
    cdef const pytpp_ew_kernels *ew = level(active_isa()).eltwise[dt]
    cdef int64_t N = cnp.PyArray_DIM(x, 0), C = cnp.PyArray_DIM(x, 1)
    cdef int64_t H = cnp.PyArray_DIM(x, 2), W = cnp.PyArray_DIM(x, 3)
    cdef int64_t Cd = cnp.PyArray_DIM(y, 3)
    cdef const void *px = cnp.PyArray_DATA(x)
    cdef void *py = cnp.PyArray_DATA(y)
    cdef int nt = num_threads()
    with nogil:
        pytpp_conv_nchw_to_nhwc_pad(ew, esz, N, C, Cd, H, W, pt, pb, pl, pr, px, py, nt)


def nhwc_pad(cnp.ndarray x, cnp.ndarray y, int64_t pt, int64_t pb, int64_t pl, int64_t pr):
    """x (N, H, W, C) with unit channel stride -> y (N, H+pt+pb, W+pl+pr, Cd >= C), border and
    channels past C zero."""
    cdef int64_t esz = cnp.PyArray_ITEMSIZE(x)
    cdef int64_t N = cnp.PyArray_DIM(x, 0), H = cnp.PyArray_DIM(x, 1)
    cdef int64_t W = cnp.PyArray_DIM(x, 2), C = cnp.PyArray_DIM(x, 3)
    cdef int64_t sn = cnp.PyArray_STRIDE(x, 0) // esz, sh = cnp.PyArray_STRIDE(x, 1) // esz
    cdef int64_t sw = cnp.PyArray_STRIDE(x, 2) // esz
    cdef int64_t Cd = cnp.PyArray_DIM(y, 3)
    cdef const void *px = cnp.PyArray_DATA(x)
    cdef void *py = cnp.PyArray_DATA(y)
    cdef int nt = num_threads()
    with nogil:
        pytpp_conv_nhwc_pad(esz, N, C, Cd, H, W, sn, sh, sw, pt, pb, pl, pr, px, py, nt)


def bf16_pairs_swapped(cnp.ndarray x):
    """x bfloat16, C-contiguous, an even number of elements -> float32 of x's shape with each
    pair of consecutive elements swapped (the widened bf16 engine's operand)."""
    cdef cnp.ndarray y = cnp.PyArray_EMPTY(cnp.PyArray_NDIM(x), cnp.PyArray_DIMS(x),
                                           cnp.NPY_FLOAT32, 0)
    cdef const uint32_t *px = <const uint32_t *>cnp.PyArray_DATA(x)
    cdef float *py = <float *>cnp.PyArray_DATA(y)
    cdef int64_t n = cnp.PyArray_SIZE(x) // 2
    cdef int nt = num_threads()
    with nogil:
        pytpp_conv_bf16_pairs_swapped(px, py, n, nt)
    return y


def nhwc_to_nchw(cnp.ndarray x, cnp.ndarray y):
    """x (N, H, W, C) C-contiguous -> y (N, C, H, W) C-contiguous; float64, float32 or
    bfloat16."""
    cdef int dt = _dt(x)
    cdef int64_t esz = cnp.PyArray_ITEMSIZE(x)
    cdef const pytpp_ew_kernels *ew = level(active_isa()).eltwise[dt]
    cdef int64_t N = cnp.PyArray_DIM(x, 0), H = cnp.PyArray_DIM(x, 1)
    cdef int64_t W = cnp.PyArray_DIM(x, 2), C = cnp.PyArray_DIM(x, 3)
    cdef const void *px = cnp.PyArray_DATA(x)
    cdef void *py = cnp.PyArray_DATA(y)
    cdef int nt = num_threads()
    with nogil:
        pytpp_conv_nhwc_to_nchw(ew, esz, N, C, H, W, px, py, nt)


def col2im_nhwc(cnp.ndarray cols, cnp.ndarray x, int64_t p0, tuple geom):
    """x (N, H, W, C) += the taps of cols (N, P, Q, R, S, C), the columns of output rows
    [p0, p0 + P), both C-contiguous, of one dtype; geom = (sh, sw, dh, dw, pt, pl)."""
    cdef int64_t esz = cnp.PyArray_ITEMSIZE(x)
    cdef int64_t N = cnp.PyArray_DIM(x, 0), H = cnp.PyArray_DIM(x, 1)
    cdef int64_t W = cnp.PyArray_DIM(x, 2), C = cnp.PyArray_DIM(x, 3)
    cdef int64_t P = cnp.PyArray_DIM(cols, 1), Q = cnp.PyArray_DIM(cols, 2)
    cdef int64_t R = cnp.PyArray_DIM(cols, 3), S = cnp.PyArray_DIM(cols, 4)
    cdef int64_t sh, sw, dh, dw, pt, pl
    sh, sw, dh, dw, pt, pl = geom
    cdef const void *pc = cnp.PyArray_DATA(cols)
    cdef void *px = cnp.PyArray_DATA(x)
    cdef int nt = num_threads()
    with nogil:
        pytpp_conv_col2im_nhwc(esz, N, H, W, C, p0, P, Q, R, S, sh, sw, dh, dw, pt, pl, pc, px,
                               nt)
