"""The (De)Quantize TPP kernels behind pytpp.quant.quantize / dequantize and
tpp.unary("quantize" / "dequantize"): bit for bit against numpy's float64 round-half-even
reference at every ISA level this CPU runs, on 1 and 2 threads, for every input dtype, per tensor
and per channel along each axis, on odd sizes, ties and near-ties, strided / Fortran-ordered /
transposed views and empty arrays; the handles' checks."""
import pickle

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pytpp
from pytpp.quant import dequantize, quantize

U8, I8 = np.dtype(np.uint8), np.dtype(np.int8)
BF16 = np.dtype(ml_dtypes.bfloat16)
FLOAT_INPUTS = (np.float64, np.float32, BF16, np.float16, np.int32)


def params_shape(ndim, axis):
    shape = [1] * ndim
    if axis is not None:
        shape[axis] = -1
    return shape


def ref_quantize(x, scale, zp, dt, axis=None):
    """clip(rint(x / scale) + zp) with the quotient in float64, the definition."""
    info = np.iinfo(dt)
    shape = params_shape(x.ndim, axis)
    s = np.asarray(scale, np.float64).reshape(shape)
    z = np.asarray(zp, np.int64).reshape(shape)
    return np.clip(np.rint(x.astype(np.float64) / s) + z, info.min, info.max).astype(dt)


def ref_dequantize(q, scale, zp, dt, axis=None):
    """(q - zp) in int64, cast, times the scale in the compute dtype (float32 for bfloat16)."""
    cdt = np.float64 if np.dtype(dt) == np.float64 else np.float32
    shape = params_shape(q.ndim, axis)
    s = np.asarray(scale, np.float64).reshape(shape).astype(cdt)
    z = np.asarray(zp, np.int64).reshape(shape)
    return ((q.astype(np.int64) - z).astype(cdt) * s).astype(dt)


def tie_data(rng, shape, scale):
    """Values at and one ulp around the half-integers of x / scale, plus plain ones."""
    n = int(np.prod(shape))
    k = rng.integers(-300, 300, n)
    ties = (k + 0.5) * scale
    pick = rng.integers(0, 4, n)
    x = np.where(pick == 0, ties, np.where(pick == 1, np.nextafter(ties, np.inf),
                 np.where(pick == 2, np.nextafter(ties, -np.inf), rng.standard_normal(n) * 40)))
    return x.reshape(shape)


def params(rng, n, dt, per_channel):
    info = np.iinfo(dt)
    if not per_channel:
        return float(rng.uniform(0.05, 0.7)), int(rng.integers(info.min, info.max + 1))
    return rng.uniform(0.05, 0.7, n), rng.integers(info.min, info.max + 1, n)


def as_dtype(x, dt):
    if np.dtype(dt).kind == "i":
        return np.clip(np.rint(x), -2 ** 31, 2 ** 31 - 1).astype(dt)
    return x.astype(dt)


