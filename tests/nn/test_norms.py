"""layer_norm / rms_norm forward and backward against float64 references, at every ISA level.

Tolerances: a float32 row of n elements is summed in lane partials (relative error of the sums
~ n * eps32 / lanes, at most ~1e-6 for the sizes here) and every output is a handful of float32
operations on values of order 1, so outputs of order 1 agree with float64 within 2e-5 relative
to the largest magnitude; float64 within 1e-12. Gradients of the weight are sums over the rows:
their bound grows with the row count (rows * eps * max|g * xhat|)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ml_dtypes
import pytpp


def eps_of(dtype):
    return float(ml_dtypes.finfo(dtype).eps)

BF16 = np.dtype(ml_dtypes.bfloat16)
TOL = {np.float32: 2e-5, np.float64: 1e-12}


def ref_layer(x, w, b, eps, k):
    x = x.astype(np.float64)
    axes = tuple(range(x.ndim - k, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    r = 1.0 / np.sqrt(var + eps)
    y = (x - mu) * r
    if w is not None:
        y = y * w.astype(np.float64)
    if b is not None:
        y = y + b.astype(np.float64)
    return y, mu.reshape(x.shape[:x.ndim - k]), r.reshape(x.shape[:x.ndim - k])


def ref_rms(x, w, eps, k):
    x = x.astype(np.float64)
    axes = tuple(range(x.ndim - k, x.ndim))
    r = 1.0 / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
    y = x * r
    if w is not None:
        y = y * w.astype(np.float64)
    return y, r.reshape(x.shape[:x.ndim - k])


def ref_layer_backward(g, x, w, eps, k, rms=False):
    """float64 gradients of layer_norm / rms_norm by their closed forms."""
    g, x = g.astype(np.float64), x.astype(np.float64)
    axes = tuple(range(x.ndim - k, x.ndim))
    lead = tuple(range(x.ndim - k))
    if rms:
        mu = 0.0
        r = 1.0 / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
    else:
        mu = x.mean(axis=axes, keepdims=True)
        r = 1.0 / np.sqrt(((x - mu) ** 2).mean(axis=axes, keepdims=True) + eps)
    h = (x - mu) * r
    dy = g * (w.astype(np.float64) if w is not None else 1.0)
    ma = 0.0 if rms else dy.mean(axis=axes, keepdims=True)
    gx = r * (dy - ma - h * (dy * h).mean(axis=axes, keepdims=True))
    gw = (g * h).sum(axis=lead) if w is not None else None
    gb = g.sum(axis=lead) if w is not None and not rms else None
    return gx, gw, gb


def close(a, b, dtype, scale=1.0):
    a = np.asarray(a, np.float64)
    bound = TOL[dtype] * max(1.0, np.abs(b).max(initial=0.0)) * scale
    np.testing.assert_allclose(a, b, rtol=0, atol=bound)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 7, 17, 33, 63, 768])
@pytest.mark.parametrize("affine", [False, True])
def test_layer_norm_forward_backward(isa, threads, rng, dtype, n, affine):
    x = rng.standard_normal((19, n)).astype(dtype) * 3 + 1
    w = rng.standard_normal(n).astype(dtype) if affine else None
    b = rng.standard_normal(n).astype(dtype) if affine else None
    y, mean, rstd = pytpp.nn.layer_norm(x, n, w, b, eps=1e-5, return_stats=True)
    ry, rmu, rr = ref_layer(x, w, b, 1e-5, 1)
    assert y.dtype == dtype and mean.dtype == dtype and rstd.dtype == dtype
    assert mean.shape == rstd.shape == (19,)
    close(y, ry, dtype)
    close(mean, rmu, dtype)
    close(rstd, rr, dtype, scale=10)
    g = rng.standard_normal(x.shape).astype(dtype)
    gx, gw, gb = pytpp.nn.layer_norm_backward(g, x, mean, rstd, w)
    rgx, rgw, rgb = ref_layer_backward(g, x, w, 1e-5, 1)
    close(gx, rgx, dtype, scale=10)
    if affine:
        close(gw, rgw, dtype, scale=20)
        close(gb, rgb, dtype, scale=20)
    else:
        assert gw is None and gb is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 7, 33, 4096])
def test_rms_norm_forward_backward(isa, threads, rng, dtype, n):
    x = rng.standard_normal((9, n)).astype(dtype)
    w = rng.standard_normal(n).astype(dtype)
    y, rstd = pytpp.nn.rms_norm(x, n, w, return_stats=True)
    ry, rr = ref_rms(x, w, 1e-6, 1)
    close(y, ry, dtype)
    close(rstd, rr, dtype, scale=10)
    g = rng.standard_normal(x.shape).astype(dtype)
    gx, gw = pytpp.nn.rms_norm_backward(g, x, rstd, w)
    rgx, rgw, _ = ref_layer_backward(g, x, w, 1e-6, 1, rms=True)
    close(gx, rgx, dtype, scale=10)
    close(gw, rgw, dtype, scale=20)
    assert pytpp.nn.rms_norm_backward(g, x, rstd)[1] is None


def test_layer_norm_large_offset_keeps_digits(isa, rng):
    """offset 1e4, spread 1e-2 in float32: the mean within a float32 step of the float64 mean of
    the same data, the output within 1e-3 relative of the float64 result."""
    x = (1e4 + 1e-2 * rng.standard_normal((64, 768))).astype(np.float32)
    y, mean, rstd = pytpp.nn.layer_norm(x, 768, return_stats=True)
    ry, rmu, rr = ref_layer(x, None, None, 1e-5, 1)
    step = np.spacing(np.float32(1e4))
    assert np.abs(mean - rmu).max() <= step
    np.testing.assert_allclose(rstd, rr, rtol=1e-3)
    # y follows from (x - mean) * rstd: a mean off by one rounding shifts it by step * rstd
    np.testing.assert_allclose(y, ry, rtol=0, atol=1e-3 * np.abs(ry).max() + step * rr.max())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("lead", [1, 3, 16, 40])
def test_layer_norm_rows_whose_start_is_far_from_the_mean(isa, rng, dtype, lead):
    """The statistics are summed around the mean of a row's first vector; rows whose first
    `lead` elements sit 1e4 standard deviations away (all of the first vector, or part of it)
    keep the accuracy of two passes around the mean: y and rstd within 8 float32 / 16 float64
    rounding steps (relative), where sums around the far shift alone are off by 12-500 float32 /
    38-240 float64 steps (AVX2 / reference level)."""
    x = rng.standard_normal((24, 257)).astype(dtype)
    x[::2, :lead] += dtype(1e4)
    x[1::4, :lead] -= dtype(5e3)
    y, mean, rstd = pytpp.nn.layer_norm(x, 257, return_stats=True)
    ry, rmu, rr = ref_layer(x, None, None, 1e-5, 1)
    steps = {np.float32: 8, np.float64: 16}[dtype] * eps_of(dtype)
    np.testing.assert_allclose(y, ry, rtol=0, atol=steps * np.abs(ry).max())
    np.testing.assert_allclose(rstd, rr, rtol=steps)
    close(mean, rmu, dtype)


def test_constant_row_gives_bias(isa):
    x = np.full((3, 40), 7.25, np.float32)
    b = np.arange(40, dtype=np.float32)
    y = pytpp.nn.layer_norm(x, 40, np.ones(40, np.float32), b)
    np.testing.assert_array_equal(y, np.broadcast_to(b, x.shape))


@pytest.mark.parametrize("dtype", [BF16, np.float16])
def test_low_precision_inputs_compute_in_float32(isa, rng, dtype):
    x = rng.standard_normal((5, 64)).astype(dtype)
    y, mean, rstd = pytpp.nn.layer_norm(x, 64, return_stats=True)
    assert y.dtype == dtype and mean.dtype == np.float32
    ry, _, _ = ref_layer(x.astype(np.float32), None, None, 1e-5, 1)
    np.testing.assert_allclose(y.astype(np.float64), ry, rtol=0,
                               atol=eps_of(dtype) * np.abs(ry).max())


def test_multi_dim_normalized_shape_and_views(isa, rng):
    base = rng.standard_normal((6, 5, 8, 3))
    x = base[::2, :, :, 1]                          # non-contiguous (3, 5, 8)
    w = rng.standard_normal((5, 8))
    y, mean, rstd = pytpp.nn.layer_norm(x, (5, 8), w, return_stats=True)
    ry, rmu, rr = ref_layer(x, w, None, 1e-5, 2)
    close(y, ry, np.float64)
    assert mean.shape == (3,)
    xf = np.asfortranarray(rng.standard_normal((7, 9)))
    close(pytpp.nn.rms_norm(xf, 9), ref_rms(xf, None, 1e-6, 1)[0], np.float64)


@settings(max_examples=40, deadline=None)
@given(m=st.integers(0, 20), n=st.integers(1, 70), k2=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_hypothesis_shapes(m, n, k2, seed):
    rng = np.random.default_rng(seed)
    shape = (m, 2, n) if k2 else (m, n)
    x = rng.standard_normal(shape).astype(np.float32)
    norm_shape = shape[1:] if k2 else (n,)
    y, mean, rstd = pytpp.nn.layer_norm(x, norm_shape, return_stats=True)
    close(y, ref_layer(x, None, None, 1e-5, len(norm_shape))[0], np.float32)
    gx, _, _ = pytpp.nn.layer_norm_backward(np.ones_like(x), x, mean, rstd)
    assert gx.shape == x.shape


def test_zero_size(isa):
    y, mean, rstd = pytpp.nn.layer_norm(np.zeros((0, 4), np.float32), 4, return_stats=True)
    assert y.shape == (0, 4) and mean.shape == (0,)
    y, rstd = pytpp.nn.rms_norm(np.zeros((3, 0)), 0, return_stats=True)
    assert y.shape == (3, 0) and np.isnan(rstd).all()
    gx, gw, gb = pytpp.nn.layer_norm_backward(np.zeros((0, 4)), np.zeros((0, 4)), np.zeros(0),
                                              np.zeros(0), np.ones(4))
    assert gx.shape == (0, 4) and (gw == 0).all() and (gb == 0).all()


@pytest.mark.parametrize("out_dtype", [np.float32, BF16, np.float64])
def test_out(isa, rng, out_dtype):
    x = rng.standard_normal((4, 33)).astype(np.float32)
    out = np.full(x.shape, np.nan, out_dtype)
    res = pytpp.nn.layer_norm(x, 33, out=out)
    assert res is out
    ry = ref_layer(x, None, None, 1e-5, 1)[0]
    np.testing.assert_allclose(out.astype(np.float64), ry, rtol=0,
                               atol=max(2e-5, eps_of(out_dtype)) * 4)


def test_out_in_place_and_overlapping(rng):
    x = rng.standard_normal((6, 16))
    expect = ref_layer(x, None, None, 1e-5, 1)[0]
    z = x.copy()
    pytpp.nn.layer_norm(z, 16, out=z)                 # in place: rows read before written
    close(z, expect, np.float64)
    big = np.concatenate([x.ravel(), np.zeros(16)])
    src, dst = big[:96].reshape(6, 16), big[16:].reshape(6, 16)
    pytpp.nn.layer_norm(src, 16, out=dst)             # shifted by one row: numpy's answer
    close(dst, expect, np.float64)


@pytest.mark.parametrize("call, match", [
    (lambda x: pytpp.nn.layer_norm(x, 5), "normalized_shape"),
    (lambda x: pytpp.nn.layer_norm(x, (3, 4, 4)), "normalized_shape"),
    (lambda x: pytpp.nn.layer_norm(x, 4, np.ones(5)), "weight has shape"),
    (lambda x: pytpp.nn.layer_norm(x, 4, None, np.ones(3)), "bias has shape"),
    (lambda x: pytpp.nn.layer_norm(x, 4, eps=-1.0), "eps"),
    (lambda x: pytpp.nn.rms_norm(x, 4, eps=float("nan")), "eps"),
    (lambda x: pytpp.nn.layer_norm(x, 4, out=np.zeros((3, 5))), "out has shape"),
    (lambda x: pytpp.nn.layer_norm_backward(x, x, np.zeros(4), np.ones(3)), "mean has shape"),
    (lambda x: pytpp.nn.layer_norm_backward(x[:2], x, np.zeros(3), np.ones(3)), "grad_out"),
    (lambda x: pytpp.nn.rms_norm_backward(x, x, np.ones((3, 4))), "rstd has shape"),
])
def test_bad_input_raises_before_writing(call, match):
    x = np.ones((3, 4))
    with pytest.raises(ValueError, match=match):
        call(x)


def test_errors_name_function_and_leave_out_untouched():
    out = np.full((3, 4), 5.0)
    with pytest.raises(ValueError, match=r"pytpp\.nn\.layer_norm: weight"):
        pytpp.nn.layer_norm(np.ones((3, 4)), 4, np.ones(2), out=out)
    assert (out == 5.0).all()
    with pytest.raises(TypeError, match="pytpp.nn.rms_norm"):
        pytpp.nn.rms_norm(np.ones((2, 2)), "x")
    with pytest.raises(TypeError, match="dtype complex"):
        pytpp.nn.layer_norm(np.ones((2, 2), complex), 2)


def test_matches_torch_autograd(rng):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((8, 96))
    w, b = rng.standard_normal(96), rng.standard_normal(96)
    g = rng.standard_normal(x.shape)
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    torch.nn.functional.layer_norm(xt, (96,), wt, bt).backward(torch.tensor(g))
    y, mean, rstd = pytpp.nn.layer_norm(x, 96, w, b, return_stats=True)
    gx, gw, gb = pytpp.nn.layer_norm_backward(g, x, mean, rstd, w)
    for ours, theirs in ((gx, xt.grad), (gw, wt.grad), (gb, bt.grad)):
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("rms", [False, True])
def test_backward_out_and_in_place(rng, rms):
    x = rng.standard_normal((5, 24)).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    w = rng.standard_normal(24).astype(np.float32)
    if rms:
        _, rstd = pytpp.nn.rms_norm(x, 24, w, return_stats=True)
        expect = pytpp.nn.rms_norm_backward(g, x, rstd, w)[0]
        call = lambda out, grad: pytpp.nn.rms_norm_backward(grad, x, rstd, w, out=out)  # noqa: E731
    else:
        _, mean, rstd = pytpp.nn.layer_norm(x, 24, w, return_stats=True)
        expect = pytpp.nn.layer_norm_backward(g, x, mean, rstd, w)[0]
        call = lambda out, grad: pytpp.nn.layer_norm_backward(grad, x, mean, rstd, w, out=out)  # noqa: E731
    out = np.empty(x.shape, np.float64)
    assert call(out, g)[0] is out
    np.testing.assert_allclose(out, expect, rtol=1e-6)
    gg = g.copy()
    assert call(gg, gg)[0] is gg                      # grad_out overwritten by grad_x
    np.testing.assert_array_equal(gg, expect)
    with pytest.raises(ValueError, match="out has shape"):
        call(np.empty((2, 2), np.float32), g)


@pytest.mark.parametrize("x_bf16,y_bf16", [(True, True), (True, False), (False, True)])
def test_bfloat16_rows_streamed_bit_for_bit(isa, x_bf16, y_bf16, rng):
    """Outputs of 16 MB and more are written by streaming stores after a scalar peel up to the
    vector boundary: odd rows (1023 elements) start at every alignment, and an output view one
    element off its buffer's start; the bits stay those of the float32 call rounded once."""
    m, n = 8200, 1023
    x32 = (rng.standard_normal((m, n)) * 3 + 1).astype(BF16).astype(np.float32)
    w = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    expect = pytpp.nn.layer_norm(x32, n, w, b)
    x = x32.astype(BF16) if x_bf16 else x32
    ydt = BF16 if y_bf16 else np.float32
    out = np.empty(m * n + 1, ydt)[1:].reshape(m, n)
    pytpp.nn.layer_norm(x, n, w, b, out=out)
    if y_bf16:
        np.testing.assert_array_equal(out.view(np.uint16), expect.astype(BF16).view(np.uint16))
    else:
        np.testing.assert_array_equal(out, expect)


