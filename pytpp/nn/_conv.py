"""2D and 1D convolutions with torch's semantics on the BRGEMM engine (pytpp/_core/frame/conv.c,
docs/conv.md): forward with a fused bias + activation epilogue, backward by data and by weights,
packed weights, and the explicit layout transforms the engine uses."""
import numpy as np

from pytpp import _layout, _validate
from pytpp._core import _conv, _runtime
from pytpp._typing import Array, ArrayLike
from pytpp.nn import _conv_args as A

__all__ = [
    "PackedConvWeight",
    "conv1d",
    "conv1d_backward_data",
    "conv1d_backward_weight",
    "conv2d",
    "conv2d_backward_data",
    "conv2d_backward_weight",
    "nchw_to_nhwc",
    "nhwc_to_nchw",
]

ALGORITHMS = ("auto", "brgemm", "im2col", "yaconv")


def nchw_to_nhwc(x: ArrayLike, padding: tuple[int, int, int, int] = (0, 0, 0, 0)) -> Array:
    """(N, C, H, W) -> (N, H + top + bottom, W + left + right, C), C-contiguous, the border zero:
    the layout transform conv2d applies to NCHW input (one transpose kernel call per image row).

    Parameters
    ----------
    x : array_like
        (N, C, H, W), float32 or float64 (other floats are widened to float32).
    padding : tuple of 4 ints, optional
        (top, bottom, left, right) zero rows and columns added around each image.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> x = np.arange(6, dtype=np.float32).reshape(1, 2, 1, 3)
    >>> pytpp.nn.nchw_to_nhwc(x)[0, 0]
    array([[0., 3.],
           [1., 4.],
           [2., 5.]], dtype=float32)
    >>> np.array_equal(pytpp.nn.nhwc_to_nchw(pytpp.nn.nchw_to_nhwc(x)), x)
    True
    """
    fn = "pytpp.nn.nchw_to_nhwc"
    x = A.float_operand(x, "x", fn)
    if x.ndim != 4:
        raise ValueError(f"{fn}: x must be (N, C, H, W), got shape {x.shape}")
    pads = tuple(A.int_arg(p, "padding", fn, 0) for p in padding)
    if len(pads) != 4:
        raise ValueError(f"{fn}: padding must be (top, bottom, left, right)")
    return _to_padded_nhwc(x, "NCHW", pads, A.compute_dtype(x.dtype))


def nhwc_to_nchw(x: ArrayLike) -> Array:
    """(N, H, W, C) -> (N, C, H, W), C-contiguous: the inverse of :func:`nchw_to_nhwc` without
    padding (one transpose kernel call per image row).

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> pytpp.nn.nhwc_to_nchw(np.ones((1, 2, 2, 3), np.float32)).shape
    (1, 3, 2, 2)
    """
    fn = "pytpp.nn.nhwc_to_nchw"
    x = A.float_operand(x, "x", fn)
    if x.ndim != 4:
        raise ValueError(f"{fn}: x must be (N, H, W, C), got shape {x.shape}")
    cdt = A.compute_dtype(x.dtype)
    x = np.ascontiguousarray(x, dtype=cdt)
    y = np.empty((x.shape[0], x.shape[3], x.shape[1], x.shape[2]), cdt)
    if x.size:
        _conv.nhwc_to_nchw(x, y)
    return y


def _to_padded_nhwc(x, fmt, pads, cdt, cd=None):
    """x in `fmt` -> padded NHWC, C-contiguous, of dtype cdt (a view of x when nothing to do),
    with cd >= C channels (those past C zero; default C)."""
    pt, pb, pl, pr = pads
    if fmt == "NCHW":
        x = np.ascontiguousarray(x, dtype=cdt)
        N, C, H, W = x.shape
        y = np.empty((N, H + pt + pb, W + pl + pr, cd or C), cdt)
        if y.size:
            if x.size:
                _conv.nchw_to_nhwc_pad(x, y, pt, pb, pl, pr)
            else:
                y[...] = 0
        return y
    x = x.astype(cdt, copy=False)
    if x.flags.c_contiguous and not any(pads) and cd in (None, x.shape[3]):
        return x
    if x.strides[3] != x.itemsize or any(s % x.itemsize for s in x.strides):
        x = np.ascontiguousarray(x)
    N, H, W, C = x.shape
    y = np.empty((N, H + pt + pb, W + pl + pr, cd or C), cdt)
    if y.size:
        if x.size:
            _conv.nhwc_pad(x, y, pt, pb, pl, pr)
        else:
            y[...] = 0
    return y


