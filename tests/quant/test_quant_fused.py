"""QuantizedLinear's one-call C forward pass (pytpp_lowp_qlinear) against its numpy passes
(_dynamic_qparams, _quantize, _product): the same bits, since both do the same float32 operations
in the same order and the int32 product is exact. Every ISA level, 1 and 2 threads, m = 0..4 and
larger, odd sizes."""
import numpy as np
import pytest

import pytpp
from pytpp.quant import QuantizedLinear
from pytpp.quant._linear import _dynamic_qparams


def numpy_forward(layer, x):
    """The layer's numpy path: per-tensor qparams, quantize, exact product, epilogue."""
    seven = layer._seven_bit()
    qmax = 127 if seven else 255
    scale, zp = _dynamic_qparams(x, qmax) if x.size else (1.0, 0)
    q = layer._quantize(x, scale, zp, qmax)
    return layer._product(q, scale, zp, seven)


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (1, 7, 3), (2, 17, 33), (3, 63, 65), (4, 300, 129),
                                   (1, 768, 301), (9, 129, 40), (33, 65, 17), (0, 5, 6)])
@pytest.mark.parametrize("act,bias,rr", [(None, True, None), ("relu", False, False),
                                         ("gelu", True, True), ("relu", True, None)])
def test_fused_equals_numpy_passes(isa, threads, rng, m, k, n, act, bias, rr):
    w = (rng.standard_normal((n, k)) * 0.1).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    layer = QuantizedLinear(w, b, activation=act, reduce_range=rr)
    x = (rng.standard_normal((m, k)) * 3 + 0.5).astype(np.float32)
    y = layer(x)
    assert y.dtype == np.float32 and y.shape == (m, n)
    np.testing.assert_array_equal(y, numpy_forward(layer, x))


def test_fused_edge_values(isa, rng):
    w = rng.standard_normal((19, 23)).astype(np.float32)
    layer = QuantizedLinear(w)
    for x in (np.zeros((3, 23), np.float32),                     # scale 1, zero point 0
              np.full((2, 23), -2.5, np.float32),                # all negative: zp = qmax
              np.full((1, 23), 1e30, np.float32),                # huge: the clip decides
              np.linspace(-1, 1, 4 * 23, dtype=np.float32).reshape(4, 23)):  # exact halves
        np.testing.assert_array_equal(layer(x), numpy_forward(layer, x))


def test_fused_rejects_nan_and_inf(rng):
    layer = QuantizedLinear(rng.standard_normal((5, 8)).astype(np.float32))
    for bad in (np.nan, np.inf, -np.inf):
        x = np.ones((2, 8), np.float32)
        x[1, 3] = bad
        with pytest.raises(ValueError, match="NaN or inf"):
            layer(x)


def test_views_and_float64_input(isa, rng):
    w = rng.standard_normal((12, 20)).astype(np.float32)
    layer = QuantizedLinear(w, rng.standard_normal(12))
    x = rng.standard_normal((6, 40)).astype(np.float32)
    for view in (x[:, ::2], x[::2, :20], np.asfortranarray(x[:, :20])):
        np.testing.assert_array_equal(layer(view), numpy_forward(layer, np.array(view)))
    x64 = rng.standard_normal((3, 20))
    np.testing.assert_array_equal(layer(x64), numpy_forward(layer, x64.astype(np.float32)))


def test_threads_agree(rng):
    w = (rng.standard_normal((3072, 768)) * 0.05).astype(np.float32)
    layer = QuantizedLinear(w, rng.standard_normal(3072))
    old = pytpp.get_num_threads()
    try:
        for m in (1, 4, 32, 200):          # 200 x 3072: the passes over x, y split too
            x = rng.standard_normal((m, 768)).astype(np.float32)
            outs = []
            for t in (1, 2):
                pytpp.set_num_threads(t)
                outs.append(layer(x))
            np.testing.assert_array_equal(outs[0], outs[1])
            np.testing.assert_array_equal(outs[0], numpy_forward(layer, x))
    finally:
        pytpp.set_num_threads(old)


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (1, 7, 3), (3, 63, 65), (5, 300, 129),
                                   (33, 65, 17), (0, 5, 6)])
