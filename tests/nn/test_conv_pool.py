"""Pooling (max, average, adaptive average, and the backward functions) against direct float64
loops and torch. Max pooling and its backward are exact (a max picks an element; the backward
adds gradients that are equal to the inputs' float32 values in an order that cannot round
differently for the integer-valued gradients used); averages are within (k + 2) * eps * sum|x|
of the float64 value."""
import itertools

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pool_reference import (
    backward_ref,
    pool_case,
    same_values,
    taps_ref,
    windows,
    with_special_values,
)

from pytpp.nn import (
    adaptive_avg_pool2d,
    avg_pool2d,
    avg_pool2d_backward,
    max_pool2d,
    max_pool2d_backward,
)

EPS32 = float(np.finfo(np.float32).eps)


def loops_ref(x, k, s, p):
    """(max, avg, argmax positions) by direct loops in float64."""
    N, C, H, W = x.shape
    P = (H + 2 * p[0] - k[0]) // s[0] + 1
    Q = (W + 2 * p[1] - k[1]) // s[1] + 1
    mx, av = np.zeros((N, C, P, Q)), np.zeros((N, C, P, Q))
    arg = {}
    for i, j, cells in windows(H, W, k, s, p):
        for n in range(N):
            for c in range(C):
                vals = [float(x[n, c, h, w]) for h, w in cells]
                t = int(np.argmax(vals))
                mx[n, c, i, j] = vals[t]
                arg[n, c, i, j] = cells[t]
                av[n, c, i, j] = sum(vals) / (k[0] * k[1])
    return mx, av, arg


@settings(max_examples=40, deadline=None)
@given(case=pool_case(), fmt=st.sampled_from(["NCHW", "NHWC"]), seed=st.integers(0, 999))
@example(case=((1, 1, 2, 1), (3, 2), (1, 1), (1, 1)), fmt="NCHW", seed=1)   # sums cancel to 0
def test_pooling_matches_loops(case, fmt, seed):
    shape, k, s, p = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    mx, av, arg = loops_ref(x, k, s, p)
    tf = (lambda a: np.ascontiguousarray(a.transpose(0, 2, 3, 1))) if fmt == "NHWC" else (lambda a: a)
    back = (lambda a: a.transpose(0, 3, 1, 2)) if fmt == "NHWC" else (lambda a: a)
    np.testing.assert_array_equal(back(max_pool2d(tf(x), k, s, p, data_format=fmt)), mx)
    a = back(avg_pool2d(tf(x), k, s, p, data_format=fmt))
    assert np.all(np.abs(a - av) <= (k[0] * k[1] + 2) * EPS32 * np.abs(x).max())
    g = rng.integers(-4, 5, mx.shape).astype(np.float32)
    gmx = np.zeros(x.shape)
    for (n, c, i, j), (h, w) in arg.items():
        gmx[n, c, h, w] += g[n, c, i, j]
    np.testing.assert_array_equal(
        back(max_pool2d_backward(tf(g), tf(x), k, s, p, data_format=fmt)), gmx)
    gav, gmag = np.zeros(x.shape), np.zeros(x.shape)
    H, W = x.shape[2:]
    for i, j, cells in windows(H, W, k, s, p):
        for h, w in cells:
            gav[:, :, h, w] += g[:, :, i, j] / (k[0] * k[1])
            gmag[:, :, h, w] += abs(g[:, :, i, j]) / (k[0] * k[1])
    ga = back(avg_pool2d_backward(tf(g), tf(x), k, s, p, data_format=fmt))
    # float32 sums of g / (kh kw): the error scales with the terms, not with their sum (which
    # may cancel to 0 exactly)
    assert np.all(np.abs(ga - gav) <= 16 * EPS32 * gmag.max() + 1e-30)


@pytest.mark.parametrize("H,W,out", [(7, 7, 1), (9, 13, (4, 5)), (5, 3, (7, 2)), (6, 6, 3)])
def test_adaptive_avg_pool_bins(H, W, out):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, H, W)).astype(np.float32)
    OH, OW = (out, out) if np.isscalar(out) else out
    ref = np.zeros((2, 3, OH, OW))
    for i in range(OH):
        for j in range(OW):
            h0, h1 = i * H // OH, -(-(i + 1) * H // OH)
            w0, w1 = j * W // OW, -(-(j + 1) * W // OW)
            ref[:, :, i, j] = x[:, :, h0:h1, w0:w1].astype(np.float64).mean(axis=(2, 3))
    y = adaptive_avg_pool2d(x, out)
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6)
    yh = adaptive_avg_pool2d(np.ascontiguousarray(x.transpose(0, 2, 3, 1)), out, data_format="NHWC")
    np.testing.assert_allclose(yh.transpose(0, 3, 1, 2), ref, rtol=1e-6, atol=1e-6)


