"""conv2d, its backward functions and the layout transforms against a float64 numpy reference
(conv_reference.py) and torch, at every ISA level.

Tolerances: every output is a sum of n = C/groups * R * S products (backward: the matching
sums). A float32 (float64) sum of n terms computed in any order is within n * eps * sum|terms|
of the exact sum (Higham's bound for recursive summation, each product exact in the double
rounding sense up to one more eps); the checks use (n + 2) * eps * sum|terms| per element, with
sum|terms| from the same reference on |x| and |w|. An activation moves an error by at most its
Lipschitz constant (1 for relu, 1.13 for gelu) plus the kernel's own rounding (a few ulp of the
result: 8 * eps * |y| added). bfloat16 x and w run the bf16 engine: test_conv_bf16.py.
"""
import numpy as np
import pytest
from conv_reference import (activated_ref, conv2d_backward_ref, conv2d_ref, from_fmt,
                            kernel_geometry, pads_of, to_fmt)
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import pytpp
from pytpp.nn import (
    PackedConvWeight,
    conv2d,
    conv2d_backward_data,
    conv2d_backward_weight,
    nchw_to_nhwc,
    nhwc_to_nchw,
)

EPS = {np.dtype(np.float32): float(np.finfo(np.float32).eps),
       np.dtype(np.float64): float(np.finfo(np.float64).eps)}
HYP = settings(max_examples=40, deadline=None,
               suppress_health_check=[HealthCheck.function_scoped_fixture])


def assert_within(got, ref, absref, n, eps, extra=0.0):
    tol = (n + 2) * eps * absref + (8 * eps + extra) * np.abs(ref) + 1e-300
    err = np.abs(np.asarray(got, np.float64) - ref)
    bad = err > tol
    assert not bad.any(), (f"{bad.sum()} of {bad.size} elements beyond the bound; worst "
                           f"{(err - tol).max():.3g}")


@st.composite
def conv_case(draw):
    groups = draw(st.sampled_from([1, 1, 1, 2, 3, "dw"]))
    if groups == "dw":
        C = draw(st.integers(1, 9))
        groups, cg, K = C, 1, C
    else:
        cg = draw(st.integers(1, 9))
        C = cg * groups
        K = groups * draw(st.integers(1, 11))
    N = draw(st.sampled_from([1, 1, 2, 3]))
    return {"N": N, "C": C, "K": K, "groups": groups, **draw(kernel_geometry())}


def make(case, rng, dtype=np.float32):
    x = rng.standard_normal((case["N"], case["C"], case["H"], case["W"])).astype(dtype)
    w = rng.standard_normal((case["K"], case["C"] // case["groups"], case["R"],
                             case["S"])).astype(dtype)
    return x, w


@HYP
@given(case=conv_case(), fmt=st.sampled_from(["NCHW", "NHWC"]),
       dtype=st.sampled_from([np.float32, np.float64]),
       act=st.sampled_from([None, "relu", "gelu"]), use_bias=st.booleans(),
       seed=st.integers(0, 2**16))
def test_conv2d_matches_float64_reference(isa, case, fmt, dtype, act, use_bias, seed):
    rng = np.random.default_rng(seed)
    x, w = make(case, rng, dtype)
    b = rng.standard_normal(case["K"]).astype(dtype) if use_bias else None
    pads = pads_of(case["padding"], case["R"], case["S"], case["dil"], case["stride"])
    ref, absref = activated_ref(x, w, b, case["stride"], pads, case["dil"], case["groups"], act)
    y = conv2d(to_fmt(x, fmt), w, b, case["stride"], case["padding"], case["dil"],
               case["groups"], data_format=fmt, activation=act)
    assert y.dtype == dtype
    assert y.shape == to_fmt(ref, fmt).shape
    n = case["C"] // case["groups"] * case["R"] * case["S"]
    assert_within(from_fmt(y, fmt), ref, absref, n, EPS[np.dtype(dtype)])


