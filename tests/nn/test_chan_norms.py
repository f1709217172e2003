"""group_norm and batch_norm, forward and backward, against float64 references at every ISA
level, NCHW and NHWC.

Tolerances: statistics are double sums of float32 lane partials (relative error ~ n * eps32 /
lanes over one plane, at most ~1e-6 here), outputs a few float32 operations on values of order
1: 2e-5 of the largest magnitude for float32, 1e-12 for float64; weight gradients are sums over
N * H * W products, allowed 20x that."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pytpp

TOL = {np.float32: 2e-5, np.float64: 1e-12}


def close(a, b, dtype, scale=1.0):
    bound = TOL[dtype] * max(1.0, np.abs(b).max(initial=0.0)) * scale
    np.testing.assert_allclose(np.asarray(a, np.float64), b, rtol=0, atol=bound)


def ref_norm(x, axes, w, b, eps, wshape):
    x = x.astype(np.float64)
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    r = 1 / np.sqrt(var + eps)
    y = (x - mu) * r
    if w is not None:
        y = y * w.astype(np.float64).reshape(wshape)
    if b is not None:
        y = y + b.astype(np.float64).reshape(wshape)
    return y, mu, r


def ref_backward(g, x, axes, w, eps, wshape, sum_axes):
    g, x = g.astype(np.float64), x.astype(np.float64)
    mu = x.mean(axis=axes, keepdims=True)
    r = 1 / np.sqrt(((x - mu) ** 2).mean(axis=axes, keepdims=True) + eps)
    h = (x - mu) * r
    dy = g * (w.astype(np.float64).reshape(wshape) if w is not None else 1.0)
    gx = r * (dy - dy.mean(axis=axes, keepdims=True) - h * (dy * h).mean(axis=axes, keepdims=True))
    return gx, (g * h).sum(axis=sum_axes), g.sum(axis=sum_axes)


def group_ref(x, G, w, b, eps=1e-5):
    N, C = x.shape[:2]
    xg = x.reshape(N, G, -1)
    y, mu, r = ref_norm(xg, (2,), None, None, eps, None)
    y = y.reshape(x.shape)
    shape = (1, C) + (1,) * (x.ndim - 2)
    if w is not None:
        y = y * w.astype(np.float64).reshape(shape)
    if b is not None:
        y = y + b.astype(np.float64).reshape(shape)
    return y, mu.reshape(N, G), r.reshape(N, G)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, G", [((2, 6, 7, 5), 3), ((3, 4, 17), 4), ((1, 8), 2),
                                      ((2, 4, 1, 1), 1), ((5, 32, 33), 8)])
def test_group_norm(isa, threads, rng, dtype, shape, G):
    x = (rng.standard_normal(shape) * 2 + 1).astype(dtype)
    C = shape[1]
    w, b = rng.standard_normal(C).astype(dtype), rng.standard_normal(C).astype(dtype)
    y, mean, rstd = pytpp.nn.group_norm(x, G, w, b, return_stats=True)
    ry, rmu, rr = group_ref(x, G, w, b)
    assert y.dtype == dtype and mean.shape == rstd.shape == (shape[0], G)
    close(y, ry, dtype)
    close(mean, rmu, dtype)
    close(rstd, rr, dtype, 10)
    g = rng.standard_normal(shape).astype(dtype)
    gx, gw, gb = pytpp.nn.group_norm_backward(g, x, G, mean, rstd, w)
    N = shape[0]
    xg, gg = x.reshape(N, G, -1), g.reshape(N, G, -1)
    # grad_x by the closed form per group with dy = g * w[c]
    wfull = np.broadcast_to(w.reshape((1, C) + (1,) * (len(shape) - 2)), shape).reshape(N, G, -1)
    dy = gg.astype(np.float64) * wfull
    h = (xg - rmu.reshape(N, G, 1)) * rr.reshape(N, G, 1)
    rgx = rr.reshape(N, G, 1) * (dy - dy.mean(-1, keepdims=True)
                                 - h * (dy * h).mean(-1, keepdims=True))
    close(gx, rgx.reshape(shape), dtype, 10)
    hfull = h.reshape(shape)
    sum_axes = (0,) + tuple(range(2, len(shape)))
    close(gw, (g * hfull).sum(axis=sum_axes), dtype, 20)
    close(gb, g.astype(np.float64).sum(axis=sum_axes), dtype, 20)


def test_group_norm_matches_torch(rng):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((2, 8, 6, 6))
    w, b, g = rng.standard_normal(8), rng.standard_normal(8), rng.standard_normal(x.shape)
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    yt = torch.nn.functional.group_norm(xt, 4, wt, bt)
    yt.backward(torch.tensor(g))
    y, mean, rstd = pytpp.nn.group_norm(x, 4, w, b, return_stats=True)
    np.testing.assert_allclose(y, yt.detach().numpy(), atol=1e-12)
    for ours, theirs in zip(pytpp.nn.group_norm_backward(g, x, 4, mean, rstd, w),
                            (xt.grad, wt.grad, bt.grad)):
        np.testing.assert_allclose(ours, theirs.numpy(), atol=1e-12)


def bn_axes(ndim, nhwc):
    ch = ndim - 1 if nhwc else 1
    return tuple(a for a in range(ndim) if a != ch), ch


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
# (3, 9, 11, 85): NHWC column kernels with whole strips of channel vectors, a lone vector and
# a scalar tail, over 297 rows (a partial row block and a partial chunk)
@pytest.mark.parametrize("shape", [(4, 6, 5, 7), (3, 17, 9), (8, 33), (2, 3, 1, 1),
                                   (3, 9, 11, 85)])
def test_batch_norm_training_and_eval(isa, threads, rng, dtype, fmt, shape):
    nhwc = fmt == "NHWC"
    axes, ch = bn_axes(len(shape), nhwc)
    C = shape[ch]
    x = (rng.standard_normal(shape) * 3 + 2).astype(dtype)
    w, b = rng.standard_normal(C).astype(dtype), rng.standard_normal(C).astype(dtype)
    rm, rv = rng.standard_normal(C), rng.random(C) + 0.5
    rm0, rv0 = rm.copy(), rv.copy()
    y, mean, rstd = pytpp.nn.batch_norm(x, rm, rv, w, b, training=True, momentum=0.2,
                                        data_format=fmt, return_stats=True)
    wshape = tuple(C if a == ch else 1 for a in range(len(shape)))
    ry, rmu, rr = ref_norm(x, axes, w, b, 1e-5, wshape)
    close(y, ry, dtype)
    close(mean, rmu.ravel(), dtype)
    close(rstd, rr.ravel(), dtype, 10)
    n = x.size // C
    var = x.astype(np.float64).var(axis=axes)
    close(rm, 0.8 * rm0 + 0.2 * rmu.ravel(), dtype)
    close(rv, 0.8 * rv0 + 0.2 * var * n / (n - 1), dtype, 10)
    g = rng.standard_normal(shape).astype(dtype)
    gx, gw, gb = pytpp.nn.batch_norm_backward(g, x, mean, rstd, w, data_format=fmt)
    rgx, rgw, rgb = ref_backward(g, x, axes, w, 1e-5, wshape, axes)
    close(gx, rgx, dtype, 10)
    close(gw, rgw, dtype, 20)
    close(gb, rgb, dtype, 20)
    before = (rm.copy(), rv.copy())
    ye = pytpp.nn.batch_norm(x, rm, rv, w, b, training=False, data_format=fmt)
    np.testing.assert_array_equal(rm, before[0])              # eval keeps the running stats
    re = (x - rm.reshape(wshape)) / np.sqrt(rv.reshape(wshape) + 1e-5) * w.reshape(wshape) \
        + b.reshape(wshape)
    close(ye, re, dtype, 10)


def test_batch_norm_matches_torch(rng):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((4, 5, 3, 3))
    w, b, g = rng.standard_normal(5), rng.standard_normal(5), rng.standard_normal(x.shape)
    rm, rv = np.zeros(5), np.ones(5)
    trm, trv = torch.zeros(5, dtype=torch.float64), torch.ones(5, dtype=torch.float64)
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    yt = torch.nn.functional.batch_norm(xt, trm, trv, wt, bt, training=True, momentum=0.3)
    yt.backward(torch.tensor(g))
    y, mean, rstd = pytpp.nn.batch_norm(x, rm, rv, w, b, True, 0.3, return_stats=True)
    np.testing.assert_allclose(y, yt.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(rm, trm.numpy(), atol=1e-15)
    np.testing.assert_allclose(rv, trv.numpy(), atol=1e-14)
    for ours, theirs in zip(pytpp.nn.batch_norm_backward(g, x, mean, rstd, w),
                            (xt.grad, wt.grad, bt.grad)):
        np.testing.assert_allclose(ours, theirs.numpy(), atol=1e-12)


def test_large_offset_statistics(isa, rng):
    x = (1e4 + 1e-2 * rng.standard_normal((8, 4, 16, 16))).astype(np.float32)
    for fmt, xx in (("NCHW", x), ("NHWC", np.ascontiguousarray(x.transpose(0, 2, 3, 1)))):
        _, mean, rstd = pytpp.nn.batch_norm(xx, None, None, training=True, data_format=fmt,
                                            return_stats=True)
        ref = x.astype(np.float64).transpose(1, 0, 2, 3).reshape(4, -1)
        assert np.abs(mean - ref.mean(1)).max() <= np.spacing(np.float32(1e4))
        np.testing.assert_allclose(rstd, 1 / np.sqrt(ref.var(1) + 1e-5), rtol=1e-3)
    _, mean, rstd = pytpp.nn.group_norm(x, 2, return_stats=True)
    ref = x.astype(np.float64).reshape(8, 2, -1)
    assert np.abs(mean - ref.mean(-1)).max() <= np.spacing(np.float32(1e4))
    np.testing.assert_allclose(rstd, 1 / np.sqrt(ref.var(-1) + 1e-5), rtol=1e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_statistics_whose_first_elements_are_far_from_the_mean(isa, rng, dtype):
    """The statistics are summed around the mean of a channel's (group's) first elements; where
    those sit 1e4 standard deviations off, the sums are taken again around the mean: mean and
    rstd within 8 rounding steps (relative) of float64 (measured: at most 6), where sums around
    the far shift alone are off by 6-40 steps (NCHW, groups) and 130-190 (NHWC)."""
    steps = 8 * float(np.finfo(dtype).eps)
    x = rng.standard_normal((4, 6, 8, 8)).astype(dtype)
    x[0, :, 0, :] += dtype(1e4)                        # the first 8 of each NCHW plane of sample 0
    for fmt in ("NCHW", "NHWC"):
        xx = x if fmt == "NCHW" else np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        _, mean, rstd = pytpp.nn.batch_norm(xx, None, None, training=True, data_format=fmt,
                                            return_stats=True)
        ref = x.astype(np.float64).transpose(1, 0, 2, 3).reshape(6, -1)
        np.testing.assert_allclose(rstd, 1 / np.sqrt(ref.var(1) + 1e-5), rtol=steps)
        np.testing.assert_allclose(mean, ref.mean(1), rtol=steps)
    _, mean, rstd = pytpp.nn.group_norm(x, 3, return_stats=True)
    ref = x.astype(np.float64).reshape(4, 3, -1)
    np.testing.assert_allclose(rstd, 1 / np.sqrt(ref.var(-1) + 1e-5), rtol=steps)
    np.testing.assert_allclose(mean, ref.mean(-1), rtol=steps, atol=steps)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 4), c=st.integers(1, 12), hw=st.integers(1, 40), nhwc=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_hypothesis_batch_norm(n, c, hw, nhwc, seed):
    rng = np.random.default_rng(seed)
    shape = (n, hw, c) if nhwc else (n, c, hw)
    x = rng.standard_normal(shape).astype(np.float32)
    if x.size // c < 2:
        return
    y = pytpp.nn.batch_norm(x, None, None, training=True, data_format="NHWC" if nhwc else "NCHW")
    axes, ch = bn_axes(3, nhwc)
    close(y, ref_norm(x, axes, None, None, 1e-5, None)[0], np.float32, 10)


def test_non_contiguous_and_low_precision(rng):
    import ml_dtypes
    base = rng.standard_normal((4, 6, 8, 3))
    x = base[:, :, ::2, 1]                          # (4, 6, 4), not contiguous
    close(pytpp.nn.group_norm(x, 3), group_ref(x, 3, None, None)[0], np.float64)
    xb = x.astype(ml_dtypes.bfloat16)
    yb = pytpp.nn.batch_norm(xb, None, None, training=True)
    assert yb.dtype == ml_dtypes.bfloat16
    ref = ref_norm(xb.astype(np.float32), (0, 2), None, None, 1e-5, None)[0]
    np.testing.assert_allclose(yb.astype(np.float64), ref, atol=2 ** -7 * np.abs(ref).max())


def test_out_and_zero_size(rng):
    x = rng.standard_normal((2, 4, 5)).astype(np.float32)
    out = np.empty_like(x)
    assert pytpp.nn.group_norm(x, 2, out=out) is out
    close(out, group_ref(x, 2, None, None)[0], np.float32)
    out64 = np.empty(x.shape)
    assert pytpp.nn.batch_norm(x, None, None, training=True, out=out64) is out64
    y = pytpp.nn.group_norm(np.zeros((0, 4, 3)), 2)
    assert y.shape == (0, 4, 3)
    y = pytpp.nn.batch_norm(np.zeros((3, 0, 2)), np.zeros(0), np.ones(0), training=True)
    assert y.shape == (3, 0, 2)


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_backward_out_and_in_place(isa, rng, fmt):
    """out= for grad_x: written in place (also over grad_out or x themselves), cast into a float64
    out, and a wrong out raises before anything is written."""
    x = (rng.standard_normal((3, 8, 5, 4)) * 2 + 1).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    w = rng.standard_normal(x.shape[-1 if fmt == "NHWC" else 1]).astype(np.float32)
    _, mean, rstd = pytpp.nn.batch_norm(x, None, None, w, training=True, data_format=fmt,
                                        return_stats=True)
    _, gmean, grstd = pytpp.nn.group_norm(x, 4, return_stats=True)
    wg = rng.standard_normal(x.shape[1]).astype(np.float32)
    calls = {
        "batch": lambda gg, xx, **kw: pytpp.nn.batch_norm_backward(gg, xx, mean, rstd, w,
                                                                   data_format=fmt, **kw),
        "group": lambda gg, xx, **kw: pytpp.nn.group_norm_backward(gg, xx, 4, gmean, grstd, wg,
                                                                   **kw),
    }
    for call in calls.values():
        want = call(g, x)
        out = np.full_like(x, np.nan)
        got = call(g, x, out=out)
        assert got[0] is out
        np.testing.assert_array_equal(out, want[0])
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_array_equal(got[2], want[2])
        out64 = np.empty(x.shape)
        assert call(g, x, out=out64)[0] is out64
        np.testing.assert_array_equal(out64, want[0].astype(np.float64))
        for which in ("g", "x"):
            gg, xx = g.copy(), x.copy()
            target = gg if which == "g" else xx
            assert call(gg, xx, out=target)[0] is target
            np.testing.assert_array_equal(target, want[0])
        shifted = np.empty(x.size + 1, np.float32)      # out partly over grad_out
        gg = shifted[1:].reshape(x.shape)
        gg[...] = g
        view = shifted[:-1].reshape(x.shape)
        call(gg, x, out=view)
        np.testing.assert_allclose(view, want[0], rtol=0, atol=1e-6)
        bad = np.full((3, 8, 5), 5.0, np.float32)
        with pytest.raises(ValueError, match="out has shape"):
            call(g, x, out=bad)
        assert (bad == 5.0).all()
        with pytest.raises(TypeError, match="cannot write"):
            call(g, x, out=np.empty(x.shape, np.int32))


@pytest.mark.parametrize("call, exc, match", [
    (lambda x, rm, rv: pytpp.nn.group_norm(x, 3), ValueError, "num_groups=3"),
    (lambda x, rm, rv: pytpp.nn.group_norm(x, 2, np.ones(3)), ValueError, "weight has shape"),
    (lambda x, rm, rv: pytpp.nn.group_norm(x[0, 0], 1), ValueError, "at least 2 dims"),
    (lambda x, rm, rv: pytpp.nn.batch_norm(x, rm[:2], rv, training=True), ValueError,
     "running_mean has shape"),
    (lambda x, rm, rv: pytpp.nn.batch_norm(x, None, None), ValueError, "eval"),
    (lambda x, rm, rv: pytpp.nn.batch_norm(x, rm, rv, training=True, momentum=1.5), ValueError,
     "momentum"),
    (lambda x, rm, rv: pytpp.nn.batch_norm(x, rm, rv, data_format="NWC"), ValueError,
     "data_format"),
    (lambda x, rm, rv: pytpp.nn.batch_norm(x[:1, :, :1], rm, rv, training=True), ValueError,
     "more than 1 value"),
    (lambda x, rm, rv: pytpp.nn.batch_norm(x, rm, rv, np.ones(3), training=True), ValueError,
     "weight has shape"),
    (lambda x, rm, rv: pytpp.nn.batch_norm_backward(x, x, np.zeros(4), np.ones(3)), ValueError,
     "rstd has shape"),
])
def test_bad_input_leaves_running_stats(call, exc, match):
    x = np.ones((2, 4, 3))
    rm, rv = np.full(4, 7.0), np.full(4, 9.0)
    with pytest.raises(exc, match=match):
        call(x, rm, rv)
    assert (rm == 7.0).all() and (rv == 9.0).all()