def test_pooling_matches_torch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 8, 17, 15)).astype(np.float32)
    tx = torch.from_numpy(x).requires_grad_(True)
    for k, s, p in [(3, 2, 1), (2, None, 0), ((3, 2), (1, 2), (1, 0))]:
        ty = F.max_pool2d(tx, k, s, p)
        np.testing.assert_array_equal(max_pool2d(x, k, s, p), ty.detach().numpy())
        g = rng.standard_normal(ty.shape).astype(np.float32)
        (gx,) = torch.autograd.grad(ty, tx, torch.from_numpy(g))
        np.testing.assert_allclose(max_pool2d_backward(g, x, k, s, p), gx.numpy(), rtol=1e-6,
                                   atol=1e-6)
        ta = F.avg_pool2d(tx, k, s, p)
        np.testing.assert_allclose(avg_pool2d(x, k, s, p), ta.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
        (ga,) = torch.autograd.grad(ta, tx, torch.from_numpy(g))
        np.testing.assert_allclose(avg_pool2d_backward(g, x, k, s, p), ga.numpy(), rtol=1e-5,
                                   atol=1e-6)
    np.testing.assert_allclose(adaptive_avg_pool2d(x, (5, 4)),
                               F.adaptive_avg_pool2d(tx, (5, 4)).detach().numpy(), rtol=1e-5,
                               atol=1e-6)


def test_padding_never_wins_the_max():
    x = -np.ones((1, 1, 3, 3), np.float32)
    np.testing.assert_array_equal(max_pool2d(x, 3, 1, 1), -np.ones((1, 1, 3, 3)))


@pytest.mark.parametrize("kw,exc,text", [
    ({"kernel_size": 0}, ValueError, "kernel_size"),
    ({"kernel_size": 2, "stride": 0}, ValueError, "stride"),
    ({"kernel_size": 2, "padding": 2}, ValueError, "half"),
    ({"kernel_size": 2, "padding": -1}, ValueError, "padding"),
    ({"kernel_size": 9}, ValueError, "larger"),
    ({"kernel_size": 2, "data_format": "CHW"}, ValueError, "data_format"),
])
def test_pool_bad_arguments(kw, exc, text):
    x = np.ones((1, 1, 4, 4), np.float32)
    for f in (max_pool2d, avg_pool2d):
        with pytest.raises(exc, match=text):
            f(x, **kw)
    with pytest.raises(ValueError, match="grad_out"):
        max_pool2d_backward(np.ones((1, 1, 3, 3), np.float32), x, 2)


@settings(max_examples=60, deadline=None)
@given(case=pool_case(), fmt=st.sampled_from(["NCHW", "NHWC"]),
       dtype=st.sampled_from([np.float32, np.float64]), layout=st.sampled_from(["c", "view", "f"]),
       C=st.sampled_from([1, 3, 8, 17, 64]), seed=st.integers(0, 999))
def test_pooling_special_values_and_layouts(case, fmt, dtype, layout, C, seed):
    """NaN, +-0, +-inf, float64, strided and Fortran-order input: the C kernels give the values
    of the tap-by-tap reference at every ISA level, threads or not."""
    import pytpp
    shape, k, s, p = case
    shape = (shape[0], C) + shape[2:]
    rng = np.random.default_rng(seed)
    x = with_special_values(rng, shape, dtype, [(0.05, np.nan), (0.15, 0.0), (0.25, -0.0),
                                                (0.28, -np.inf), (0.30, np.inf)])
    xi = x if fmt == "NCHW" else x.transpose(0, 2, 3, 1)
    if layout == "c":
        xi = np.ascontiguousarray(xi)
    elif layout == "f":
        xi = np.asfortranarray(xi)
    old = pytpp.get_num_threads()
    for op, f in (("max", max_pool2d), ("avg", avg_pool2d)):
        ref = taps_ref(x, k, s, p, op)
        for level, nt in itertools.product(pytpp.available_isas(), (1, 2)):
            pytpp.set_num_threads(nt)
            try:
                with pytpp.use_isa(level):      # every level's kernels, same values
                    y = f(xi, k, s, p, data_format=fmt)
            finally:
                pytpp.set_num_threads(old)
            assert y.dtype == dtype and y.flags.c_contiguous
            assert same_values(y if fmt == "NCHW" else y.transpose(0, 3, 1, 2), ref), level


def test_pooling_low_precision_and_big_rows():
    """bfloat16 is pooled in float32 and rounded back (max: exactly x's elements); a row long
    enough for threads and vector loops."""
    import ml_dtypes
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 64, 37, 41)).astype(np.float32)
    xb = x.astype(ml_dtypes.bfloat16)
    yb = max_pool2d(xb, 3, 2, 1)
    assert yb.dtype == xb.dtype
    assert same_values(yb, taps_ref(xb.astype(np.float32), (3, 3), (2, 2), (1, 1), "max"))
    for fmt in ("NCHW", "NHWC"):
        xi = x if fmt == "NCHW" else np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        for op, f in (("max", max_pool2d), ("avg", avg_pool2d)):
            y = f(xi, 3, 2, 1, data_format=fmt)
            y = y if fmt == "NCHW" else y.transpose(0, 3, 1, 2)
            assert same_values(y, taps_ref(x, (3, 3), (2, 2), (1, 1), op))