@HYP
@given(case=conv_case(), fmt=st.sampled_from(["NCHW", "NHWC"]), seed=st.integers(0, 2**16))
def test_conv2d_backward_matches_float64_reference(isa, case, fmt, seed):
    rng = np.random.default_rng(seed)
    x, w = make(case, rng)
    pads = pads_of(case["padding"], case["R"], case["S"], case["dil"], case["stride"])
    args = (case["stride"], pads, case["dil"], case["groups"])
    P, Q = conv2d_ref(x[:1, :, :, :], w, None, *args).shape[2:]
    go = rng.standard_normal((case["N"], case["K"], P, Q)).astype(np.float32)
    gx_ref, gw_ref, gb_ref = conv2d_backward_ref(go, x, w, *args)
    gx_abs, gw_abs, gb_abs = conv2d_backward_ref(go, x, w, *args, absolute=True)
    kw = {"stride": case["stride"], "padding": case["padding"], "dilation": case["dil"],
              "groups": case["groups"], "data_format": fmt}
    gx = conv2d_backward_data(to_fmt(go, fmt), w, to_fmt(x, fmt).shape, **kw)
    gw, gb = conv2d_backward_weight(to_fmt(go, fmt), to_fmt(x, fmt), w.shape, **kw)
    eps = EPS[np.dtype(np.float32)]
    kg = case["K"] // case["groups"]
    assert gx.shape == to_fmt(x, fmt).shape and gx.dtype == np.float32
    assert gw.shape == w.shape and gb.shape == (case["K"],)
    assert_within(from_fmt(gx, fmt), gx_ref, gx_abs, kg * case["R"] * case["S"], eps)
    assert_within(gw, gw_ref, gw_abs, case["N"] * P * Q, eps)
    assert_within(gb, gb_ref, gb_abs, case["N"] * P * Q, eps)


@st.composite
def rows_case(draw):
    """Layers of the packed-pixel-rows path (one group, C >= 32, K >= 128): K past whole
    register blocks, windows longer than one k run (C * R * S > 1024), outputs of 1 pixel to
    several images."""
    R, S = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 2)))
    padding = (draw(st.integers(0, 2)), draw(st.integers(0, 1)))
    pt, pb, pl, pr = pads_of(padding, R, S, dil, stride)
    H = draw(st.integers(max(1, dil[0] * (R - 1) + 1 - pt - pb), 11))
    W = draw(st.integers(max(1, dil[1] * (S - 1) + 1 - pl - pr), 12))
    return {"N": draw(st.integers(1, 3)), "C": draw(st.integers(32, 140)), "H": H, "W": W,
            "K": draw(st.integers(128, 200)), "R": R, "S": S, "stride": stride,
            "padding": padding, "dil": dil, "groups": 1}


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=rows_case(), fmt=st.sampled_from(["NCHW", "NHWC"]),
       dtype=st.sampled_from([np.float32, np.float64]),
       act=st.sampled_from([None, "relu", "gelu"]), seed=st.integers(0, 2**16))
