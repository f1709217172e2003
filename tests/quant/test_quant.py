"""pytpp.quant: quantize / dequantize against numpy's round-half-even reference bit for bit,
choose_qparams' contract, exact matmul_int8 with zero points, quantized layers' error bound."""
import pickle

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pytpp
from pytpp.quant import (QuantizedLinear, QuantizedMLP, choose_qparams, dequantize,
                         matmul_int8, quantize)

U8, I8 = np.uint8, np.int8


def ref_quantize(x, scale, zp, dt):
    info = np.iinfo(dt)
    return np.clip(np.rint(x.astype(np.float64) / scale) + zp, info.min, info.max).astype(dt)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 300), scale=st.floats(1e-4, 10.0), dt=st.sampled_from([U8, I8]),
       seed=st.integers(0, 2 ** 32 - 1), f32=st.booleans())
def test_quantize_matches_the_reference(n, scale, dt, seed, f32):
    rng = np.random.default_rng(seed)
    info = np.iinfo(dt)
    zp = int(rng.integers(info.min, info.max + 1))
    x = (rng.standard_normal(n) * 100 * scale).astype(np.float32 if f32 else np.float64)
    x[: n // 10] = np.round(x[: n // 10] / scale + 0.0) * scale + scale / 2   # ties
    np.testing.assert_array_equal(quantize(x, scale, zp, dt), ref_quantize(x, scale, zp, dt))


def test_round_half_even_and_saturation():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 1e9, -1e9, np.inf, -np.inf])
    np.testing.assert_array_equal(quantize(x, 1.0, 0, I8), [0, 2, 2, 0, -2, 127, -128, 127, -128])
    np.testing.assert_array_equal(quantize(x, 1.0, 0, U8), [0, 2, 2, 0, 0, 255, 0, 255, 0])
    with pytest.raises(ValueError, match="NaN"):
        quantize(np.array([1.0, np.nan]), 1.0, 0)


def test_per_channel_axes_and_roundtrip(rng):
    x = rng.standard_normal((4, 5, 6)).astype(np.float32)
    for axis in (0, 1, -1):
        scale, zp = choose_qparams(x, U8, axis=axis)
        assert scale.shape == (x.shape[axis],) and zp.shape == (x.shape[axis],)
        q = quantize(x, scale, zp, U8, axis=axis)
        shape = [1, 1, 1]
        shape[axis] = x.shape[axis]
        want = ref_quantize(x, scale.reshape(shape), zp.reshape(shape), U8)
        np.testing.assert_array_equal(q, want)
        back = dequantize(q, scale, zp, axis=axis)
        assert back.dtype == np.float32
        assert np.all(np.abs(back - x) <= scale.reshape(shape) / 2 * (1 + 1e-6))


@pytest.mark.parametrize("shape", [(300, 257), (70001,), (3, 150, 90), (40000, 1)])
@pytest.mark.parametrize("axis", [None, 0, -1])
def test_maps_over_many_blocks_match_the_reference(rng, shape, axis):
    """Arrays of several blocks (rows of ~32K elements at a time): per tensor and per channel
    along the first axis (sliced with the blocks) and the last, with ties and an infinity in
    the last block; dequantize equal to the numpy expression bit for bit."""
    x = (rng.standard_normal(shape) * 30).astype(np.float32)
    flat = x.reshape(-1)
    flat[-5:] = [0.5, 1.5, -2.5, np.inf, -np.inf]
    if axis is None:
        scale, zp, sb, zb = 0.25, 7, 0.25, 7
    else:
        n = shape[axis]
        scale, zp = rng.uniform(0.05, 2.0, n), rng.integers(-20, 20, n)
        bshape = [1] * len(shape)
        bshape[axis] = n
        sb, zb = scale.reshape(bshape), zp.reshape(bshape)
    q = quantize(x, scale, zp, I8, axis=axis)
    np.testing.assert_array_equal(q, ref_quantize(x, sb, zb, I8))
    back = dequantize(q, scale, zp, axis=axis)
    want = ((q.astype(np.int64) - zb).astype(np.float32) * np.float32(sb)
            if axis is None else
            (q.astype(np.int64) - zb).astype(np.float32) * sb.astype(np.float32))
    np.testing.assert_array_equal(back, want)