class PackedConvWeight:
    """A convolution weight (K, C/groups, R, S) packed once into the engine's blocked layout
    ([groups][K blocks][panels of one register block's width][R][S][C/groups][panel width],
    docs/conv.md); pass it as conv2d's ``w``.

    The pack holds a copy: later changes to the source array are not seen. It is made on first
    use for each (dtype, groups, ISA level's panel width) a call needs, then reused; 1x1 weights
    keep their (K, C) matrix instead. ``groups`` (optional) packs for that grouping at once.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    >>> w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    >>> pw = pytpp.nn.PackedConvWeight(w)
    >>> np.allclose(pytpp.nn.conv2d(x, pw, padding=1), pytpp.nn.conv2d(x, w, padding=1))
    True
    """

    def __init__(self, w: ArrayLike, groups: int | None = None) -> None:
        fn = "pytpp.nn.PackedConvWeight"
        w = A.float_operand(w, "w", fn)
        if w.ndim != 4:
            raise ValueError(f"{fn}: w must be (K, C/groups, R, S), got shape {w.shape}")
        self.shape = tuple(int(s) for s in w.shape)
        self.dtype = w.dtype
        self._source = np.array(w, copy=True)
        self._packs = {}
        if groups is not None:
            groups = A.int_arg(groups, "groups", fn, 1)
            if w.shape[0] % groups:
                raise ValueError(f"{fn}: groups={groups} does not divide K={w.shape[0]}")
            if w.shape[2:] != (1, 1) or groups > 1:
                self.packed(A.compute_dtype(w.dtype), groups)

    def __getstate__(self):
        # the packs are made again where the object lands (its ISA level's blocking)
        return {"shape": self.shape, "dtype": self.dtype, "_source": self._source, "_packs": {}}

    def matrix(self, cdt, nhwc):
        """The (K, C) matrix of a 1x1 weight in dtype cdt, or for NHWC its (C, K) transpose,
        C-contiguous (the GEMM path of 1x1 layers)."""
        cdt = np.dtype(cdt)
        key = ("matrix", cdt, nhwc)
        if key not in self._packs:
            self._packs[key] = _matrix(self._source, cdt, nhwc)
        return self._packs[key]

    def packed_bf16(self):
        """The bf16 engine's weight at the active ISA level (one group; packed on first use):
        VNNI pairs at the bf16 table's panel width, or the widened float32 pack."""
        key = ("bf16", _conv.bf16_widened(), _conv.bf16_panel(), _conv.blocking(
            self.shape[0], False))
        if key not in self._packs:
            self._packs[key] = _pack_bf16(self._source)
        return self._packs[key]

    def packed(self, cdt, groups):
        """(packed array, nr, bk) for compute dtype cdt and `groups` at the active ISA level's
        register block width (packed on first use)."""
        cdt = np.dtype(cdt)
        nr, bk = _conv.blocking(self.shape[0] // groups, cdt == np.float64)
        key = (cdt, groups, nr, bk)
        if key not in self._packs:
            self._packs[key] = _pack(self._source, groups, cdt)
        return self._packs[key]


def _matrix(w, cdt, transposed):
    m = np.asarray(w, dtype=cdt).reshape(w.shape[0], -1)
    return np.ascontiguousarray(m.T if transposed else m)


def _pack(w, groups, cdt):
    """(packed array, nr, bk): the engine's weight layout (conv.h) at the active ISA level.
    w: (K, C/groups, R, S), or already the (groups, K/groups, C/groups, R, S) view to pack (any
    strides: the packing reads it in place)."""
    w = np.asarray(w, dtype=cdt)
    w5 = w if w.ndim == 5 else w.reshape((groups, w.shape[0] // groups) + w.shape[1:])
    G, kg, cg, R, S = w5.shape
    nr, bk = _conv.blocking(kg, np.dtype(cdt) == np.float64)
    wpk = np.empty(_conv.packed_elems(G * kg, cg, R, S, G, nr, bk), cdt)
    if w5.size:
        _conv.pack_weight(w5, nr, bk, wpk)
    return wpk, nr, bk


def _pack_bf16(w):
    """(K, C, R, S) -> the bf16 engine's weight at the active level: panels of the bf16 table's
    width holding channel pairs (frame/conv_bf16.c), or where that table widens, the float32
    engine's pack of the weight widened with C even and each channel pair swapped; as
    (packed array, nr, bk), the arguments of _conv.forward_bf16."""
    w = np.asarray(w, dtype=_validate.BF16)
    if not _conv.bf16_widened():
        return _conv.bf16_pack(w, _conv.bf16_panel()), _conv.bf16_panel(), 0
    K, C, R, S = w.shape
    we = np.zeros((K, C + C % 2, R, S), np.float32)
    we[:, :C] = w
    return _pack(we[:, np.arange(we.shape[1]) ^ 1], 1, np.float32)


def _weight_arg(w, fn):
    if isinstance(w, PackedConvWeight):
        return w, w.shape, w.dtype
    w = A.float_operand(w, "w", fn)
    if w.ndim != 4:
        raise ValueError(f"{fn}: w must be (K, C/groups, R, S), got shape {w.shape}")
    return w, w.shape, w.dtype


def _check_channels(C, K, cg, groups, fn):
    if C % groups:
        raise ValueError(f"{fn}: groups={groups} does not divide the {C} input channels")
    if K % groups:
        raise ValueError(f"{fn}: groups={groups} does not divide the K={K} output channels of w")
    if C // groups != cg:
        raise ValueError(f"{fn}: channel mismatch: x has {C} channels, so w must have "
                         f"C/groups = {C // groups} per group, but w has {cg}")


def _geometry(xshape, wshape, stride, padding, dilation, groups, fmt, fn):
    """Checked arguments -> (N, C, H, W, K, R, S, P, Q, (sh, sw), (dh, dw), pads)."""
    if len(xshape) != 4:
        raise ValueError(f"{fn}: x must be 4-D ({'N, C, H, W' if fmt == 'NCHW' else 'N, H, W, C'}"
                         f"), got shape {tuple(xshape)}")
    N, C, H, W = xshape if fmt == "NCHW" else (xshape[0], xshape[3], xshape[1], xshape[2])
    K, cg, R, S = wshape
    st = A.pair(stride, "stride", fn, 1)
    dl = A.pair(dilation, "dilation", fn, 1)
    groups = A.int_arg(groups, "groups", fn, 1)
    pads = A.padding(padding, (R, S), dl, st, fn)
    _check_channels(C, K, cg, groups, fn)
    if R < 1 or S < 1:
        raise ValueError(f"{fn}: w has an empty kernel {R}x{S}")
    P = A.out_size(H, pads[0], R, st[0], dl[0], fn)
    Q = A.out_size(W, pads[1], S, st[1], dl[1], fn)
    return N, C, H, W, K, R, S, P, Q, st, dl, (pads[0][0], pads[0][1], pads[1][0], pads[1][1])


def _out_target(out, shape, res_dt, fn):
    if out is None:
        return None
    _validate.check_out(out, shape, res_dt, fn)
    return out


def conv2d(x: ArrayLike, w: "ArrayLike | PackedConvWeight", bias: ArrayLike | None = None,
           stride: int | tuple[int, int] = 1, padding: "int | tuple[int, int] | str" = 0,
           dilation: int | tuple[int, int] = 1, groups: int = 1, *, data_format: str = "NCHW",
           activation: str | None = None, algorithm: str = "auto",
           out: Array | None = None) -> Array:
    """2D convolution (cross-correlation, ``torch.nn.functional.conv2d``), optionally fused with
    a bias and an activation, on the BRGEMM engine.

    Each output row block (up to 64 output channels by about 56 pixels) is one batch-reduce GEMM
    over (channel block, r, s) of shifted input pixel rows times packed weight panels, the input
    padded NHWC (NCHW input is transposed into it once per call, the output transposed back while
    each block is in cache); bias and activation are applied to the block before it is stored.

    Parameters
    ----------
    x : array_like
        (N, C, H, W), or (N, H, W, C) with ``data_format="NHWC"``; float32, float64, bfloat16 or
        float16. bfloat16 x and w on one group run the bf16 engine ("auto"/"brgemm": each
        output one ``vdpbf16ps`` chain over its window, float32 accumulation, the bits of
        pytpp.matmul on the im2col matrix on every ISA level; a float32 ``out`` receives the
        float32 sums); other bfloat16 and float16 inputs are computed in float32. A bfloat16 or
        float16 result is rounded to nearest even.
    w : array_like or PackedConvWeight
        (K, C/groups, R, S) in both formats.
    bias : array_like, optional
        (K,).
    stride, dilation : int or pair of ints, optional
        >= 1.
    padding : int, pair, "same" or "valid", optional
        Zero padding on both sides of each spatial dim; "same" (stride 1 only) puts an odd
        total's extra row/column at the bottom/right, as torch.
    groups : int, optional
        Divides C and K; ``groups == C == K`` is depthwise (a channel-vectorised direct loop).
    data_format : {"NCHW", "NHWC"}
    activation : {None, "relu", "gelu"}
        Applied after the bias (gelu is the exact, erf form).
    algorithm : {"auto", "brgemm", "im2col", "yaconv"}
        "im2col" is the baseline (an explicit patch matrix times the weight with pytpp.matmul);
        "yaconv" is the thesis 002 ch. 5 algorithm (one packed image, no im2col; stride 1,
        dilation 1, groups 1, kernels larger than 1x1, any padding; other arguments raise
        ValueError); "auto" runs "brgemm" (it measured faster than "yaconv" on every layer,
        docs/conv.md).
    out : ndarray, optional
        Of the result's shape in x's format; any dtype the result casts to.

    Returns
    -------
    ndarray
        (N, K, P, Q) or (N, P, Q, K), of x's dtype (promoted with w's).

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> x = np.ones((1, 1, 4, 4), np.float32)
    >>> w = np.ones((2, 1, 3, 3), np.float32)
    >>> pytpp.nn.conv2d(x, w, bias=np.array([0, -10], np.float32), padding=1,
    ...                 activation="relu")[0, :, 0]
    array([[4., 6., 6., 4.],
           [0., 0., 0., 0.]], dtype=float32)
    """
    fn = "pytpp.nn.conv2d"
    fmt = A.data_format(data_format, fn)
    act = A.activation(activation, fn)
    if algorithm not in ALGORITHMS:
        raise ValueError(f"{fn}: algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    x = A.float_operand(x, "x", fn)
    xt = _layout.channels_last(x) if fmt == "NCHW" and out is None else None
    if xt is not None:   # channels-last memory: the NHWC kernels, the result to NCHW order
        return _layout.contiguous(conv2d(xt, w, bias, stride, padding, dilation, groups,
                                         data_format="NHWC", activation=activation,
                                         algorithm=algorithm).transpose(0, 3, 1, 2))
    w, wshape, w_dt = _weight_arg(w, fn)
    N, C, H, W, K, R, S, P, Q, st, dl, pads = _geometry(x.shape, wshape, stride, padding,
                                                        dilation, groups, fmt, fn)
    groups = int(groups)
    res_dt = A.result_dtype(x.dtype, w_dt)
    cdt = A.compute_dtype(x.dtype, w_dt)
    b = None
    if bias is not None:
        b = A.float_operand(bias, "bias", fn)
        if b.shape != (K,):
            raise ValueError(f"{fn}: bias must have shape ({K},) (one per output channel), got "
                             f"{b.shape}")
        b = np.ascontiguousarray(b, dtype=cdt)
    oshape = (N, K, P, Q) if fmt == "NCHW" else (N, P, Q, K)
    out = _out_target(out, oshape, res_dt, fn)
    if algorithm == "yaconv":
        _yaconv_supported(R, S, st, dl, groups, fn)
    elif algorithm == "auto":
        algorithm = "brgemm"
    if algorithm == "yaconv":
        res = _yaconv_forward(x, w, b, act, fmt, (N, C, H, W, K, R, S, P, Q), pads, cdt,
                              out if out is not None and out.dtype == cdt
                              and out.flags.c_contiguous and not np.may_share_memory(out, x)
                              else None)
    elif _bf16_engine(x.dtype, w_dt, groups, algorithm):
        res = _forward_bf16(x, w, b, act, fmt, (N, C, H, W, K, R, S, P, Q), st, dl, pads, out)
    elif algorithm == "im2col":
        res = _im2col_forward(x, w, b, fmt, (N, C, H, W, K, R, S, P, Q), st, dl, pads, groups,
                              activation, cdt)
    else:
        res = _forward(x, w, b, act, fmt, (N, C, H, W, K, R, S, P, Q), st, dl, pads, groups,
                       cdt, out if out is not None and out.dtype == cdt
                       and out.flags.c_contiguous and not np.may_share_memory(out, x) else None)
    if out is None:
        return res if res.dtype == res_dt else res.astype(res_dt)
    if res is not out:
        np.copyto(out, res, casting="same_kind")
    return out


def _forward(x, w, b, act, fmt, dims, st, dl, pads, groups, cdt, direct_out=None):
    """The BRGEMM engine: x in fmt -> result in fmt (C-contiguous, cdt)."""
    N, C, _, _, K, R, S, P, Q = dims
    oshape = (N, K, P, Q) if fmt == "NCHW" else (N, P, Q, K)
    res = direct_out if direct_out is not None else np.empty(oshape, cdt)
    if res.size == 0:
        return res
    if x.size == 0 or C == 0:
        return _bias_only(res, b, act, fmt, K)
    if R == S == 1 and groups == 1 and not any(pads):
        if not _pointwise_sweeps(fmt, C, K, N * P * Q):
            return _pointwise(x, w, b, act, st, fmt, (N, C, K, P, Q), cdt, res)
        if st != (1, 1) and st[1] * C * np.dtype(cdt).itemsize >= 4096:
            # pixels 4 KiB and more apart share a few L1 sets: the quarter of x read, copied
            x = np.ascontiguousarray(x[:, ::st[0], ::st[1], :][:, :P, :Q, :], dtype=cdt)
            st = (1, 1)
    wpk = w.packed(cdt, groups) if isinstance(w, PackedConvWeight) else _pack(w, groups, cdt)
    xp = _to_padded_nhwc(x, fmt, pads, cdt)
    geom = (N, C, xp.shape[1], xp.shape[2], K, R, S, P, Q, st[0], st[1], dl[0], dl[1], groups)
    _conv.forward(xp, *wpk, b, res, geom, act, fmt == "NCHW")
    return res


def _bf16_engine(x_dt, w_dt, groups, algorithm):
    """bf16 x and w on one group run the bf16 engine (vdpbf16ps sums, fp32 accumulation)."""
    return (x_dt == _validate.BF16 and w_dt == _validate.BF16 and groups == 1
            and algorithm == "brgemm")


def _forward_bf16(x, w, b, act, fmt, dims, st, dl, pads, out):
    """The bf16 engine (frame/conv_bf16.c): x in fmt -> result in fmt (an NCHW one transposed
    block by block as the engine finishes it), C-contiguous, float32 when `out` is float32 (the
    sums never rounded to bf16), else bf16 (`out` itself when it can take the result in
    place)."""
    N, C, H, W, K, R, S, P, Q = dims
    bf = _validate.BF16
    odt = np.dtype(np.float32) if out is not None and out.dtype == np.float32 else bf
    oshape = (N, K, P, Q) if fmt == "NCHW" else (N, P, Q, K)
    direct = (out is not None and out.dtype == odt and out.flags.c_contiguous
              and not np.may_share_memory(out, x))
    res = out if direct else np.empty(oshape, odt)
    if res.size == 0:
        return res
    if x.size == 0 or C == 0:
        r = _bias_only(np.empty(oshape, np.float32), b, act, fmt, K)
        return r if odt == np.float32 else r.astype(bf)
    if fmt == "NCHW" and R == S == 1 and not any(pads) and st != (1, 1):
        # a strided 1x1 layer reads a quarter of an NCHW x: only that is transposed
        x = x[:, :, ::st[0], ::st[1]][:, :, :P, :Q]
        st = (1, 1)
    # whole channel pairs: an odd C (the stem's 3) gains a zero channel
    xp = _to_padded_nhwc(x, fmt, pads, bf, C + C % 2)
    C += C % 2
    b32 = None if b is None else np.ascontiguousarray(b, dtype=np.float32)
    geom = (N, C, xp.shape[1], xp.shape[2], K, R, S, P, Q, st[0], st[1], dl[0], dl[1], 1)
    wpk = w.packed_bf16() if isinstance(w, PackedConvWeight) else _pack_bf16(w)
    if _conv.bf16_widened():
        # float32 with each channel pair swapped: the widened engine's float32 chains then take
        # each pair odd element first, as vdpbf16ps
        xp = _conv.bf16_pairs_swapped(xp)
    _conv.forward_bf16(xp, *wpk, b32, res, geom, act, fmt == "NCHW")
    return res


def _bias_only(res, b, act, fmt, K):
    """No input channels: the result is the bias (+ activation) alone."""
    res[...] = 0
    if b is not None:
        res += b.reshape((K, 1, 1) if fmt == "NCHW" else (K,))
    if act:
        from pytpp.nn._activations import gelu, relu
        res[...] = (relu if act == 1 else gelu)(res)
    return res


# "auto" runs "brgemm" on every layer: since one-group layers with C >= 32 and K >= 128 run as
# one GEMM over packed pixel rows (frame/conv_rows.c), brgemm was faster than YaConv on each of
# ResNet-50's stride-1 3x3 layers at N = 1 and 8 (`python -m pytpp bench conv --match algo`,
# Zen 3, 1 thread, GFLOP/s brgemm / yaconv: C256 14x14 N = 1 83.8 / 77.7, N = 8 85.0 / 81.2;
# C512 7x7 N = 8 84.7 / 80.6; C64 56x56 N = 8 83.3 / 79.4). YaConv stays selectable.


def _yaconv_supported(R, S, st, dl, groups, fn):
    """YaConv's domain (thesis 002 ch. 5): unit stride and dilation, one group, a kernel larger
    than 1x1 (a 1x1 layer is a plain GEMM, which "brgemm" runs)."""
    for name, val, ok in (("stride", st, st == (1, 1)), ("dilation", dl, dl == (1, 1)),
                          ("groups", groups, groups == 1),
                          ("w", f"a {R}x{S} kernel", R * S > 1)):
        if not ok:
            need = "a kernel larger than 1x1" if name == "w" else f"{name}=1"
            raise ValueError(f"{fn}: algorithm='yaconv' needs {need}, got {name}={val}; use "
                             f"algorithm='brgemm' (or 'auto') for this layer")


def _yaconv_forward(x, w, b, act, fmt, dims, pads, cdt, direct_out=None):
    """YaConv (frame/yaconv.c): x in fmt -> result in fmt (C-contiguous, cdt; direct_out when
    given). NCHW input is transposed to NHWC first and the NHWC result back (each ~1% of a
    ResNet-50 3x3 layer's time); the padding is inserted while the image is packed (NHWC input
    is read in place)."""
    N, C, _, _, K, R, S, P, Q = dims
    onhwc = (N, P, Q, K)
    nhwc_out = direct_out if fmt == "NHWC" else None
    res = nhwc_out if nhwc_out is not None else np.empty(onhwc, cdt)
    if res.size and (x.size == 0 or C == 0):
        _bias_only(res, b, act, "NHWC", K)
    elif res.size:
        wpk = w.packed(cdt, 1) if isinstance(w, PackedConvWeight) else _pack(w, 1, cdt)
        xn = _nhwc_view(x, cdt) if fmt == "NHWC" else _to_padded_nhwc(x, fmt, (0, 0, 0, 0), cdt)
        geom = (N, C, xn.shape[1], xn.shape[2], K, R, S, P, Q, 1, 1, 1, 1, 1)
        _conv.yaconv_forward(xn, wpk[0], wpk[1], b, res, geom, pads[0], pads[2], act)
    if fmt == "NHWC":
        return res
    y = direct_out if direct_out is not None else np.empty((N, K, P, Q), cdt)
    if y.size:
        _conv.nhwc_to_nchw(res, y)
    return y


def _nhwc_view(x, cdt):
    """NHWC x of dtype cdt with unit channel stride (read in place by the packing; a copy only
    when the channels are strided)."""
    x = x.astype(cdt, copy=False)
    if x.strides[3] != x.itemsize or any(s % x.itemsize for s in x.strides):
        x = np.ascontiguousarray(x)
    return x


def _pointwise_sweeps(fmt, C, K, pixels):
    """Whether a 1x1 layer runs the BRGEMM row sweeps on the packed weight rather than one GEMM.

    NHWC layers that do not widen the channels more than twofold, or that have few pixels: the
    sweeps read the weight packed once and keep each pixel block in L1 across all output
    channels, where the GEMM packs both operands on every call. Measured on Zen 3 (AVX2), 1
    thread, ResNet-50's 1x1 layers, interleaved in one process: C256 56x56 K64 92 vs 71 GFLOP/s,
    C1024 14x14 K256 95 vs 87, C1024 14x14 K2048 /2 94 vs 74 (N = 1); C64 56x56 K64 86 vs 73
    (N = 8). Layers widening fourfold stay on the GEMM (C64 56x56 K256 84 vs 77 at N = 8), as
    do NCHW ones (the layout as it is, see _nchw_product)."""
    return fmt == "NHWC" and (K <= 2 * C or pixels <= 512)


# NCHW 1x1 layers with at most this many pixels per image run their images as one GEMM over
# (channels, N*P*Q), through two small transposes, instead of one GEMM per image (few columns
# each, the weight packed again per image). Zen 4 guest, one core, N = 8, ms, per image / one:
# C1024 -> K2048 at 7x7 29.9 / 20.9, C512 -> K2048 7x7 14.8 / 10.4, C256 -> K1024 14x14 10.7 /
# 10.2; at 28x28 per image wins (C512 -> K128 10.9 / 12.4).
NCHW_ONE_GEMM_PIXELS = 256


def _images_as_columns(a, n):
    """(N, rows, n) -> (rows, N*n): each image's columns side by side, a copy."""
    return np.ascontiguousarray(a.transpose(1, 0, 2)).reshape(a.shape[1], a.shape[0] * n)


def _nchw_product(wk, x3, out3):
    """out3 (N, K, n) = wk (K, C) @ x3[i] (C, n) for every image i."""
    from pytpp import matmul
    N, _, n = x3.shape
    if N > 1 and n <= NCHW_ONE_GEMM_PIXELS:
        r = matmul(wk, _images_as_columns(x3, n))
        np.copyto(out3, r.reshape(wk.shape[0], N, n).transpose(1, 0, 2))
    else:
        matmul(wk, x3, out=out3)
    return out3


def _pointwise(x, w, b, act, st, fmt, dims, cdt, res):
    """A 1x1 convolution as one GEMM per call: NHWC (N*P*Q, C) @ (C, K), NCHW (K, C) @ (C, P*Q)
    per image straight into the result (small images: one GEMM over all images' columns,
    NCHW_ONE_GEMM_PIXELS); strided ones subsample x first, a quarter of it."""
    from pytpp import matmul
    from pytpp.nn._activations import gelu, relu
    N, C, K, P, Q = dims
    if st != (1, 1):
        x = x[:, :, ::st[0], ::st[1]] if fmt == "NCHW" else x[:, ::st[0], ::st[1], :]
        x = x[:, :, :P, :Q] if fmt == "NCHW" else x[:, :P, :Q, :]
    nhwc = fmt == "NHWC"
    wk = w.matrix(cdt, nhwc) if isinstance(w, PackedConvWeight) else _matrix(w, cdt, nhwc)
    if fmt == "NCHW":
        x3 = np.ascontiguousarray(x, dtype=cdt).reshape(N, C, P * Q)
        r3 = _nchw_product(wk, x3, res.reshape(N, K, P * Q))
        if b is not None:
            r3 += b[:, None]
    else:
        x2 = np.ascontiguousarray(x, dtype=cdt).reshape(N * P * Q, C)
        r2 = res.reshape(N * P * Q, K)
        matmul(x2, wk, out=r2)
        if b is not None:
            r2 += b
    if act:
        (relu if act == 1 else gelu)(res, out=res)
    return res


def _windows(xp, R, S, st, dl, P, Q):
    """The (N, P, Q, C, R, S) view of padded NHWC xp: output pixel (p, q)'s window, no copy."""
    win = np.lib.stride_tricks.sliding_window_view(
        xp, ((R - 1) * dl[0] + 1, (S - 1) * dl[1] + 1), axis=(1, 2))
    return win[:, ::st[0], ::st[1], :, ::dl[0], ::dl[1]][:, :P, :Q]


def _im2col_forward(x, w, b, fmt, dims, st, dl, pads, groups, activation, cdt):
    """The baseline: the (N*P*Q, R*S*C/groups) patch matrix of each group times its weight."""
    from pytpp import matmul
    from pytpp.nn._activations import gelu, relu
    N, C, _, _, K, R, S, P, Q = dims
    wa = w._source if isinstance(w, PackedConvWeight) else w
    xp = _to_padded_nhwc(x, fmt, pads, cdt)
    cg, kg = C // groups, K // groups
    res = np.empty((N, P, Q, K), cdt)
    for g in range(groups):
        win = _windows(xp[..., g * cg:(g + 1) * cg], R, S, st, dl, P, Q)
        cols = np.ascontiguousarray(win.transpose(0, 1, 2, 4, 5, 3)).reshape(N * P * Q,
                                                                              R * S * cg)
        wg = np.ascontiguousarray(
            wa[g * kg:(g + 1) * kg].astype(cdt, copy=False).transpose(2, 3, 1, 0)
        ).reshape(R * S * cg, kg)
        res[..., g * kg:(g + 1) * kg] = matmul(cols, wg).reshape(N, P, Q, kg)
    if b is not None:
        res += b
    if activation is not None:
        res = (relu if activation == "relu" else gelu)(res)
    return np.ascontiguousarray(res.transpose(0, 3, 1, 2)) if fmt == "NCHW" else res


def _grad_out_arg(grad_out, fmt, N, K, P, Q, fn):
    go = A.float_operand(grad_out, "grad_out", fn)
    want = (N, K, P, Q) if fmt == "NCHW" else (N, P, Q, K)
    if go.shape != want:
        raise ValueError(f"{fn}: grad_out must have shape {want} for these arguments, got "
                         f"{go.shape}")
    return go


def _shape_arg(shape, name, fn):
    try:
        t = tuple(int(s) for s in shape)
    except TypeError:
        raise TypeError(f"{fn}: {name} must be a tuple of 4 ints, got {shape!r}") from None
    if len(t) != 4 or any(s < 0 for s in t):
        raise ValueError(f"{fn}: {name} must be 4 non-negative ints, got {shape!r}")
    return t


def conv2d_backward_data(grad_out: ArrayLike, w: "ArrayLike | PackedConvWeight",
                         input_shape: tuple[int, int, int, int],
                         stride: int | tuple[int, int] = 1,
                         padding: "int | tuple[int, int] | str" = 0,
                         dilation: int | tuple[int, int] = 1, groups: int = 1, *,
                         data_format: str = "NCHW") -> Array:
    """The gradient of :func:`conv2d` with respect to its input: per stride phase (the input
    pixels congruent modulo the stride), a stride-1 convolution of the output gradient with the
    flipped, channel-swapped taps that reach that phase, on the same BRGEMM engine (1x1 layers:
    one GEMM). bfloat16 grad_out and w at stride 1 on one group run conv2d's bf16 engine (each
    element one ``vdpbf16ps`` chain over its taps in (r, s, k) order of the flipped kernel);
    other bfloat16 inputs compute in float32 and round once.

    Parameters
    ----------
    grad_out : array_like
        The output gradient, in ``data_format``'s layout.
    w : array_like or PackedConvWeight
        (K, C/groups, R, S).
    input_shape : tuple of 4 ints
        x's shape, in ``data_format``'s layout.
    stride, padding, dilation, groups, data_format
        As given to conv2d.

    Returns
    -------
    ndarray
        grad_x of ``input_shape``, grad_out's dtype (promoted with w's).

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> g = np.ones((1, 1, 2, 2), np.float32)
    >>> pytpp.nn.conv2d_backward_data(g, np.ones((1, 1, 2, 2), np.float32), (1, 1, 3, 3))[0, 0]
    array([[1., 2., 1.],
           [2., 4., 2.],
           [1., 2., 1.]], dtype=float32)
    """
    fn = "pytpp.nn.conv2d_backward_data"
    fmt = A.data_format(data_format, fn)
    w, wshape, w_dt = _weight_arg(w, fn)
    ishape = _shape_arg(input_shape, "input_shape", fn)
    N, C, H, W, K, R, S, P, Q, st, dl, pads = _geometry(ishape, wshape, stride, padding,
                                                        dilation, groups, fmt, fn)
    groups = int(groups)
    go = _grad_out_arg(grad_out, fmt, N, K, P, Q, fn)
    res_dt = A.result_dtype(go.dtype, w_dt)
    cdt = A.compute_dtype(go.dtype, w_dt)
    oshape = (N, C, H, W) if fmt == "NCHW" else (N, H, W, C)
    res = np.zeros(oshape, cdt)
    if res.size == 0 or go.size == 0:
        return res.astype(res_dt, copy=False)
    wa = w._source if isinstance(w, PackedConvWeight) else w
    if R == S == 1 and groups == 1:
        _pointwise_backward_data(go, wa, res, st, pads, fmt, cdt)
        return res if res.dtype == res_dt else res.astype(res_dt)
    bpads = _full_correlation_pads(R, S, dl, pads)
    if (_bf16_engine(go.dtype, w_dt, groups, "brgemm") and st == (1, 1) and min(bpads) >= 0
            and C > COL2IM_MAX_VECTOR_FRACTION * _runtime.vector_width(False)
            and N * H * W >= BF16_BACKWARD_MIN_PIXELS):
        # stride 1: the forward bf16 engine on grad_out with the flipped, channel-swapped
        # weight (C, K, R, S), bordered so that every tap reaching an input pixel is summed
        wf = np.asarray(wa).transpose(1, 0, 2, 3)[:, :, ::-1, ::-1]   # packed in place
        return _forward_bf16(go, wf, None, 0, fmt, (N, K, P, Q, C, R, S, H, W), st, dl, bpads,
                             None)
    if groups == 1 and C <= COL2IM_MAX_VECTOR_FRACTION * _runtime.vector_width(
            cdt == np.float64):
        _col2im_backward_data(go, wa, res, st, dl, pads, fmt, cdt)
        return res if res.dtype == res_dt else res.astype(res_dt)
    cg, kg = C // groups, K // groups
    w5 = np.asarray(wa, dtype=cdt).reshape(groups, kg, cg, R, S)
    gon = go if fmt == "NHWC" else go.transpose(0, 2, 3, 1)
    # At a stride each phase takes a subset of the taps. The whole flipped, channel-swapped
    # weight is packed once (a view with unit tap steps: the pack's transposing kernel) and each
    # phase copies its taps' rows out of the panels; the phases' own strided views took one
    # scalar load per element (Zen 4 guest, one core, interleaved, ms: C512 14x14/2 N = 1
    # 8.43 -> 5.09, torch 5.69; N = 8 28.4 -> 25.0; C256 28x28/2 N = 1 3.89 -> 3.37).
    full = None
    if st != (1, 1) and not (cg == 1 and groups > 1 and kg == 1):
        full = _pack(w5[:, :, :, ::-1, ::-1].transpose(0, 2, 1, 3, 4), groups, cdt)
    # Stride phases: the rows h = a + sh*i of grad_x take only the taps r with
    # (a + top - r*dh) divisible by sh, from grad_out row i + (a + top - r*dh)/sh. Each phase is
    # a stride-1 correlation of grad_out with that flipped sub-kernel (at dilation dh/gcd), run on
    # the forward engine: no multiplication by an inserted zero.
    for a in range(min(st[0], H)):
        th = _phase_taps(a, R, st[0], dl[0], pads[0], H, P)
        for b_ in range(min(st[1], W)):
            tw = _phase_taps(b_, S, st[1], dl[1], pads[2], W, Q)
            if th is None or tw is None:
                continue        # no tap reaches these pixels: their gradient stays zero
            (rs, oh, dh2, Hi, Lh), (ss, ow, dw2, Wi, Lw) = th, tw
            # w'[g][c][k][t][u] = w[g*kg + k, c, rs[t], ss[u]]: a strided view (the taps are
            # an arithmetic progression), packed in place
            if full is None:
                wt = w5[:, :, :, _progression(rs)][:, :, :, :, _progression(ss)].transpose(
                    0, 2, 1, 3, 4)
                wpk = _pack(wt, groups, cdt)
            else:
                wpk = _phase_pack(full, rs, ss, R, S, kg)
            hs, hd = _window(P, oh, Lh)
            ws, wd = _window(Q, ow, Lw)
            nh, nw = hs.stop - hs.start, ws.stop - ws.start
            if (nh > 0 and nw > 0 and gon.dtype == cdt and gon.strides[3] == gon.itemsize
                    and _validate.element_strides_ok(gon)):
                # the window and its zero border in one pass (C)
                buf = np.empty((N, Lh, Lw, K), cdt)
                _conv.nhwc_pad(gon[:, hs, ws], buf, hd, Lh - hd - nh, wd, Lw - wd - nw)
            else:
                buf = np.zeros((N, Lh, Lw, K), cdt)
                if nh > 0 and nw > 0:
                    buf[:, hd:hd + nh, wd:wd + nw] = gon[:, hs, ws]
            geom = (N, K, Lh, Lw, C, len(rs), len(ss), Hi, Wi, 1, 1, dh2, dw2, groups)
            if st == (1, 1):
                _conv.forward(buf, *wpk, None, res, geom, 0, fmt == "NCHW")
                continue
            part = np.empty((N, C, Hi, Wi) if fmt == "NCHW" else (N, Hi, Wi, C), cdt)
            _conv.forward(buf, *wpk, None, part, geom, 0, fmt == "NCHW")
            if fmt == "NCHW":
                res[:, :, a::st[0], b_::st[1]] = part
            else:
                res[:, a::st[0], b_::st[1], :] = part
    return res if res.dtype == res_dt else res.astype(res_dt)


# bf16 backward by data runs the bf16 engine from this many input pixels: below, packing the
# flipped weight in bf16 pairs (a scalar transpose, ~0.5 ns per element against the float32
# path's vector one) costs more than the faster products save. One Zen 5 core, 3x3, K = C,
# GFLOP/s bf16 engine / float32 path (torch bf16): C512 7x7 N = 1 (49 pixels) 114 / 149 (129);
# C256 14x14 N = 1 (196) 274 / 215 (291); N = 8: C512 7x7 331 / 224 (373), C128 28x28 481 /
# 239 (464), C64 56x56 469 / 240 (425).
BF16_BACKWARD_MIN_PIXELS = 64


def _full_correlation_pads(R, S, dl, pads):
    """The border of grad_out (top, bottom, left, right) under which a stride-1 correlation
    with the flipped kernel gives grad_x: the kernel's extent minus the forward padding (a
    negative entry: the forward padding exceeded the extent)."""
    eh, ew = dl[0] * (R - 1), dl[1] * (S - 1)
    pt, pb, pl, pr = pads
    return eh - pt, eh - pb, ew - pl, ew - pr


# Input channels, as a fraction of a vector, up to which the backward by data runs as GEMMs
# into columns and a column-to-image sum: the engine's register tiles would run C lanes wide.
# One Zen 5 core, ms (engine -> columns; torch): 7x7/2 on 224^2, K = 64, N = 1, AVX-512: C = 1
# 7.1 -> 1.2, C = 3 7.1 -> 2.1 (5.9-7.0), C = 8 7.4 -> 3.6 (6.5); AVX2 C = 3 6.7 -> 3.0 (6.0);
# 3x3 on 56^2, K = 64: AVX-512 C = 4 0.36 -> 0.13, C = 8 0.33 -> 0.19; AVX2 C = 8 0.30 -> 0.32.
COL2IM_MAX_VECTOR_FRACTION = 0.5
# Bytes of columns per GEMM (output rows in chunks): they stay in L2 for the sum
COL2IM_CHUNK_BYTES = 512 << 10


def _col2im_backward_data(go, w, res, st, dl, pads, fmt, cdt):
    """grad_x = col2im(grad_out (P*Q, K) @ w as (K, R*S*C)) per image, a few output rows at a
    time: the GEMM's columns are R*S*C wide; the sum (frame/conv_col2im.c) adds each tap into
    its input pixel."""
    from pytpp import matmul
    K, C, R, S = w.shape
    gon = go if fmt == "NHWC" else go.transpose(0, 2, 3, 1)
    N, P, Q, _ = gon.shape
    wm = np.ascontiguousarray(np.asarray(w, dtype=cdt).transpose(0, 2, 3, 1)).reshape(
        K, R * S * C)
    dx = res if fmt == "NHWC" else np.zeros((N,) + res.shape[2:] + (C,), cdt)
    geom = (st[0], st[1], dl[0], dl[1], pads[0], pads[2])
    rows = max(1, COL2IM_CHUNK_BYTES // (Q * R * S * C * np.dtype(cdt).itemsize))
    cols = np.empty((min(rows, P) * Q, R * S * C), cdt)
    for n in range(N):
        for p0 in range(0, P, rows):
            g = np.ascontiguousarray(gon[n, p0:p0 + rows], dtype=cdt)
            c = matmul(g.reshape(-1, K), wm, out=cols[:g.shape[0] * Q])
            _conv.col2im_nhwc(c.reshape(1, g.shape[0], Q, R, S, C), dx[n:n + 1], p0, geom)
    if fmt == "NCHW":
        res[...] = dx.transpose(0, 3, 1, 2)


def _phase_pack(full, rs, ss, R, S, kg):
    """A phase's packed weight out of the whole flipped one ([panels][R*S taps][kg][nr]): in
    each panel, the rows of its taps (r, s) = (rs[t], ss[u]), flipped tap (R-1-r, S-1-s), in
    the phase's tap order."""
    wpk, nr, bk = full
    taps = [(R - 1 - r) * S + (S - 1 - v) for r in rs for v in ss]
    return np.take(wpk.reshape(-1, R * S, kg * nr), taps, axis=1).reshape(-1), nr, bk


def _progression(taps):
    """The taps (an arithmetic progression) as a slice."""
    step = taps[1] - taps[0] if len(taps) > 1 else 1
    stop = taps[-1] + step
    return slice(taps[0], stop if stop >= 0 else None, step)


def _phase_taps(a, R, s, d, top, H, P):
    """Phase a of one spatial dim of the backward by data: (taps r in the order the stride-1
    correlation reads them, grad_out row of its first tap, its dilation, output rows, buffer
    rows), or None when no tap lands on the phase."""
    rows = len(range(a, H, s))
    taps = [r for r in range(R) if (a + top - r * d) % s == 0]
    if not taps or rows == 0:
        return None
    taps = taps[::-1]                       # grad_out row (a + top - r*d)/s grows as r falls
    first = (a + top - taps[0] * d) // s
    step = (taps[0] - taps[1]) * d // s if len(taps) > 1 else 1
    return taps, first, step, rows, rows + (len(taps) - 1) * step


def _window(P, first, length):
    """grad_out rows [first, first + length) clipped to [0, P): (source slice, buffer offset)."""
    lo, hi = max(0, first), min(P, first + length)
    return slice(lo, max(lo, hi)), lo - first


def _pointwise_view(a, st, pads, fmt, P, Q):
    """The elements of an input-shaped array a 1x1 layer reads (a strided view)."""
    pt, _, pl, _ = pads
    if fmt == "NCHW":
        return a[:, :, pt::st[0], pl::st[1]][:, :, :P, :Q]
    return a[:, pt::st[0], pl::st[1], :][:, :P, :Q, :]


def _pointwise_backward_data(go, w, res, st, pads, fmt, cdt):
    """1x1: grad_x at the pixels the layer read is one GEMM, (N*P*Q, K) @ (K, C) for NHWC and
    (C, K) @ (K, P*Q) per image for NCHW (_nchw_product: small images as one GEMM; w^T read in
    place: numpy's copy of a 2048 x 1024 transpose took 14 ms, the GEMM on the view 4.6); every
    other pixel's gradient is zero (res arrives zeroed). At stride 1 without padding the GEMM
    writes res itself."""
    from pytpp import matmul
    K, C = w.shape[:2]
    wk = np.asarray(w, dtype=cdt).reshape(K, C)
    direct = st == (1, 1) and not any(pads)
    if fmt == "NCHW":
        N, _, P, Q = go.shape
        g = _nchw_product(wk.T, np.ascontiguousarray(go, dtype=cdt).reshape(N, K, P * Q),
                          res.reshape(N, C, P * Q) if direct else
                          np.empty((N, C, P * Q), cdt)).reshape(N, C, P, Q)
    else:
        N, P, Q, _ = go.shape
        g = matmul(np.ascontiguousarray(go, dtype=cdt).reshape(N * P * Q, K), wk,
                   out=res.reshape(N * P * Q, C) if direct else None).reshape(N, P, Q, C)
    if direct:
        return
    pt, pb, pl, pr = pads
    if not any(pads):
        if fmt == "NCHW":
            res[:, :, ::st[0], ::st[1]][:, :, :P, :Q] = g
        else:
            res[:, ::st[0], ::st[1], :][:, :P, :Q, :] = g
    elif fmt == "NCHW":
        full = np.zeros(res.shape[:2] + (res.shape[2] + pt + pb, res.shape[3] + pl + pr), cdt)
        full[:, :, ::st[0], ::st[1]][:, :, :P, :Q] = g
        res[...] = full[:, :, pt:pt + res.shape[2], pl:pl + res.shape[3]]
    else:
        full = np.zeros((res.shape[0], res.shape[1] + pt + pb, res.shape[2] + pl + pr,
                         res.shape[3]), cdt)
        full[:, ::st[0], ::st[1], :][:, :P, :Q, :] = g
        res[...] = full[:, pt:pt + res.shape[1], pl:pl + res.shape[2], :]


def _pointwise_backward_weight(go, x, st, pads, fmt, dims, cdt):
    """1x1: grad_w (K, C) = grad_out^T @ (the pixels read), one GEMM over all output pixels."""
    from pytpp import matmul
    N, C, K, P, Q = dims
    if any(pads):
        x = _to_padded_nhwc(x, fmt, pads, cdt)
        if fmt == "NCHW":
            x = x.transpose(0, 3, 1, 2)
    xs = _pointwise_view(x, st, (0, 0, 0, 0), fmt, P, Q)
    if fmt == "NCHW":
        g3 = np.ascontiguousarray(go, dtype=cdt).reshape(N, K, P * Q)
        x3 = np.ascontiguousarray(xs, dtype=cdt).reshape(N, C, P * Q)
        if N > 1 and P * Q <= NCHW_ONE_GEMM_PIXELS:     # one reduction over every pixel
            gw = matmul(_images_as_columns(g3, P * Q), _images_as_columns(x3, P * Q).T)
        else:
            gw = matmul(g3, x3.transpose(0, 2, 1)).sum(axis=0) if N > 1 else \
                matmul(g3[0], x3[0].T)
    else:
        g2 = np.ascontiguousarray(go, dtype=cdt).reshape(N * P * Q, K)
        x2 = np.ascontiguousarray(xs, dtype=cdt).reshape(N * P * Q, C)
        gw = matmul(g2.T, x2)
    return np.ascontiguousarray(gw).reshape(K, C, 1, 1)


# grad_bias rows per partial sum: the partial sums run in the compute dtype (float32 error grows
# with this length, not with N*H*W), the partials in float64. One float64 sum over the pixel axes
# casts every element: 1.87 ms for an (8, 56, 56, 64) float32 gradient, a third of a 1x1 layer's
# backward by weights there; by blocks 0.63 ms (NCHW, row sums: 1.05 -> 0.33 ms).
BIAS_GRAD_BLOCK = 256


def _bias_grad(go, fmt):
    """grad_out summed over N, H, W (float64, K values), the same for any thread count."""
    K = go.shape[1] if fmt == "NCHW" else go.shape[3]
    if go.size == 0:
        return np.zeros(K, np.float64)
    acc = np.float64 if go.dtype == np.float64 else np.float32
    if fmt == "NCHW":
        rows = go.reshape(go.shape[0] * K, -1).sum(axis=1, dtype=acc)   # pairwise, per plane
        return rows.reshape(go.shape[0], K).sum(axis=0, dtype=np.float64)
    g2 = go.reshape(-1, K)
    n = g2.shape[0] // BIAS_GRAD_BLOCK * BIAS_GRAD_BLOCK
    gb = g2[n:].sum(axis=0, dtype=np.float64)
    if n:
        gb += g2[:n].reshape(-1, BIAS_GRAD_BLOCK, K).sum(axis=1, dtype=acc).sum(
            axis=0, dtype=np.float64)
    return gb


def conv2d_backward_weight(grad_out: ArrayLike, x: ArrayLike,
                           weight_shape: tuple[int, int, int, int],
                           stride: int | tuple[int, int] = 1,
                           padding: "int | tuple[int, int] | str" = 0,
                           dilation: int | tuple[int, int] = 1, groups: int = 1, *,
                           data_format: str = "NCHW") -> tuple[Array, Array]:
    """The gradients of :func:`conv2d` with respect to its weight and bias.

    Per (group, r, s), grad_w[r, s] (C/groups x K/groups) is one BRGEMM over the output rows:
    the (r, s)-shifted input row, transposed (channels x pixels), times the gradient row (pixels
    x output channels), in chunks of rows that stay in L2.

    Parameters
    ----------
    grad_out : array_like
        The output gradient, in ``data_format``'s layout.
    x : array_like
        The forward input.
    weight_shape : tuple of 4 ints
        (K, C/groups, R, S).
    stride, padding, dilation, groups, data_format
        As given to conv2d.

    Returns
    -------
    (grad_w, grad_bias) : tuple of ndarray
        grad_w of ``weight_shape`` and grad_bias (K,) = grad_out summed over N, H, W.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> gw, gb = pytpp.nn.conv2d_backward_weight(np.ones((1, 1, 2, 2), np.float32),
    ...                                          np.ones((1, 1, 3, 3), np.float32), (1, 1, 2, 2))
    >>> gw[0, 0], gb
    (array([[4., 4.],
           [4., 4.]], dtype=float32), array([4.], dtype=float32))
    """
    fn = "pytpp.nn.conv2d_backward_weight"
    fmt = A.data_format(data_format, fn)
    x = A.float_operand(x, "x", fn)
    wshape = _shape_arg(weight_shape, "weight_shape", fn)
    N, C, _, _, K, R, S, P, Q, st, dl, pads = _geometry(x.shape, wshape, stride, padding,
                                                        dilation, groups, fmt, fn)
    groups = int(groups)
    go = _grad_out_arg(grad_out, fmt, N, K, P, Q, fn)
    res_dt = A.result_dtype(go.dtype, x.dtype)
    cdt = A.compute_dtype(go.dtype, x.dtype)
    cg = C // groups
    gb = _bias_grad(go, fmt)
    if R == S == 1 and groups == 1 and go.size and x.size:
        gw = _pointwise_backward_weight(go, x, st, pads, fmt, (N, C, K, P, Q), cdt)
        return gw.astype(res_dt, copy=False), gb.astype(res_dt)
    if groups == 1 and dl[1] == 1 and C <= TAPS_BWW_MAX_C and go.size and x.size:
        gw = _taps_backward_weight(go, x, fmt, pads, st, dl, (N, C, K, R, S, P, Q), cdt)
        return gw.astype(res_dt, copy=False), gb.astype(res_dt)
    few_pixels = (N * P * Q * PATCH_BWW_RATIO < C * K
                  and N * P * Q * C * R * S * np.dtype(cdt).itemsize <= PATCH_BWW_BYTES)
    if groups == 1 and go.size and x.size and few_pixels:
        gw = _patch_backward_weight(go, x, fmt, pads, st, dl, (N, C, K, R, S, P, Q), cdt)
        return gw.astype(res_dt, copy=False), gb.astype(res_dt)
    gw = np.zeros((K, cg, R, S), cdt)
    if go.size and x.size:
        xp = _to_padded_nhwc(x, fmt, pads, cdt)
        # stride 1 on small images: go widened to the padded width with zero columns, so each
        # image is one long reduction (P*W*(C+K) within an L2 budget; 7x7 runs 61 steps, not 7)
        wide = st == (1, 1) and xp.shape[2] > Q and P * xp.shape[2] * (C + K) * 4 <= 3 << 19
        gon = _to_padded_nhwc(go, fmt, (0, 0, 0, xp.shape[2] - Q if wide else 0), cdt)
        if not gon.flags.c_contiguous:
            gon = np.ascontiguousarray(gon)
        geom = (N, C, xp.shape[1], xp.shape[2], K, R, S, P, Q, st[0], st[1], dl[0], dl[1],
                groups)
        _conv.backward_weight(xp, gon, gw, geom)
    return gw.astype(res_dt, copy=False), gb.astype(res_dt)


# Few input channels (one group, unit column dilation): grad_w as one BRGEMM per tap row r whose
# rows are a window row's (s, c) elements, S*C of them (overlapping rows of the padded image),
# reduced over the images' output rows (_conv.backward_weight_taps): the register tiles run S*C
# rows where the other routes run C. One Zen 5 core, ms, patch or BRGEMM route -> taps (torch):
# the C3 7x7/2 stem N = 1 1.97 -> 1.12 (1.34), N = 8 18.6 -> 9.3 (13.6); C3 112^2 3x3 K32 N = 8
# 6.1 -> 0.79 (1.17); C16 56^2 3x3 K32 0.22 -> 0.16 (0.16); C32 56^2 K64 0.61 -> 0.52 (0.50);
# C64 56^2 K64 1.04 -> 1.10 (kept); AVX2 C3 stem 2.97 -> 2.59.
TAPS_BWW_MAX_C = 32


def _taps_backward_weight(go, x, fmt, pads, st, dl, dims, cdt):
    """grad_w (K, C, R, S) by the tap-row BRGEMMs above, in cdt."""
    N, C, K, R, S, P, Q = dims
    xp = np.ascontiguousarray(_to_padded_nhwc(x, fmt, pads, cdt))
    gon = np.ascontiguousarray(go.transpose(0, 2, 3, 1) if fmt == "NCHW" else go, dtype=cdt)
    gwt = np.empty((R, S * C, K), cdt)
    _conv.backward_weight_taps(xp, gon, gwt, (st[0], st[1], dl[0]))
    return np.ascontiguousarray(gwt.reshape(R, S, C, K).transpose(3, 2, 0, 1))


# Few output pixels for the weight's size (N*P*Q * PATCH_BWW_RATIO < C*K, one group): grad_w as
# one GEMM of go^T (K x N*P*Q) and the patch matrix (N*P*Q x C*R*S, (c, r, s) order), written
# straight in (K, C, R, S) order. The BRGEMM route produces (r, s, c, k) blocks and reorders 4
# bytes at a time, which outweighed its reductions there (Zen 3, 1 thread, fp32, GFLOP/s
# BRGEMM route -> patch GEMM, 3x3 layers: C512 7x7 N = 1 13.9 -> 69.9, N = 8 53.8 -> 70.2; C512
# 14x14/2 N = 1 28.9 -> 69.8; C256 14x14 N = 1 31-63 -> 64-65, N = 2 44-61 -> 62; C256 28x28/2
# N = 1 34-37 -> 62-64; the route kept C128 14x14 N = 1, 61 against 51, and every layer with
# more pixels per weight element).
PATCH_BWW_RATIO = 160
PATCH_BWW_BYTES = 64 << 20   # the patch matrix's largest size


def _patch_backward_weight(go, x, fmt, pads, st, dl, dims, cdt):
    """grad_w (K, C, R, S) = go^T @ patches (the route above, one group), in cdt: one GEMM over
    every pixel."""
    from pytpp import matmul
    N, C, K, R, S, P, Q = dims
    xp = _to_padded_nhwc(x, fmt, pads, cdt)
    gom = (go.transpose(0, 2, 3, 1) if fmt == "NCHW" else go).astype(cdt, copy=False)
    gt = gom.reshape(N * P * Q, K).T
    if dl[1] != 1:
        win = _windows(xp, R, S, st, dl, P, Q)
        cols = np.ascontiguousarray(win, dtype=cdt).reshape(N * P * Q, C * R * S)
        return matmul(gt, cols).reshape(K, C, R, S)
    # At unit column dilation a window row's (s, c) elements are one run of S*C in the image:
    # the patch matrix in (r, s, c) order copies whole runs (in (c, r, s) order the copy moved C
    # elements at a time).
    xp = np.ascontiguousarray(xp)
    sn, sh, sw, sc = xp.strides
    RSC = R * S * C
    runs = np.lib.stride_tricks.as_strided(
        xp, (N, P, Q, R, S * C), (sn, st[0] * sh, st[1] * sw, dl[0] * sh, sc), writeable=False)
    gw = matmul(gt, np.ascontiguousarray(runs).reshape(N * P * Q, RSC))
    return np.ascontiguousarray(gw.reshape(K, R, S, C).transpose(0, 3, 1, 2))


def _as_2d_args(x, w, stride, padding, dilation, fn):
    """conv1d's arguments as conv2d's: H = 1, a 1 x S kernel."""
    x = A.float_operand(x, "x", fn)
    if x.ndim != 3:
        raise ValueError(f"{fn}: x must be (N, C, W), got shape {x.shape}")
    s = A.pair(stride, "stride", fn, 1, 1)[0]
    d = A.pair(dilation, "dilation", fn, 1, 1)[0]
    p = padding if isinstance(padding, str) else (0, A.pair(padding, "padding", fn, 0, 1)[0])
    return x[:, :, None, :], (1, s), p, (1, d)


def _weight_1d(w, fn):
    w = A.float_operand(w, "w", fn)
    if w.ndim != 3:
        raise ValueError(f"{fn}: w must be (K, C/groups, S), got shape {w.shape}")
    return w[:, :, None, :]


def conv1d(x: ArrayLike, w: ArrayLike, bias: ArrayLike | None = None, stride: int = 1,
           padding: "int | str" = 0, dilation: int = 1, groups: int = 1, *,
           activation: str | None = None, out: Array | None = None) -> Array:
    """1D convolution (``torch.nn.functional.conv1d``) on x (N, C, W) and w (K, C/groups, S):
    conv2d's engine with H = 1 (long rows are split into 224-pixel blocks across threads; the
    dilated taps are the BRGEMM's batch).

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> x = np.arange(6, dtype=np.float32).reshape(1, 1, 6)
    >>> pytpp.nn.conv1d(x, np.ones((1, 1, 2), np.float32), dilation=2)
    array([[[2., 4., 6., 8.]]], dtype=float32)
    """
    fn = "pytpp.nn.conv1d"
    x4, st, p, d = _as_2d_args(x, w, stride, padding, dilation, fn)
    w4 = _weight_1d(w, fn)
    o4 = None
    if out is not None:
        if not isinstance(out, np.ndarray) or out.ndim != 3:
            raise ValueError(f"{fn}: out must be a 3-D ndarray (N, K, Q)")
        o4 = out[:, :, None, :]
    y = conv2d(x4, w4, bias, st, p, d, groups, activation=activation, out=o4)
    return out if out is not None else y[:, :, 0, :]


def conv1d_backward_data(grad_out: ArrayLike, w: ArrayLike, input_shape: tuple[int, int, int],
                         stride: int = 1, padding: "int | str" = 0, dilation: int = 1,
                         groups: int = 1) -> Array:
    """The gradient of :func:`conv1d` with respect to x (conv2d_backward_data with H = 1).

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> pytpp.nn.conv1d_backward_data(np.ones((1, 1, 2), np.float32),
    ...                               np.ones((1, 1, 2), np.float32), (1, 1, 3))
    array([[[1., 2., 1.]]], dtype=float32)
    """
    fn = "pytpp.nn.conv1d_backward_data"
    g = A.float_operand(grad_out, "grad_out", fn)
    if g.ndim != 3 or len(tuple(input_shape)) != 3:
        raise ValueError(f"{fn}: grad_out and input_shape must be (N, K, Q) and (N, C, W)")
    N, C, W = (int(v) for v in input_shape)
    _, st, p, d = _as_2d_args(np.empty((0, 0, 0), np.float32), w, stride, padding, dilation, fn)
    gx = conv2d_backward_data(g[:, :, None, :], _weight_1d(w, fn), (N, C, 1, W), st, p, d,
                              groups)
    return gx[:, :, 0, :]


def conv1d_backward_weight(grad_out: ArrayLike, x: ArrayLike,
                           weight_shape: tuple[int, int, int], stride: int = 1,
                           padding: "int | str" = 0, dilation: int = 1,
                           groups: int = 1) -> tuple[Array, Array]:
    """The gradients of :func:`conv1d` with respect to w and bias: ``(grad_w, grad_bias)``.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> gw, gb = pytpp.nn.conv1d_backward_weight(np.ones((1, 1, 2), np.float32),
    ...                                          np.arange(3, dtype=np.float32)[None, None],
    ...                                          (1, 1, 2))
    >>> gw, gb
    (array([[[1., 3.]]], dtype=float32), array([2.], dtype=float32))
    """
    fn = "pytpp.nn.conv1d_backward_weight"
    g = A.float_operand(grad_out, "grad_out", fn)
    if g.ndim != 3 or len(tuple(weight_shape)) != 3:
        raise ValueError(f"{fn}: grad_out and weight_shape must be (N, K, Q) and (K, C/groups, S)")
    x4, st, p, d = _as_2d_args(x, None, stride, padding, dilation, fn)
    K, cg, S = (int(v) for v in weight_shape)
    gw, gb = conv2d_backward_weight(g[:, :, None, :], x4, (K, cg, 1, S), st, p, d, groups)
    return gw[:, :, 0, :], gb