@pytest.mark.parametrize("act,bias", [(None, True), ("relu", False), ("gelu", True)])
@pytest.mark.parametrize("hi", [127, 255])
def test_uint8_input_fused_equals_numpy_product(isa, threads, rng, m, k, n, act, bias, hi):
    # static quantization: x given as uint8 with its scale and zero point; 7-bit data (hi 127)
    # runs the 7-bit kernels on AVX2, full-range data the exact 8-bit ones
    w = (rng.standard_normal((n, k)) * 0.1).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    layer = QuantizedLinear(w, b, activation=act)
    q = rng.integers(0, hi + 1, (m, k)).astype(np.uint8)
    scale, zp = 0.037, int(rng.integers(0, hi + 1))
    y = layer.forward(q, scale, zp)
    assert y.dtype == np.float32 and y.shape == (m, n)
    seven = layer._seven_bit() and (q.size == 0 or int(q.max()) <= 127)
    np.testing.assert_array_equal(y, layer._product(q, scale, zp, seven))
    # the float reference: (q - zp) @ wq.T, dequantized, within float32 rounding
    acc = (q.astype(np.int64) - zp) @ layer.weight_q.T.astype(np.int64)
    want = acc * (scale * layer.weight_scale) + (0 if b is None else b)
    if act == "relu":
        want = np.maximum(want, 0)
    if act != "gelu" and want.size:
        # float32 rounding of the dequantized sum and of the bias add: a few ulps of the largest
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5 * (np.abs(want).max() + 1))


def test_uint8_input_views_and_bad_parameters(isa, rng):
    w = rng.standard_normal((12, 20)).astype(np.float32)
    layer = QuantizedLinear(w, rng.standard_normal(12))
    q = rng.integers(0, 256, (6, 40)).astype(np.uint8)
    want = layer.forward(np.ascontiguousarray(q[:, ::2]), 0.1, 7)
    np.testing.assert_array_equal(layer.forward(q[:, ::2], 0.1, 7), want)     # strided x
    np.testing.assert_array_equal(layer.forward(q[:3, :20], 0.1, 7),
                                  layer.forward(q[:3, :20].copy(), 0.1, 7))  # row stride 40
    with pytest.raises(ValueError, match="x_scale and x_zero_point"):
        layer.forward(q[:, :20])
    with pytest.raises(ValueError, match="x_zero_point"):
        layer.forward(q[:, :20], 0.1, 256)
    with pytest.raises(ValueError):
        layer.forward(q[:, :20], -1.0, 0)


@pytest.mark.parametrize("act", [None, "gelu"])
def test_out_is_filled_and_returned(isa, rng, act):
    w = rng.standard_normal((9, 20)).astype(np.float32)
    layer = QuantizedLinear(w, rng.standard_normal(9), activation=act)
    x = rng.standard_normal((2, 3, 20)).astype(np.float32)
    want = layer(x)
    out = np.full((2, 3, 9), 7.0, np.float32)
    assert layer(x, out=out) is out
    np.testing.assert_array_equal(out, want)
    # strided x (the numpy passes), a non-contiguous out (computed aside, then copied)
    big = np.full((2, 3, 18), 7.0, np.float32)
    xs = np.repeat(x, 2, axis=-1)[..., ::2]
    view = big[..., ::2]
    assert layer.forward(xs, out=view) is view
    np.testing.assert_array_equal(view, want)
    assert (big[..., 1::2] == 7).all()
    q = rng.integers(0, 128, (4, 20)).astype(np.uint8)
    out = np.empty((4, 9), np.float32)
    assert layer.forward(q, 0.05, 3, out=out) is out
    np.testing.assert_array_equal(out, layer.forward(q, 0.05, 3))


def test_bad_out_raises_before_anything_is_written(rng):
    layer = QuantizedLinear(rng.standard_normal((9, 20)).astype(np.float32))
    x = rng.standard_normal((4, 20)).astype(np.float32)
    for bad in (np.empty((4, 9), np.float64), np.empty((4, 8), np.float32), [[0.0] * 9] * 4):
        with pytest.raises(ValueError, match="out must be a float32 array"):
            layer(x, out=bad)
    ro = np.zeros((4, 9), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        layer(x, out=ro)
    out = np.full((4, 9), 7.0, np.float32)
    x[2, 5] = np.nan
    with pytest.raises(ValueError, match="NaN or inf"):
        layer(x, out=out)
    assert (out == 7).all()