def test_conv2d_packed_rows_path(isa, case, fmt, dtype, act, seed):
    rng = np.random.default_rng(seed)
    x, w = make(case, rng, dtype)
    b = rng.standard_normal(case["K"]).astype(dtype)
    pads = pads_of(case["padding"], case["R"], case["S"], case["dil"], case["stride"])
    ref, absref = activated_ref(x, w, b, case["stride"], pads, case["dil"], 1, act)
    old = pytpp.get_num_threads()
    try:
        ys = []
        for nt in (1, 2):
            pytpp.set_num_threads(nt)
            ys.append(conv2d(to_fmt(x, fmt), w, b, case["stride"], case["padding"],
                             case["dil"], data_format=fmt, activation=act, algorithm="brgemm"))
    finally:
        pytpp.set_num_threads(old)
    n = case["C"] * case["R"] * case["S"]
    assert_within(from_fmt(ys[0], fmt), ref, absref, n, EPS[np.dtype(dtype)])
    np.testing.assert_array_equal(ys[0], ys[1])   # the same k order on any thread count
    # Fortran-order and strided views of x give the same bits
    xf = np.asfortranarray(to_fmt(x, fmt))
    big = np.zeros(xf.shape[:-1] + (2 * xf.shape[-1],), dtype)
    big[..., ::2] = xf
    for xv in (xf, big[..., ::2]):
        np.testing.assert_array_equal(
            conv2d(xv, w, b, case["stride"], case["padding"], case["dil"], data_format=fmt,
                   activation=act, algorithm="brgemm"), ys[0])


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(C=st.integers(64, 130), K=st.integers(64, 130), R=st.integers(1, 3), S=st.integers(2, 3),
       H=st.integers(1, 5), W=st.integers(1, 5), stride=st.integers(1, 2),
       pad=st.integers(0, 1), dil=st.integers(1, 2), fmt=st.sampled_from(["NCHW", "NHWC"]),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**16))
def test_conv2d_backward_weight_patch_gemm(isa, C, K, R, S, H, W, stride, pad, dil, fmt, dtype,
                                           seed):
    """Few output pixels for the weight (pytpp/nn/_conv.py, PATCH_BWW_RATIO): grad_w as one
    GEMM of the patch matrix, in (K, C, R, S) order."""
    from pytpp.nn._conv import PATCH_BWW_RATIO
    pads = (pad,) * 4
    P = (H + 2 * pad - dil * (R - 1) - 1) // stride + 1
    Q = (W + 2 * pad - dil * (S - 1) - 1) // stride + 1
    assume(P >= 1 and Q >= 1 and P * Q * PATCH_BWW_RATIO < C * K)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, C, H, W)).astype(dtype)
    w = rng.standard_normal((K, C, R, S)).astype(dtype)
    go = rng.standard_normal((1, K, P, Q)).astype(dtype)
    args = ((stride, stride), pads, (dil, dil), 1)
    _, gw_ref, gb_ref = conv2d_backward_ref(go, x, w, *args)
    _, gw_abs, gb_abs = conv2d_backward_ref(go, x, w, *args, absolute=True)
    gw, gb = conv2d_backward_weight(to_fmt(go, fmt), to_fmt(x, fmt), w.shape, stride, pad, dil,
                                    data_format=fmt)
    assert gw.shape == w.shape and gw.dtype == dtype and gb.shape == (K,)
    assert_within(gw, gw_ref, gw_abs, P * Q, EPS[np.dtype(dtype)])
    assert_within(gb, gb_ref, gb_abs, P * Q, EPS[np.dtype(dtype)])
    gwf, _ = conv2d_backward_weight(np.asfortranarray(to_fmt(go, fmt)),
                                    np.asfortranarray(to_fmt(x, fmt)), w.shape, stride, pad, dil,
                                    data_format=fmt)
    np.testing.assert_array_equal(gwf, gw)   # Fortran-order operands: the same bits