@pytest.mark.parametrize("rms", [False, True])
def test_bfloat16_out_with_nan_inf_and_overflow(isa, rng, rms):
    """bfloat16 outputs round without the NaN case only in rows that cannot produce a NaN: rows
    holding a NaN or an infinity, weights or biases holding one, a zero-variance row with eps=0
    (rstd infinite) and rows whose outputs overflow to infinity keep the bits of the float32 call
    rounded by ml_dtypes: infinities and numbers exactly, NaNs as quiet NaNs (the sign of a NaN
    made from two NaN operands is the compiler's choice of operand order, IEEE leaves it open)."""
    m, n = 12, 40
    x = rng.standard_normal((m, n)).astype(np.float32)
    x[1, 3] = np.nan
    x[1, 4:6] = np.array([0x7FFFFFFF, 0xFF800001], np.uint32).view(np.float32)  # NaN payloads
    x[2, 5] = np.inf
    x[3, :] = -np.inf
    x[4, :] = 2.5                                       # var 0: rstd = inf with eps=0
    x[5, ::2] = 3e38                                    # overflow in the statistics
    w = np.where(rng.standard_normal(n) > 0, 1.5e38, -1.5e38).astype(np.float32)  # |y| > 1: inf
    bias = rng.standard_normal(n).astype(np.float32)
    for ww, bb in ((w, bias), (np.where(np.arange(n) == 7, np.nan, w).astype(np.float32), bias),
                   (w, np.where(np.arange(n) == 9, -np.inf, bias).astype(np.float32)),
                   (None, None)):
        f = (lambda xx, **kw: pytpp.nn.rms_norm(xx, n, ww, eps=0.0, **kw)) if rms else \
            (lambda xx, **kw: pytpp.nn.layer_norm(xx, n, ww, bb, eps=0.0, **kw))
        with np.errstate(all="ignore"):
            y32 = f(x)
            out = np.empty(x.shape, BF16)
            f(x, out=out)
        got, want, nan = out.view(np.uint16), y32.astype(BF16).view(np.uint16), np.isnan(y32)
        np.testing.assert_array_equal(np.isnan(out.astype(np.float32)), nan)
        assert ((got[nan] & 0x7fc0) == 0x7fc0).all()
        np.testing.assert_array_equal(got[~nan], want[~nan])
        assert np.isinf(out.astype(np.float32)).any() or ww is None