def test_choose_qparams_contract(rng):
    x = np.array([-1.0, 2.0, 4.0])
    s, z = choose_qparams(x, U8)
    assert s == pytest.approx(5 / 255) and z == 51
    assert dequantize(quantize(np.zeros(1), s, z), s, z)[0] == 0.0    # 0 is exact
    s, z = choose_qparams(x, I8, symmetric=True)
    assert z == 0 and s == pytest.approx(4 / 127)
    s, z = choose_qparams(np.array([1.0, 2.0]), U8)                   # range always holds 0
    assert z == 0 and s == pytest.approx(2 / 255)
    y = np.concatenate([rng.standard_normal(100000), [1e4]])
    assert choose_qparams(y, U8, method="percentile")[0] < choose_qparams(y, U8)[0] / 100
    assert choose_qparams(np.zeros(4), U8) == (1.0, 0)
    with pytest.raises(ValueError, match="method"):
        choose_qparams(x, U8, method="mse")


def test_bad_parameters_raise_before_computing():
    x = np.ones(4)
    for kwargs, err in [(dict(scale=0.0, zero_point=0), ValueError),
                        (dict(scale=-1.0, zero_point=0), ValueError),
                        (dict(scale=np.inf, zero_point=0), ValueError),
                        (dict(scale=1.0, zero_point=256), ValueError),
                        (dict(scale=1.0, zero_point=1.5), ValueError),
                        (dict(scale=np.ones(3), zero_point=0, axis=0), ValueError),
                        (dict(scale=np.ones(4), zero_point=0), ValueError)]:
        with pytest.raises(err):
            quantize(x, **kwargs)
    with pytest.raises(ValueError):
        quantize(x, 1.0, -1, U8)
    with pytest.raises(TypeError):
        quantize(x, 1.0, 0, np.int16)
    assert quantize(np.zeros((0, 3)), 1.0, 0).shape == (0, 3)


@pytest.mark.parametrize("adt,bdt", [(U8, I8), (I8, I8), (U8, U8), (I8, U8)])
@pytest.mark.parametrize("m,k,n", [(13, 67, 9), (1, 67, 9), (2, 301, 40), (3, 5, 17),
                                   (150, 1100, 70), (40, 33, 300)])