@pytest.mark.parametrize("C,H,W,K,R,stride,pad,dil,N", [
    (3, 60, 46, 32, 7, 2, 3, 1, 2),      # a stem
    (1, 9, 11, 5, 3, 1, 1, 1, 3),
    (4, 40, 37, 40, 5, 3, 2, 1, 1),
    (3, 20, 20, 32, 3, 1, 2, 2, 1),      # row dilation (column dilation leaves the route)
    (32, 9, 8, 17, 3, 2, 0, 1, 2),       # the route's widest input
    (7, 6, 30, 3, 1, 1, 0, 1, 1),        # 1 x 1 kernel: one tap row
])
@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv2d_backward_weight_taps(isa, C, H, W, K, R, stride, pad, dil, N, fmt, dtype):
    """Few input channels (pytpp/nn/_conv.py, TAPS_BWW_MAX_C): grad_w as one BRGEMM per tap row
    over rows of a window row's (s, c) elements; the same bits on 1 and 2 threads and for a
    strided view of x."""
    from pytpp.nn._conv import TAPS_BWW_MAX_C
    assert C <= TAPS_BWW_MAX_C
    P = (H + 2 * pad - dil * (R - 1) - 1) // stride + 1
    Q = (W + 2 * pad - (R - 1) - 1) // stride + 1
    rng = np.random.default_rng(C * 1000 + H)
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    w = rng.standard_normal((K, C, R, R)).astype(dtype)
    go = rng.standard_normal((N, K, P, Q)).astype(dtype)
    args = ((stride, stride), (pad,) * 4, (dil, 1), 1)
    _, gw_ref, gb_ref = conv2d_backward_ref(go, x, w, *args)
    _, gw_abs, gb_abs = conv2d_backward_ref(go, x, w, *args, absolute=True)
    old = pytpp.get_num_threads()
    try:
        res = []
        for nt in (1, 2):
            pytpp.set_num_threads(nt)
            res.append(conv2d_backward_weight(to_fmt(go, fmt), to_fmt(x, fmt), w.shape, stride,
                                              pad, (dil, 1), data_format=fmt))
    finally:
        pytpp.set_num_threads(old)
    gw, gb = res[0]
    np.testing.assert_array_equal(res[1][0], gw)
    assert gw.shape == w.shape and gw.dtype == dtype and gb.shape == (K,)
    assert_within(gw, gw_ref, gw_abs, N * P * Q, EPS[np.dtype(dtype)])
    assert_within(gb, gb_ref, gb_abs, N * P * Q, EPS[np.dtype(dtype)])
    xs = np.zeros((N, C, H, 2 * W), dtype)[..., ::2]    # a strided view of x
    xs[...] = x
    gws, _ = conv2d_backward_weight(to_fmt(go, fmt), to_fmt(xs, fmt), w.shape, stride, pad,
                                    (dil, 1), data_format=fmt)
    np.testing.assert_array_equal(gws, gw)


RESNET_LIKE = [  # (C, H, K, R, stride, padding)
    (3, 23, 16, 7, 2, 3), (16, 15, 24, 1, 1, 0), (16, 15, 16, 3, 1, 1), (24, 15, 40, 1, 2, 0),
    (24, 15, 24, 3, 2, 1), (70, 9, 130, 3, 1, 1), (130, 7, 70, 1, 1, 0)]


@pytest.mark.parametrize("C,H,K,R,stride,pad", RESNET_LIKE)
@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_conv2d_resnet_like_shapes(isa, rng, C, H, K, R, stride, pad, fmt):
    x = rng.standard_normal((2, C, H, H + 2)).astype(np.float32)
    w = rng.standard_normal((K, C, R, R)).astype(np.float32)
    b = rng.standard_normal(K).astype(np.float32)
    pads = (pad,) * 4
    ref = np.maximum(conv2d_ref(x, w, b, (stride, stride), pads), 0)
    absref = conv2d_ref(x, w, b, (stride, stride), pads, absolute=True)
    for algorithm in ["auto", "brgemm", "im2col"]:
        y = conv2d(to_fmt(x, fmt), w, b, stride, pad, data_format=fmt, activation="relu",
                   algorithm=algorithm)
        assert_within(from_fmt(y, fmt), ref, absref, C * R * R, EPS[np.dtype(np.float32)])


POINTWISE = [  # (N, C, H, K, stride): the 1x1 layers' three NHWC routes (row sweeps on the
    # packed weight, the same on a subsampled copy when pixels lie 4 KiB apart, one GEMM when K > 2C
    # over more than 512 pixels) and the NCHW GEMM
    (1, 7, 9, 5, 1), (2, 24, 13, 40, 1), (1, 520, 6, 33, 2), (2, 600, 7, 17, 3),
    (3, 16, 15, 40, 1), (1, 5, 31, 21, 2), (2, 9, 17, 9, 2)]