@settings(max_examples=40, deadline=None)
@given(case=pool_case(), fmt=st.sampled_from(["NCHW", "NHWC"]),
       dtype=st.sampled_from([np.float32, np.float64]), C=st.sampled_from([1, 3, 17, 70]),
       seed=st.integers(0, 999))
def test_pooling_backward_special_values(case, fmt, dtype, C, seed):
    """Ties (zeros, as after a ReLU), NaN and -inf windows: the C backward gives torch's element
    at every ISA level, one thread or two; integer gradients make the max sums exact, the
    average within 4 eps of its terms."""
    import pytpp
    shape, k, s, p = case
    shape = (shape[0], C) + shape[2:]
    rng = np.random.default_rng(seed)
    x = with_special_values(rng, shape, dtype, [(0.05, np.nan), (0.35, 0.0), (0.45, -np.inf)])
    P = (shape[2] + 2 * p[0] - k[0]) // s[0] + 1
    Q = (shape[3] + 2 * p[1] - k[1]) // s[1] + 1
    g = rng.integers(-4, 5, (shape[0], C, P, Q)).astype(dtype)
    tf = (lambda a: np.ascontiguousarray(a.transpose(0, 2, 3, 1))) if fmt == "NHWC" else (lambda a: a)
    back = (lambda a: a.transpose(0, 3, 1, 2)) if fmt == "NHWC" else (lambda a: a)
    old = pytpp.get_num_threads()
    for op, f in (("max", max_pool2d_backward), ("avg", avg_pool2d_backward)):
        ref = backward_ref(g, x, k, s, p, op)
        for level, nt in itertools.product(pytpp.available_isas(), (1, 2)):
            pytpp.set_num_threads(nt)
            try:
                with pytpp.use_isa(level):
                    gx = f(tf(g), tf(x), k, s, p, data_format=fmt)
            finally:
                pytpp.set_num_threads(old)
            assert gx.dtype == dtype and gx.shape == tf(x).shape
            if op == "max":
                np.testing.assert_array_equal(back(gx), ref)
            else:
                eps = float(np.finfo(dtype).eps)
                bound = 4 * eps * k[0] * k[1] * np.abs(g).max() + 1e-300
                assert np.abs(back(gx) - ref).max() <= bound