@pytest.mark.parametrize("xdt", FLOAT_INPUTS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("qdt", [U8, I8], ids=["u8", "s8"])
@pytest.mark.parametrize("shape", [(1,), (7,), (17, 33), (3, 5, 63), (300, 257)])
def test_quantize_every_level_dtype_and_axis(isa, threads, rng, xdt, qdt, shape):
    """(300, 257) runs on both threads (beyond the one-thread size) and in chunks."""
    for axis in (None,) + tuple(range(-len(shape), 0)):
        scale, zp = params(rng, shape[axis] if axis is not None else 0, qdt, axis is not None)
        x = as_dtype(tie_data(rng, shape, np.min(scale)), xdt)
        np.testing.assert_array_equal(quantize(x, scale, zp, qdt, axis=axis),
                                      ref_quantize(x, scale, zp, qdt, axis),
                                      err_msg=f"axis={axis}")


@pytest.mark.parametrize("xdt", [np.float64, np.float32, BF16], ids=lambda d: np.dtype(d).name)
def test_quantize_of_nothing_but_ties(isa, xdt):
    """Every value a tie: the float32 kernel hands every vector to the float64 one."""
    x = (np.arange(-600, 601) + 0.5).astype(xdt)
    for scale, zp in ((1.0, 3), (0.5, 128), (0.25, 0)):
        xs = (x.astype(np.float64) * scale).astype(xdt)
        np.testing.assert_array_equal(quantize(xs, scale, zp), ref_quantize(xs, scale, zp, U8))


@pytest.mark.parametrize("scale", [1e-38, 3e-30, 1e30, 5e37, 3e38, 1e300, 1e-300])
def test_quantize_extreme_scales(isa, rng, scale):
    """Scales whose reciprocal is no normal float32 (the float32 form steps aside) and near it."""
    x = np.concatenate([rng.standard_normal(70) * scale * 100,
                        np.array([3.4e38, -3.4e38, 1e-40, 0.0, 0.5 * scale, 1.5 * scale])])
    for dt in (np.float32, np.float64):
        with np.errstate(over="ignore"):      # beyond float32: +-inf, which saturate
            xs = x.astype(dt)
            want = ref_quantize(xs, scale, 7, I8)
        np.testing.assert_array_equal(quantize(xs, scale, 7, I8), want)


def test_quantize_specials(isa):
    x = np.array([np.inf, -np.inf, 1e30, -1e30, 3e38, 0.0, -0.0, 1e-45, 2.5, -2.5] * 5,
                 np.float32)
    for qdt in (U8, I8):
        np.testing.assert_array_equal(quantize(x, 1.0, 0, qdt), ref_quantize(x, 1.0, 0, qdt))
        np.testing.assert_array_equal(quantize(x, 1e-30, 0, qdt),
                                      ref_quantize(x, 1e-30, 0, qdt))
    with pytest.raises(ValueError, match="NaN"):
        quantize(np.r_[x, np.nan].astype(np.float32), 1.0, 0)


@pytest.mark.parametrize("xdt", [np.float64, np.float32, BF16], ids=lambda d: np.dtype(d).name)
def test_quantize_of_views(isa, rng, xdt):
    base = as_dtype(tie_data(rng, (40, 66), 0.3), xdt)
    for view in (base[:, 3:40], base[::2, 1::3], base.T, np.asfortranarray(base),
                 base[::-1], base[5:6], base[:, :0]):
        for axis in (None, 0, 1):
            scale, zp = params(rng, view.shape[axis] if axis is not None else 0, U8,
                               axis is not None)
            got = quantize(view, scale, zp, axis=axis)
            assert got.flags.c_contiguous and got.shape == view.shape
            np.testing.assert_array_equal(got, ref_quantize(view, scale, zp, U8, axis))


@pytest.mark.parametrize("qdt", [U8, I8, np.dtype(np.int32)], ids=lambda d: d.name)
@pytest.mark.parametrize("ydt", [np.float32, np.float64, BF16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(1,), (17, 33), (3, 5, 63), (300, 257)])
def test_dequantize_every_level_dtype_and_axis(isa, threads, rng, qdt, ydt, shape):
    info = np.iinfo(qdt)
    q = rng.integers(info.min, info.max, shape, endpoint=True).astype(qdt)
    for axis in (None,) + tuple(range(-len(shape), 0)):
        per = axis is not None
        n = shape[axis] if per else 0
        scale = rng.uniform(0.001, 3.0, n) if per else 0.37
        zp = rng.integers(max(info.min, -2 ** 31 + 1), min(info.max, 2 ** 31 - 1), n) \
            if per else int(info.min // 3)
        got = dequantize(q, scale, zp, axis=axis, dtype=ydt)
        assert got.dtype == ydt
        np.testing.assert_array_equal(got.view(np.uint8),
                                      ref_dequantize(q, scale, zp, ydt, axis).view(np.uint8),
                                      err_msg=f"axis={axis}")


def test_dequantize_of_views(isa, rng):
    base = rng.integers(0, 256, (40, 66)).astype(np.uint8)
    for view in (base[:, 3:40], base[::2, 1::3], base.T, np.asfortranarray(base), base[::-1]):
        np.testing.assert_array_equal(dequantize(view, 0.5, 7),
                                      ref_dequantize(view, 0.5, 7, np.float32))
    assert dequantize(base[:0], 0.5, 7).shape == (0, 66)


@settings(max_examples=40, deadline=None)
@given(m=st.integers(0, 40), n=st.integers(0, 70), pad=st.integers(0, 5),
       channel_axis=st.sampled_from([None, 0, 1]), xdt=st.sampled_from([0, 1, 2]),
       qdt=st.sampled_from([U8, I8]), seed=st.integers(0, 2 ** 32 - 1))
def test_handles_match_the_functions(m, n, pad, channel_axis, xdt, qdt, seed):
    """Handles with leading dimensions: the columns beyond n of out keep their values."""
    rng = np.random.default_rng(seed)
    xdt = (np.float64, np.float32, BF16)[xdt]
    ld = n + pad
    x = as_dtype(tie_data(rng, (max(m, 1), ld), 0.25), xdt)[:m]
    nparam = (m, n)[channel_axis] if channel_axis is not None else 0
    scale, zp = params(rng, nparam, qdt, channel_axis is not None)
    kq = pytpp.tpp.unary("quantize", m, n, xdt, out_dtype=qdt, ldi=ld, ldo=ld,
                         channel_axis=channel_axis)
    q = np.full((m, ld), 77, qdt)
    assert kq(x, scale, zp, q) is q
    np.testing.assert_array_equal(q[:, :n], ref_quantize(x[:, :n], scale, zp, qdt,
                                                         channel_axis))
    assert np.all(q[:, n:] == 77)
    kd = pytpp.tpp.unary("dequantize", m, n, qdt, out_dtype=xdt, ldi=ld, ldo=ld,
                         channel_axis=channel_axis)
    y = np.full((m, ld), 5, xdt)
    kd(q, scale, zp, y)
    np.testing.assert_array_equal(y[:, :n].astype(np.float64),
                                  ref_dequantize(q[:, :n], scale, zp, xdt,
                                                 channel_axis).astype(np.float64))
    assert np.all(y[:, n:].astype(np.float64) == 5)


def test_handle_nan_gives_the_zero_point_and_the_handle_is_cached():
    k = pytpp.tpp.unary("quantize", 1, 20, np.float32, out_dtype=np.int8)
    assert pytpp.tpp.unary("quantize", 1, 20, np.float32, out_dtype=np.int8) is k
    assert isinstance(k, pytpp.tpp.QuantKernel)
    x = np.full((1, 20), np.nan, np.float32)
    x[0, 3] = 10.0
    q = k(x, 2.0, -7, np.empty((1, 20), np.int8))
    assert q[0, 3] == -2 and np.all(np.delete(q[0], 3) == -7)
    back = pickle.loads(pickle.dumps(k))
    np.testing.assert_array_equal(back(x, 2.0, -7, np.empty((1, 20), np.int8)), q)


def test_handle_bad_input_raises_and_leaves_out_alone():
    k = pytpp.tpp.unary("quantize", 2, 3, np.float32, channel_axis=1)
    x = np.ones((2, 3), np.float32)
    out = np.full((2, 3), 9, np.uint8)
    for args, err in [((x, np.ones(2), 0, out), ValueError),        # per-column length
                      ((x, np.ones(3), 300, out), ValueError),      # zero point range
                      ((x, np.r_[1.0, 0.0, 1.0], 0, out), ValueError),
                      ((x, np.ones(3), 0.5, out), ValueError),
                      ((x.astype(np.float64), np.ones(3), 0, out), TypeError),
                      ((x, np.ones(3), 0, out.astype(np.int8)), TypeError),
                      ((x, np.ones(3), 0, out[:1]), ValueError),
                      ((x, np.ones(3), 0, out.T), ValueError)]:
        with pytest.raises(err, match="pytpp.tpp.unary"):
            k(*args)
        assert np.all(out == 9)
    ro = out.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        k(x, np.ones(3), 0, ro)
    with pytest.raises(TypeError, match="out_dtype"):
        pytpp.tpp.unary("quantize", 2, 3, np.float32, out_dtype=np.int16)
    with pytest.raises(TypeError, match="dtype"):
        pytpp.tpp.unary("dequantize", 2, 3, np.float32)
    with pytest.raises(ValueError, match="channel_axis"):
        pytpp.tpp.unary("quantize", 2, 3, np.float32, channel_axis=2)
    with pytest.raises(ValueError, match="ldi"):
        pytpp.tpp.unary("quantize", 2, 3, np.float32, ldi=2)


def test_dequantize_bad_input():
    q = np.zeros((2, 3), np.uint8)
    with pytest.raises(TypeError, match="pytpp.quant.dequantize"):
        dequantize(q.astype(np.int16), 1.0, 0)
    with pytest.raises(TypeError, match="dtype"):
        dequantize(q, 1.0, 0, dtype=np.float16)
    with pytest.raises(ValueError, match="zero_point"):
        dequantize(q, 1.0, -1)
    with pytest.raises(ValueError, match="axis"):
        dequantize(q, 1.0, 0, axis=2)
