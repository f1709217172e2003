"""Quantized dense layers for inference: int8 weights packed once, activations quantized on the
fly (dynamic quantization), the int32 product on the 8-bit kernels, then dequantize -> bias ->
activation on the result."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pytpp import _layout, _validate
from pytpp._typing import Array, ArrayLike
from pytpp.linalg._lowp import vnni_pack
from pytpp.nn import _activations
from pytpp._core import _lowp as _lowp_core
from pytpp._core import _runtime
from pytpp.tpp import _lowp as _tpp_lowp
from pytpp.tpp._smallgemm import gemm as _gemm_handle

_ACTS = (None, "relu", "gelu")
F32 = np.dtype(np.float32)
I32 = np.dtype(np.int32)


def _activate(y, activation):
    if activation == "relu":
        _activations.relu(y, out=y)
    elif activation == "gelu":
        _activations.gelu(y, out=y)
    return y


def _dynamic_qparams(x, qmax):
    """Per-tensor uint8 parameters of x: its range with 0 in it onto [0, qmax]."""
    lo = min(float(x.min()), 0.0)
    hi = max(float(x.max()), 0.0)
    scale = (hi - lo) / qmax if hi > lo else 1.0
    zp = int(min(qmax, max(0, round(-lo / scale))))
    return scale, zp


def _seven_bit_kernels():
    """Whether the active level runs 7-bit activations faster (AVX2: vpmaddubsw, exact for
    values up to 127); the AVX-512 levels and AVX-VNNI have their own fast 8-bit kernels."""
    return _runtime.get_isa() == "avx2" and _tpp_lowp.SEVEN_BIT_PAYS


class QuantizedLinear:
    """``act(x @ weight.T + bias)`` with weight int8 (symmetric; per output channel by default)
    and x quantized to uint8 per tensor for each call (dynamic quantization).

    The weight (torch's (out_features, in_features) layout, float32) is copied, quantized and
    packed in VNNI quads once; its column sums make the activations' zero point one add per
    output in the product's pass. The error against the float32 layer is that of rounding x and
    w to 8 bits (docs/quant.md states the bound and measures it).

    Parameters
    ----------
    weight : (out_features, in_features) array_like
    bias : (out_features,) array_like, optional
    per_channel : bool
        One weight scale per output channel (default), else one for the whole matrix.
    activation : None, "relu" or "gelu"
        Applied after the bias (gelu: the exact erf form).
    reduce_range : bool, optional
        Quantize activations to [0, 127] instead of [0, 255] (one bit less resolution, as
        torch's x86 engine does), which the AVX2 level runs on faster exact kernels. Default:
        where that helps (the AVX2 level on CPUs without AVX-VNNI).

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> rng = np.random.default_rng(0)
    >>> w = rng.standard_normal((8, 16)).astype(np.float32)
    >>> x = rng.standard_normal((4, 16)).astype(np.float32)
    >>> layer = pytpp.quant.QuantizedLinear(w)
    >>> bool(np.abs(layer(x) - x @ w.T).max() < 0.1 * np.abs(x @ w.T).max())
    True
    """

    def __init__(self, weight: ArrayLike, bias: ArrayLike | None = None, *,
                 per_channel: bool = True, activation: str | None = None,
                 reduce_range: bool | None = None):
        fn = "pytpp.quant.QuantizedLinear"
        w = np.array(weight, dtype=np.float32, copy=True)
        if w.ndim != 2:
            raise ValueError(f"{fn}: weight must be 2-D (out_features, in_features), got shape "
                             f"{w.shape}")
        if not np.all(np.isfinite(w)):
            raise ValueError(f"{fn}: weight holds NaN or inf")
        if activation not in _ACTS:
            raise ValueError(f"{fn}: activation must be one of {_ACTS}, got {activation!r}")
        out_f, in_f = w.shape
        if bias is not None:
            bias = np.array(bias, dtype=np.float32, copy=True)
            if bias.shape != (out_f,):
                raise ValueError(f"{fn}: bias has shape {bias.shape}; expected ({out_f},)")
        amax = np.abs(w).max(axis=1) if per_channel else np.full(out_f, np.abs(w).max())
        w_scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float64)
        wq = np.clip(np.rint(w / w_scale[:, None]), -127, 127).astype(np.int8)
        self.in_features, self.out_features = in_f, out_f
        self.per_channel = bool(per_channel)
        self.reduce_range = reduce_range
        self.activation = activation
        self.bias = bias
        self.weight_scale = w_scale
        self.weight_q = wq                              # (out, in) int8, torch's layout
        self._colsum = wq.sum(axis=1, dtype=np.int64)   # sum over k of each output's weights
        self._pack()

    def _pack(self):
        """The weights in VNNI quads, packed once more for the kernels' panels (lazily, per
        kernel) by the GEMM handle: no per-call packing of the constant operand."""
        self._packed = {}
        self._fused = {}
        self._vnni = vnni_pack(self.weight_q.T)        # (ceil(in/4), out, 4)

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_packed")
        state.pop("_fused")
        state.pop("_vnni")
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._pack()

    def __repr__(self) -> str:
        return (f"QuantizedLinear(in_features={self.in_features}, "
                f"out_features={self.out_features}, per_channel={self.per_channel}, "
                f"activation={self.activation!r})")

    def __call__(self, x: ArrayLike, *, out: Array | None = None) -> Array:
        return self.forward(x, out=out)

    def forward(self, x: ArrayLike, x_scale: float | None = None,
                x_zero_point: int | None = None, *, out: Array | None = None) -> Array:
        """float32 (..., in_features) -> float32 (..., out_features); x may also be uint8 with
        its `x_scale` and `x_zero_point` (an already quantized activation). `out`: a float32
        array of the result's shape, filled and returned."""
        fn = "pytpp.quant.QuantizedLinear"
        x = _validate.asarray(x)
        if x.ndim < 1 or x.shape[-1] != self.in_features:
            raise ValueError(f"{fn}: x has shape {x.shape}; expected (..., {self.in_features})")
        lead = x.shape[:-1]
        x2 = x.reshape(-1, self.in_features)
        y2 = self._out_rows(out, lead + (self.out_features,), x, fn)
        if out is not None:
            y = self.forward(x, x_scale, x_zero_point) if y2 is None else \
                self._forward_rows(x, x2, x_scale, x_zero_point, fn, y2)
            if y2 is None:
                out[...] = y
            return out
        return self._forward_rows(x, x2, x_scale, x_zero_point, fn, None).reshape(
            lead + (self.out_features,))

    @staticmethod
    def _out_rows(out, shape, x, fn):
        """out's rows as a (m, out_features) view the kernels can fill in place, or None (no
        out, or one they cannot: computed aside, then copied). Checked before anything runs."""
        if out is None:
            return None
        if not isinstance(out, np.ndarray) or out.dtype != F32 or out.shape != shape:
            raise ValueError(f"{fn}: out must be a float32 array of shape {shape}")
        if not out.flags.writeable:
            raise ValueError(f"{fn}: out is read-only")
        if not out.flags.c_contiguous or np.may_share_memory(out, x):
            return None
        return out.reshape(-1, shape[-1])

    def _forward_rows(self, x, x2, x_scale, x_zero_point, fn, y2):
        """The rows of the result (m, out_features) for the rows x2 of x, into y2 if given."""
        if x.dtype == np.uint8:
            if x_scale is None or x_zero_point is None:
                raise ValueError(f"{fn}: a uint8 x needs x_scale and x_zero_point")
            scale = _validate.real_arg(x_scale, "x_scale", fn, lo=0.0, lo_open=True)
            zp = int(x_zero_point)
            if not 0 <= zp <= 255:
                raise ValueError(f"{fn}: x_zero_point must lie in [0, 255], got {zp}")
            q = x2
            seven = self._seven_bit() and (q.size == 0 or int(q.max()) <= 127)
            if q.strides[-1] == 1 or q.shape[-1] <= 1:
                return self._forward_fused_u8(q, scale, zp, seven, y2)
        else:
            if x.dtype.kind != "f":
                raise TypeError(f"{fn}: x has dtype {x.dtype}; expected float32 (or uint8)")
            xf = x2.astype(np.float32, copy=False)
            if xf.shape[-1] > 1 and xf.strides[-1] != 4:
                xf = _layout.contiguous(xf)   # a transposed x: to rows by the transpose kernels
            seven = self._seven_bit()
            if xf.strides[-1] == 4 or xf.shape[-1] <= 1:   # (the C pass rejects NaN / inf)
                return self._forward_fused(xf, seven, y2)
            if not np.all(np.isfinite(xf)):
                raise ValueError(f"{fn}: x holds NaN or inf")
            qmax = 127 if seven else 255
            scale, zp = _dynamic_qparams(xf, qmax) if xf.size else (1.0, 0)
            q = self._quantize(xf, scale, zp, qmax)
        y = self._product(q, scale, zp, seven)
        if y2 is not None:
            y2[...] = y
            return y2
        return y

    def _forward_fused(self, xf, seven, y=None):
        """float32 x (unit column stride) -> y in one C call (pytpp_lowp_qlinear): range,
        quantization, the product on the weights packed once per kernel, dequantize + bias
        (+ relu); the same numbers as the numpy passes of _quantize and _product."""
        m, n = xf.shape[0], self.out_features
        isa, which, packed = self._packed_for(seven)
        if y is None:
            y = np.empty((m, n), F32)
        _lowp_core.qlinear(isa, which, xf, packed, self._colsum, self.weight_scale, self.bias,
                           self.activation == "relu", 127 if seven else 255, y)
        return _activate(y, "gelu") if self.activation == "gelu" else y

    def _forward_fused_u8(self, q, scale, zp, seven, y=None):
        """uint8 x (unit column stride) -> y in one C call (pytpp_lowp_qlinear_u8): the
        product on the packed weights and dequantize + bias (+ relu); the numbers of
        _product."""
        isa, which, packed = self._packed_for(seven)
        if y is None:
            y = np.empty((q.shape[0], self.out_features), F32)
        _lowp_core.qlinear_u8(isa, which, q, scale, zp, packed, self._colsum, self.weight_scale,
                              self.bias, self.activation == "relu", y)
        return _activate(y, "gelu") if self.activation == "gelu" else y

    def _packed_for(self, seven):
        """(level index, kernel, packed weight bytes) of the active level's u8 x s8 kernels."""
        isa_name = _runtime.get_isa()
        forced = _tpp_lowp._forced["i8"]
        key = (isa_name, seven, forced)
        hit = self._fused.get(key)
        if hit is None:
            h = _gemm_handle(1, self.out_features, self.in_features, dtype=np.uint8,
                             b_dtype=np.int8, beta=0.0, b_vnni=True, a_7bit=seven)
            which = forced or (_tpp_lowp._U7 if seven and h.isa == "avx2"
                               and _tpp_lowp.SEVEN_BIT_PAYS else 0)
            packed = self._packed.get(h.isa)
            if packed is None:
                packed = self._packed[h.isa] = h.pack(self._vnni)
            buf = packed.buffer((h._isa_idx, which, _lowp_core.U8), _lowp_core.U8)
            hit = self._fused[key] = (h._isa_idx, which, buf)
        return hit

    def _seven_bit(self):
        return _seven_bit_kernels() if self.reduce_range is None else bool(self.reduce_range)

    @staticmethod
    def _quantize(x, scale, zp, qmax):
        t = np.multiply(x, np.float32(1.0 / scale), dtype=np.float32)
        np.rint(t, out=t)
        t += np.float32(zp)
        np.clip(t, 0, qmax, out=t)
        return t.astype(np.uint8)

    def _product(self, q, scale, zp, seven):
        m, n, k = q.shape[0], self.out_features, self.in_features
        acc = np.empty((m, n), I32)
        comp = np.ascontiguousarray((-zp * self._colsum).astype(I32))
        h = _gemm_handle(m, n, k, dtype=np.uint8, b_dtype=np.int8, beta=0.0, b_vnni=True,
                         a_7bit=seven)
        # the packed weights serve any m: keyed by the handle's (n, k) only
        packed = self._packed.get(h.isa)
        if packed is None:
            packed = self._packed[h.isa] = h.pack(self._vnni)
        h(q, packed, acc, comp=comp)
        y = np.multiply(acc, (scale * self.weight_scale).astype(np.float32), dtype=np.float32)
        if self.bias is not None:
            y += self.bias
        return _activate(y, self.activation)


class QuantizedMLP:
    """A chain of :class:`QuantizedLinear` layers: each layer's output is quantized to uint8
    for the next one (the activations stay 8-bit between the products).

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> rng = np.random.default_rng(1)
    >>> layers = [pytpp.quant.QuantizedLinear(rng.standard_normal((16, 8)), activation="relu"),
    ...           pytpp.quant.QuantizedLinear(rng.standard_normal((4, 16)))]
    >>> pytpp.quant.QuantizedMLP(layers)(rng.standard_normal((3, 8)).astype(np.float32)).shape
    (3, 4)
    """

    def __init__(self, layers: Sequence[QuantizedLinear]):
        layers = list(layers)
        fn = "pytpp.quant.QuantizedMLP"
        if not layers or not all(isinstance(l, QuantizedLinear) for l in layers):
            raise TypeError(f"{fn}: layers must be a non-empty list of QuantizedLinear")
        for i, (l0, l1) in enumerate(zip(layers, layers[1:])):
            if l0.out_features != l1.in_features:
                raise ValueError(f"{fn}: layer {i} gives {l0.out_features} features, layer "
                                 f"{i + 1} takes {l1.in_features}")
        self.layers = layers

    def __call__(self, x: ArrayLike) -> Array:
        y = _validate.asarray(x)
        for layer in self.layers:
            y = layer(y)
        return y

    forward = __call__