def test_pooling_backward_matches_torch_on_ties_and_nan():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(5)
    x = np.maximum(rng.standard_normal((2, 5, 13, 11)), 0).astype(np.float32)   # ReLU ties
    x[0, 1, 2:4, 3:5] = np.nan
    for fmt, (k, s, p) in itertools.product(["NCHW", "NHWC"], [(3, 2, 1), (2, 2, 0), (3, 1, 1)]):
        tx = torch.from_numpy(x).requires_grad_(True)
        ty = F.max_pool2d(tx, k, s, p)
        g = rng.standard_normal(ty.shape).astype(np.float32)
        (gx,) = torch.autograd.grad(ty, tx, torch.from_numpy(g))
        tf = (lambda a: np.ascontiguousarray(a.transpose(0, 2, 3, 1))) if fmt == "NHWC" else (lambda a: a)
        ours = max_pool2d_backward(tf(g), tf(x), k, s, p, data_format=fmt)
        ours = ours.transpose(0, 3, 1, 2) if fmt == "NHWC" else ours
        np.testing.assert_allclose(ours, gx.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("k,s,p", [((2, 2), (2, 2), (0, 0)), ((2, 2), (3, 3), (1, 1)),
                                   ((3, 3), (3, 3), (1, 1)), ((1, 2), (2, 2), (0, 1)),
                                   ((2, 1), (3, 2), (0, 0)), ((3, 3), (2, 2), (1, 1)),
                                   ((3, 3), (1, 1), (1, 1)), ((5, 3), (2, 1), (2, 1)),
                                   ((4, 2), (3, 3), (1, 0)), ((7, 7), (3, 2), (3, 3))])
@pytest.mark.parametrize("C", [1, 70, 130])
def test_pooling_backward_nhwc_windows(k, s, p, C):
    """NHWC with strides >= the window (each element in at most one window, written once; the
    uncovered ones between and after the windows zeroed) and with overlapping windows (sums of
    several windows), with ties, NaN and -inf, channel counts beyond one chunk, three images,
    every level, one thread or two."""
    import pytpp
    rng = np.random.default_rng(C)
    shape = (3, C, 9, 11)
    x = with_special_values(rng, shape, np.float32, [(0.05, np.nan), (0.35, 0.0), (0.45, -np.inf)])
    P = (shape[2] + 2 * p[0] - k[0]) // s[0] + 1
    Q = (shape[3] + 2 * p[1] - k[1]) // s[1] + 1
    g = rng.integers(-4, 5, (shape[0], C, P, Q)).astype(np.float32)
    tf = lambda a: np.ascontiguousarray(a.transpose(0, 2, 3, 1))   # noqa: E731
    old = pytpp.get_num_threads()
    for op, f in (("max", max_pool2d_backward), ("avg", avg_pool2d_backward)):
        ref = backward_ref(g, x, k, s, p, op)
        for level, nt in itertools.product(pytpp.available_isas(), (1, 2)):
            np.full(tf(x).shape, 7.0, np.float32)   # freed: its memory likely holds the result
            pytpp.set_num_threads(nt)
            try:
                with pytpp.use_isa(level):
                    gx = f(tf(g), tf(x), k, s, p, data_format="NHWC")
            finally:
                pytpp.set_num_threads(old)
            if op == "max":
                np.testing.assert_array_equal(gx.transpose(0, 3, 1, 2), ref)
            else:
                np.testing.assert_allclose(gx.transpose(0, 3, 1, 2), ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape,k,s,p", [
    ((1, 2, 7, 530), (3, 3), (2, 2), (1, 1)),     # two row blocks of outputs (Q = 265)
    ((2, 1, 6, 40), (2, 5), (1, 1), (0, 2)),
    ((1, 2, 9, 51), (4, 4), (3, 3), (2, 2)),
    ((1, 1, 11, 70), (5, 5), (4, 4), (2, 2)),
    ((1, 1, 8, 60), (5, 5), (5, 5), (2, 2)),      # strides beyond the phase buffers
    ((1, 1, 5, 60), (2, 17), (1, 2), (0, 8)),     # windows beyond the phased path's width
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pooling_nchw_rows(shape, k, s, p, dtype):
    """NCHW rows of 8 outputs and more: the phased paths (strides up to 4, windows up to 16
    wide) and the strided ones beyond, with ties, NaN and -inf, at every level and thread count:
    max and average pooling equal the tap-by-tap reference, and exactly torch's element gets
    each gradient of the max, from x and from the forward's indices."""
    import pytpp
    rng = np.random.default_rng(sum(shape) + k[1] * 7 + s[1])
    x = with_special_values(rng, shape, dtype, [(0.03, np.nan), (0.4, 0.0), (0.45, -np.inf)])
    P = (shape[2] + 2 * p[0] - k[0]) // s[0] + 1
    Q = (shape[3] + 2 * p[1] - k[1]) // s[1] + 1
    g = rng.integers(-4, 5, (shape[0], shape[1], P, Q)).astype(dtype)
    ref = backward_ref(g, x, k, s, p, "max")
    old = pytpp.get_num_threads()
    for level, nt in itertools.product(pytpp.available_isas(), (1, 2)):
        pytpp.set_num_threads(nt)
        try:
            with pytpp.use_isa(level):
                gx = max_pool2d_backward(g, x, k, s, p)
                ymax, yavg = max_pool2d(x, k, s, p), avg_pool2d(x, k, s, p)
                yi, idx = max_pool2d(x, k, s, p, return_indices=True)
                gxi = max_pool2d_backward(g, x, k, s, p, indices=idx)
        finally:
            pytpp.set_num_threads(old)
        np.testing.assert_array_equal(gx, ref)
        np.testing.assert_array_equal(gxi, ref)
        assert same_values(ymax, taps_ref(x, k, s, p, "max")) and same_values(yi, ymax)
        assert same_values(yavg, taps_ref(x, k, s, p, "avg"))
    # a view whose rows lie further apart than its width (the forwards read x in place)
    wide = np.full(shape[:-1] + (shape[-1] + 5,), 7.0, dtype)
    wide[..., 2:2 + shape[-1]] = x
    view = wide[..., 2:2 + shape[-1]]
    yv, iv = max_pool2d(view, k, s, p, return_indices=True)
    assert same_values(yv, ymax) and np.array_equal(iv, idx)
    assert same_values(avg_pool2d(view, k, s, p), yavg)