@pytest.mark.parametrize("N,C,H,K,stride", POINTWISE)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv2d_pointwise_routes(isa, rng, N, C, H, K, stride, dtype):
    x = rng.standard_normal((N, C, H, H + 1)).astype(dtype)
    w = rng.standard_normal((K, C, 1, 1)).astype(dtype)
    b = rng.standard_normal(K).astype(dtype)
    ref = np.maximum(conv2d_ref(x, w, b, (stride, stride), (0, 0, 0, 0)), 0)
    absref = conv2d_ref(x, w, b, (stride, stride), (0, 0, 0, 0), absolute=True)
    pw = PackedConvWeight(w)
    for fmt in ["NHWC", "NCHW"]:
        xf = to_fmt(x, fmt)
        # a view with a gap between pixels, then the packed weight into a given out
        wide = np.zeros(xf.shape[:-1] + (xf.shape[-1] + 3,), dtype)
        wide[..., :xf.shape[-1]] = xf
        y1 = conv2d(wide[..., :xf.shape[-1]], w, b, stride, data_format=fmt, activation="relu")
        out = np.full_like(y1, np.nan)
        y2 = conv2d(xf, pw, b, stride, data_format=fmt, activation="relu", out=out)
        assert y2 is out
        for y in (y1, y2):
            assert_within(from_fmt(y, fmt), ref, absref, C, EPS[np.dtype(dtype)])


@pytest.mark.parametrize("N,C,H,K,stride,pad", [
    (3, 24, 7, 40, 1, 0), (2, 16, 9, 8, 2, 0), (1, 12, 5, 20, 1, 0), (4, 8, 33, 16, 1, 0),
    (2, 6, 8, 10, 2, 1)])
@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_conv2d_pointwise_backward(isa, rng, N, C, H, K, stride, pad, fmt):
    """1x1 backward by data and by weights: NCHW images of at most NCHW_ONE_GEMM_PIXELS pixels
    run as one GEMM over every image's columns (33x33 does not), NHWC as one GEMM."""
    P = (H + 2 * pad - 1) // stride + 1
    x = rng.standard_normal((N, C, H, H)).astype(np.float32)
    w = rng.standard_normal((K, C, 1, 1)).astype(np.float32)
    go = rng.standard_normal((N, K, P, P)).astype(np.float32)
    args = ((stride, stride), (pad,) * 4, (1, 1), 1)
    gx_ref, gw_ref, gb_ref = conv2d_backward_ref(go, x, w, *args)
    gx_abs, gw_abs, _ = conv2d_backward_ref(go, x, w, *args, absolute=True)
    gx = conv2d_backward_data(to_fmt(go, fmt), w, to_fmt(x, fmt).shape, stride, pad,
                              data_format=fmt)
    gw, gb = conv2d_backward_weight(to_fmt(go, fmt), to_fmt(x, fmt), w.shape, stride, pad,
                                    data_format=fmt)
    assert_within(from_fmt(gx, fmt), gx_ref, gx_abs, K, EPS[np.dtype(np.float32)])
    assert_within(gw, gw_ref, gw_abs, N * P * P, EPS[np.dtype(np.float32)])
    np.testing.assert_allclose(gb, gb_ref, rtol=1e-5, atol=1e-4)