def test_bfloat16_rows_match_float32_bit_for_bit(isa, threads, rng):
    """bfloat16 in and/or out runs the float32 row kernel on widened rows and rounds once (RNE):
    the same bits as the float32 call on the widened array, rounded by ml_dtypes."""
    x16 = rng.standard_normal((37, 200)).astype(BF16)
    x32 = x16.astype(np.float32)
    w = rng.standard_normal(200).astype(np.float32)
    y32, mean32, rstd32 = pytpp.nn.layer_norm(x32, 200, w, return_stats=True)
    y16, mean16, rstd16 = pytpp.nn.layer_norm(x16, 200, w, return_stats=True)
    assert y16.dtype == BF16 and mean16.dtype == np.float32
    np.testing.assert_array_equal(y16.view(np.uint16), y32.astype(BF16).view(np.uint16))
    np.testing.assert_array_equal(mean16, mean32)
    np.testing.assert_array_equal(rstd16, rstd32)
    out = np.empty(x32.shape, BF16)                  # float32 in, bfloat16 out
    pytpp.nn.layer_norm(x32, 200, w, out=out)
    np.testing.assert_array_equal(out.view(np.uint16), y32.astype(BF16).view(np.uint16))
    out32 = np.empty(x32.shape, np.float32)          # bfloat16 in, float32 out
    pytpp.nn.layer_norm(x16, 200, w, out=out32)
    np.testing.assert_array_equal(out32, y32)
    g16 = rng.standard_normal(x16.shape).astype(BF16)
    gx32, gw32, gb32 = pytpp.nn.layer_norm_backward(g16.astype(np.float32), x32, mean32, rstd32, w)
    gx16, gw16, gb16 = pytpp.nn.layer_norm_backward(g16, x16, mean16, rstd16, w)
    assert gx16.dtype == BF16
    np.testing.assert_array_equal(gx16.view(np.uint16), gx32.astype(BF16).view(np.uint16))
    np.testing.assert_allclose(gw16, gw32, rtol=1e-6, atol=1e-5)   # partial sums per thread
    y, r32 = pytpp.nn.rms_norm(x32, 200, w, return_stats=True)
    y16, r16 = pytpp.nn.rms_norm(x16, 200, w, return_stats=True)
    np.testing.assert_array_equal(y16.view(np.uint16), y.astype(BF16).view(np.uint16))
    gx = pytpp.nn.rms_norm_backward(g16.astype(np.float32), x32, r32, w)[0]
    np.testing.assert_array_equal(pytpp.nn.rms_norm_backward(g16, x16, r16, w)[0].view(np.uint16),
                                  gx.astype(BF16).view(np.uint16))