def test_matmul_int8_exact(isa, threads, rng, adt, bdt, m, k, n):
    # m <= 3 with a zero point of a: b's column sums from a row of ones in the same product;
    # more rows: from b's panels as they are packed (several k blocks, threads by rows or by
    # columns, partial panels)
    ia, ib = np.iinfo(adt), np.iinfo(bdt)
    a = rng.integers(ia.min, ia.max + 1, (m, k)).astype(adt)
    b = rng.integers(ib.min, ib.max + 1, (k, n)).astype(bdt)
    for za, zb in [(0, 0), (int(ia.max // 2), 0), (0, int(ib.min + 3)),
                   (rng.integers(ia.min, ia.max + 1, m), rng.integers(ib.min, ib.max + 1, n))]:
        got = matmul_int8(a, b, a_zero_point=za, b_zero_point=zb)
        za_ = np.asarray(za)[:, None] if np.ndim(za) else za
        want = (a.astype(np.int64) - za_) @ (b.astype(np.int64) - zb)
        np.testing.assert_array_equal(got, want.astype(np.int32))
    out = np.empty((m, n), np.int32)
    assert matmul_int8(a[:, ::1], np.asfortranarray(b), out=out) is out
    # strided b, out given, and sums that wrap int32 (few rows: numpy's int64 reference is slow)
    if m > 13:
        return
    big = np.full((m, 70001), ia.max, adt)
    bb = np.full((70001, 2 * n), ib.min if ib.min else ib.max, bdt)[:, ::2]
    za = int(ia.min) if ia.min else 1
    want = ((big.astype(np.int64) - za) @ bb.astype(np.int64)).astype(np.int32)
    np.testing.assert_array_equal(matmul_int8(big, bb, a_zero_point=za, out=out), want)


def test_matmul_int8_bad_input():
    a, b = np.ones((3, 4), U8), np.ones((4, 2), I8)
    out = np.full((3, 2), 9, np.int32)
    for args, kw, err in [((a.astype(np.float32), b), {}, TypeError),
                          ((a.astype(np.int16), b), {}, TypeError),
                          ((a, b[:3]), {}, ValueError),
                          ((a, b), dict(a_zero_point=256), ValueError),
                          ((a, b), dict(b_zero_point=1.5), TypeError),
                          ((a, b), dict(a_zero_point=np.ones(2, np.int64)), ValueError)]:
        with pytest.raises(err):
            matmul_int8(*args, out=out, **kw)
        assert (out == 9).all()


def test_quantized_linear_error_and_pickle(rng):
    w = rng.standard_normal((48, 64)).astype(np.float32) * 0.1
    bias = rng.standard_normal(48).astype(np.float32)
    x = rng.standard_normal((20, 64)).astype(np.float32)
    for act, fn, rr in [(None, lambda y: y, None), ("relu", lambda y: np.maximum(y, 0), False),
                        ("relu", lambda y: np.maximum(y, 0), True)]:
        layer = QuantizedLinear(w, bias, activation=act, reduce_range=rr)
        y = layer(x)
        ref = fn(x @ w.T + bias)
        # each product carries the rounding of x (scale_x / 2) and of w (scale_w / 2)
        sx = (max(x.max(), 0) - min(x.min(), 0)) / (127 if layer._seven_bit() else 255)
        bound = (sx / 2 * np.abs(w).sum(1) + layer.weight_scale / 2 * np.abs(x).sum(1)[:, None]
                 + sx * layer.weight_scale * 64 / 4)
        assert np.all(np.abs(y - ref) <= bound + 1e-5)
        again = pickle.loads(pickle.dumps(layer))
        np.testing.assert_array_equal(again(x), y)
    assert layer(x[None]).shape == (1, 20, 48)
    with pytest.raises(ValueError):
        layer(np.ones((2, 63), np.float32))
    with pytest.raises(ValueError):
        QuantizedLinear(w, activation="tanh")


def test_quantized_mlp(rng):
    w1, w2 = rng.standard_normal((32, 16)) * 0.2, rng.standard_normal((4, 32)) * 0.2
    l1, l2 = QuantizedLinear(w1, activation="relu"), QuantizedLinear(w2)
    mlp = QuantizedMLP([l1, l2])
    x = rng.standard_normal((10, 16)).astype(np.float32)
    y = mlp(x)
    ref = np.maximum(x @ w1.T, 0) @ w2.T
    assert y.shape == (10, 4)
    # two layers of 8-bit rounding: a few percent of the output range
    assert np.abs(y - ref).max() <= 0.05 * np.abs(ref).max()
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(mlp))(x), y)
    with pytest.raises(ValueError):
        QuantizedMLP([l2, l1])


def test_quantized_linear_of_transposed_and_strided_x(rng):
    """x in Fortran order (brought to rows by the transpose kernels) and with a column stride
    (a numpy copy), both then the fused C pass: the numbers of the C-ordered x."""
    w = rng.standard_normal((40, 70)).astype(np.float32)
    layer = QuantizedLinear(w, rng.standard_normal(40).astype(np.float32), activation="relu")
    x = rng.standard_normal((90, 70)).astype(np.float32)
    want = layer(x)
    np.testing.assert_array_equal(layer(np.asfortranarray(x)), want)
    wide = np.zeros((90, 140), np.float32)
    wide[:, ::2] = x
    np.testing.assert_array_equal(layer(wide[:, ::2]), want)