@pytest.mark.filterwarnings("ignore:Using padding=.same.")
def test_conv2d_matches_torch(rng, threads):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    for (N, C, H, W, K, R, S, stride, pad, dil, groups) in [
            (1, 64, 17, 15, 32, 3, 3, 1, 1, 1, 1), (3, 12, 13, 9, 18, 2, 4, 1, "same", (2, 1), 3),
            (2, 32, 11, 11, 32, 3, 3, 2, 1, 1, 32), (1, 5, 30, 33, 1, 5, 5, 3, 2, 2, 1),
            (2, 1, 9, 9, 7, 3, 1, 1, (1, 0), 1, 1)]:
        x = rng.standard_normal((N, C, H, W)).astype(np.float32)
        w = rng.standard_normal((K, C // groups, R, S)).astype(np.float32)
        b = rng.standard_normal(K).astype(np.float32)
        tx = torch.from_numpy(x).double().requires_grad_(True)
        tw = torch.from_numpy(w).double().requires_grad_(True)
        tb = torch.from_numpy(b).double().requires_grad_(True)
        ty = F.gelu(F.conv2d(tx, tw, tb, stride, pad, dil, groups))
        y = conv2d(x, w, b, stride, pad, dil, groups, activation="gelu")
        np.testing.assert_allclose(y, ty.detach().numpy(), rtol=2e-5, atol=2e-5 * np.sqrt(C * R * S))
        tz = F.conv2d(tx, tw, tb, stride, pad, dil, groups)
        go = rng.standard_normal(tz.shape).astype(np.float32)
        gx, gw, gb = torch.autograd.grad(tz, (tx, tw, tb), torch.from_numpy(go).double())
        scale = np.sqrt(go.size)
        np.testing.assert_allclose(conv2d_backward_data(go, w, x.shape, stride, pad, dil, groups),
                                   gx.numpy(), rtol=2e-5, atol=2e-5 * scale)
        pw, pb = conv2d_backward_weight(go, x, w.shape, stride, pad, dil, groups)
        np.testing.assert_allclose(pw, gw.numpy(), rtol=2e-5, atol=2e-5 * scale)
        np.testing.assert_allclose(pb, gb.numpy(), rtol=2e-5, atol=2e-5 * scale)


def test_threads_give_the_one_thread_result(rng):
    x = rng.standard_normal((3, 40, 19, 21)).astype(np.float32)
    w = rng.standard_normal((72, 40, 3, 3)).astype(np.float32)
    old = pytpp.get_num_threads()
    try:
        pytpp.set_num_threads(1)
        y1 = conv2d(x, w, padding=1)
        pytpp.set_num_threads(2)
        y2 = conv2d(x, w, padding=1)
    finally:
        pytpp.set_num_threads(old)
    np.testing.assert_array_equal(y1, y2)


def test_noncontiguous_and_fortran_input(isa, rng):
    big = rng.standard_normal((2, 12, 21, 25)).astype(np.float32)
    x = big[:, ::2, 1::2, ::-2]                       # strided, negative stride
    w = rng.standard_normal((9, 6, 3, 3)).astype(np.float32)
    ref = conv2d(np.ascontiguousarray(x), w, padding=1)
    np.testing.assert_array_equal(conv2d(x, w, padding=1), ref)
    np.testing.assert_array_equal(conv2d(np.asfortranarray(x), w, padding=1), ref)
    xh = big.transpose(0, 2, 3, 1)[:, ::2, :, ::2]    # NHWC view with channel stride 2
    refh = conv2d(np.ascontiguousarray(xh), w, padding=1, data_format="NHWC")
    np.testing.assert_array_equal(conv2d(xh, w, padding=1, data_format="NHWC"), refh)


def test_packed_weight_and_out(rng):
    x = rng.standard_normal((2, 8, 9, 9)).astype(np.float32)
    w = rng.standard_normal((16, 4, 3, 3)).astype(np.float32)
    pw = PackedConvWeight(w, groups=2)
    ref = conv2d(x, w, groups=2, padding=1)
    np.testing.assert_array_equal(conv2d(x, pw, groups=2, padding=1), ref)
    w[...] = 0                                        # the pack holds a copy
    np.testing.assert_array_equal(conv2d(x, pw, groups=2, padding=1), ref)
    out = np.empty_like(ref)
    assert conv2d(x, pw, groups=2, padding=1, out=out) is out
    np.testing.assert_array_equal(out, ref)
    out64 = np.empty(ref.shape, np.float64)
    conv2d(x, pw, groups=2, padding=1, out=out64)
    np.testing.assert_array_equal(out64, ref)
    with pytest.raises(ValueError, match="channel mismatch"):
        conv2d(x, pw, groups=1, padding=1)         # w has C/groups = 4 channels, x 8
    pw1 = PackedConvWeight(w)                      # packed on first use, for the call's groups
    np.testing.assert_array_equal(conv2d(x, pw1, groups=2, padding=1), np.zeros_like(ref))
    # out may alias the input
    xs = rng.standard_normal((1, 4, 6, 6)).astype(np.float32)
    w1 = rng.standard_normal((4, 4, 1, 1)).astype(np.float32)
    ref1 = conv2d(xs, w1)
    conv2d(xs, w1, out=xs)
    np.testing.assert_array_equal(xs, ref1)


def test_zero_sizes(rng):
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    assert conv2d(np.zeros((0, 3, 5, 5), np.float32), w).shape == (0, 4, 3, 3)
    y = conv2d(np.zeros((1, 0, 5, 5), np.float32), np.zeros((4, 0, 3, 3), np.float32),
               np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(y, np.broadcast_to(np.arange(4.0)[:, None, None], (1, 4, 3, 3)))
    gw, gb = conv2d_backward_weight(np.zeros((0, 4, 3, 3), np.float32),
                                    np.zeros((0, 3, 5, 5), np.float32), w.shape)
    assert not gw.any() and not gb.any()


def test_layout_transforms_are_inverse(isa, rng):
    x = rng.standard_normal((2, 5, 7, 3)).astype(np.float32)
    y = nchw_to_nhwc(x, (1, 2, 0, 3))
    assert y.shape == (2, 10, 6, 5)
    np.testing.assert_array_equal(y[:, 1:8, 0:3], x.transpose(0, 2, 3, 1))
    assert not y[:, 0].any() and not y[:, 8:].any() and not y[:, :, 3:].any()
    np.testing.assert_array_equal(nhwc_to_nchw(nchw_to_nhwc(x)), x)


BAD = [  # (kwargs changes, exception, text the message names)
    ({"w": np.zeros((4, 2, 3, 3), np.float32)}, ValueError, "channel mismatch"),
    ({"groups": 2, "w": np.zeros((3, 2, 3, 3), np.float32)}, ValueError, "groups"),
    ({"groups": 3}, ValueError, "groups"),
    ({"w": np.zeros((4, 3, 9, 3), np.float32)}, ValueError, "larger than the padded"),
    ({"padding": -1}, ValueError, "padding"),
    ({"stride": 0}, ValueError, "stride"),
    ({"dilation": (1, 0)}, ValueError, "dilation"),
    ({"bias": np.zeros(5, np.float32)}, ValueError, "bias"),
    ({"data_format": "NWHC"}, ValueError, "data_format"),
    ({"activation": "tanh"}, ValueError, "activation"),
    ({"algorithm": "winograd"}, ValueError, "algorithm"),
    ({"padding": "same", "stride": 2}, ValueError, "same"),
    ({"padding": "full"}, ValueError, "padding"),
    ({"stride": 1.5}, TypeError, "stride"),
    ({"out": np.zeros((1, 4, 5, 5), np.float32)}, ValueError, "out"),
    ({"out": np.zeros((1, 4, 6, 6), np.int32)}, TypeError, "out"),
    ({"x": np.zeros((1, 3, 8), np.float32)}, ValueError, "x"),
    ({"x": np.zeros((1, 3, 8, 8), np.int64)}, TypeError, "x"),
]


@pytest.mark.parametrize("change,exc,text", BAD)
def test_bad_arguments_raise_before_writing(change, exc, text):
    kw = {"x": np.ones((1, 3, 8, 8), np.float32), "w": np.ones((4, 3, 3, 3), np.float32),
              "bias": None, "stride": 1, "padding": 0, "dilation": 1, "groups": 1, "data_format": "NCHW",
              "activation": None, "algorithm": "auto", "out": np.full((1, 4, 6, 6), 7, np.float32)}
    kw.update(change)
    out = kw["out"]
    before = out.copy()
    x, w = kw.pop("x"), kw.pop("w")
    with pytest.raises(exc, match=text):
        conv2d(x, w, **kw)
    np.testing.assert_array_equal(out, before)


def test_backward_bad_arguments():
    go = np.ones((1, 4, 6, 6), np.float32)
    w = np.ones((4, 3, 3, 3), np.float32)
    with pytest.raises(ValueError, match="grad_out"):
        conv2d_backward_data(go, w, (1, 3, 9, 8))
    with pytest.raises(ValueError, match="input_shape"):
        conv2d_backward_data(go, w, (1, 3, 8))
    with pytest.raises(ValueError, match="channel mismatch"):
        conv2d_backward_weight(go, np.ones((1, 2, 8, 8), np.float32), w.shape)
    with pytest.raises(ValueError, match="data_format"):
        conv2d_backward_weight(go, np.ones((1, 3, 8, 8), np.float32), w.shape,
                               data_format="CHWN")


@pytest.mark.parametrize("C,K,H,R,S,stride,padding,dil", [
    (3, 16, 23, 7, 7, (2, 2), (3, 3), (1, 1)),    # an RGB stem, odd size
    (1, 8, 17, 3, 5, (1, 2), (1, 2), (1, 1)),     # R != S
    (2, 12, 19, 3, 3, (2, 1), (0, 1), (2, 1)),    # dilation
    (4, 20, 15, 5, 3, (3, 3), (2, 1), (1, 2)),
    (3, 10, 14, 4, 2, (1, 1), "same", (1, 1)),    # even kernel: asymmetric padding
    (8, 24, 12, 3, 3, (1, 1), (1, 1), (1, 1))])
@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_backward_data_columns(isa, rng, monkeypatch, C, K, H, R, S, stride, padding, dil, fmt,
                               dtype):
    """Few input channels: the backward by data as GEMMs into columns and a column-to-image sum
    (nn._conv._col2im_backward_data), output rows in several chunks (a small chunk size forces
    them), against the float64 reference; the same bits on 1 and 2 threads."""
    import pytpp.nn._conv as conv_mod
    monkeypatch.setattr(conv_mod, "COL2IM_CHUNK_BYTES", 1024)
    N = 2
    pads = pads_of(padding, R, S, dil, stride)
    pt, pb, pl, pr = pads
    P = (H + pt + pb - dil[0] * (R - 1) - 1) // stride[0] + 1
    Q = (H + pl + pr - dil[1] * (S - 1) - 1) // stride[1] + 1
    x = rng.standard_normal((N, C, H, H)).astype(dtype)
    w = rng.standard_normal((K, C, R, S)).astype(dtype)
    go = rng.standard_normal((N, K, P, Q)).astype(dtype)
    gx_ref, _, _ = conv2d_backward_ref(go, x, w, stride, pads, dil, 1)
    gx_abs, _, _ = conv2d_backward_ref(go, x, w, stride, pads, dil, 1, absolute=True)
    old = pytpp.get_num_threads()
    try:
        res = []
        for nt in (1, 2):
            pytpp.set_num_threads(nt)
            res.append(conv2d_backward_data(to_fmt(go, fmt), w, to_fmt(x, fmt).shape, stride,
                                            padding, dil, data_format=fmt))
    finally:
        pytpp.set_num_threads(old)
    np.testing.assert_array_equal(res[0], res[1])
    assert_within(from_fmt(res[0], fmt), gx_ref, gx_abs, K * R * S, EPS[np.dtype(dtype)])