@pytest.mark.parametrize("n", [1, 7, 15, 16, 17, 31, 33, 63, 64, 100])
@pytest.mark.parametrize("affine", ["none", "weight", "bias", "both"])
def test_bfloat16_rows_in_pairs_bit_for_bit(isa, rng, n, affine):
    """bf16 rows in and out of 8 or more rows run in pairs of vectors with the weight and bias
    copied into pair order (whole blocks only; the head and tail elements keep their own):
    every width around the block size, each affine form, the same bits as the float32 call
    rounded once, for layer_norm and rms_norm, with x read in place from a view whose rows start
    at odd element offsets, and written into a non-contiguous out."""
    m = 11
    x16 = (rng.standard_normal((m, n + 1)) * 2 + 0.5).astype(BF16)[:, 1:]
    x32 = x16.astype(np.float32)
    w = rng.standard_normal(n).astype(np.float32) if affine in ("weight", "both") else None
    b = rng.standard_normal(n).astype(np.float32) if affine in ("bias", "both") else None
    for fn, args in ((pytpp.nn.layer_norm, (w, b)), (pytpp.nn.rms_norm, (w,))):
        expect = fn(x32, n, *args).astype(BF16).view(np.uint16)
        np.testing.assert_array_equal(fn(x16, n, *args).view(np.uint16), expect)
        out = np.zeros((m, n + 3), BF16)[:, 3:]
        fn(np.ascontiguousarray(x16), n, *args, out=out)
        np.testing.assert_array_equal(out.view(np.uint16), expect)
