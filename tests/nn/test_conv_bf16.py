"""conv2d's bfloat16 engine (frame/conv_bf16.c: bf16 x and w, one group) at every ISA level.

Bits: every output is one vdpbf16ps chain over its window in (r, s, c) order with the channels
in pairs (an odd C gains one zero channel), so the float32 result is pytpp.matmul's bf16 product
of the im2col matrix and the (R*S*C, K) weight, bit for bit, and the same on every level (the
native AVX512_BF16 kernels, their AVX-512 and AVX2 emulations and the reference agree bit for
bit). A bf16 result is that float32 result after bias and activation, rounded to nearest even.

Tolerance against float64: bf16 products are exact in float32 and the chain is n = R*S*C fused
adds, within (n + 2) * 2^-24 * sum|terms| of the exact sum (Higham's recursive-summation bound;
the data is standard normal, so no denormal is flushed); the bias, activation and bf16 rounding
add what test_conv.py states (gelu's Lipschitz constant 1.13, half a bf16 ulp: 2^-8 |y|).
"""
import ml_dtypes
import numpy as np
import pytest
from conv_reference import (activated_ref, conv2d_backward_ref, from_fmt, kernel_geometry,
                            pads_of, to_fmt)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytpp
from pytpp.nn import PackedConvWeight, conv2d

BF16 = np.dtype(ml_dtypes.bfloat16)
EPS32 = float(np.finfo(np.float32).eps) / 2     # 2^-24: fused adds round to nearest
HYP = settings(max_examples=30, deadline=None,
               suppress_health_check=[HealthCheck.function_scoped_fixture])


def im2col_product(x, w, stride, pads, dil):
    """pytpp.matmul's bf16 product of the patch matrix (windows in (r, s, c) order, C padded
    to even) and the weight, float32, NCHW."""
    N, C, H, W = x.shape
    K, _, R, S = w.shape
    Ce = C + C % 2
    pt, pb, pl, pr = pads
    xp = np.zeros((N, H + pt + pb, W + pl + pr, Ce), BF16)
    xp[:, pt:pt + H, pl:pl + W, :C] = x.transpose(0, 2, 3, 1)
    win = np.lib.stride_tricks.sliding_window_view(
        xp, ((R - 1) * dil[0] + 1, (S - 1) * dil[1] + 1), axis=(1, 2))
    win = win[:, ::stride[0], ::stride[1], :, ::dil[0], ::dil[1]]
    P = (H + pt + pb - dil[0] * (R - 1) - 1) // stride[0] + 1
    Q = (W + pl + pr - dil[1] * (S - 1) - 1) // stride[1] + 1
    win = win[:, :P, :Q]
    cols = np.ascontiguousarray(win.transpose(0, 1, 2, 4, 5, 3)).reshape(N * P * Q, -1)
    we = np.zeros((K, Ce, R, S), BF16)
    we[:, :C] = w
    wm = np.ascontiguousarray(we.transpose(2, 3, 1, 0)).reshape(R * S * Ce, K)
    y = pytpp.matmul(cols, wm, dtype=np.float32)
    return y.reshape(N, P, Q, K).transpose(0, 3, 1, 2)


CASES = [  # N, C, H, W, K, R, S, stride, padding, dilation
    (1, 4, 8, 8, 5, 3, 3, 1, 1, 1),
    (2, 3, 9, 7, 33, 3, 3, 2, 1, 1),        # the stem's odd C, K past one panel
    (1, 64, 14, 14, 64, 3, 3, 1, 1, 1),
    (1, 7, 11, 13, 17, 1, 1, 1, 0, 1),      # 1x1 read in place, odd C copied
    (2, 16, 10, 10, 40, 1, 1, 2, 0, 1),     # strided 1x1
    (1, 5, 12, 12, 7, 3, 2, 1, (1, 2), 2),  # dilation, asymmetric kernel
    (3, 2, 5, 31, 1, 2, 5, (1, 3), (0, 2), (2, 1)),
    (1, 200, 6, 6, 70, 3, 3, 1, 1, 1),      # k of 1800: two weight slices
    (1, 1100, 3, 3, 3, 3, 3, 1, 1, 1),      # k past three slices, K below one vector
    (2, 6, 5, 30, 40, 3, 3, 1, 1, 1),       # rows of 30 pixels: taps, a kernel row per entry
    (1, 5, 6, 40, 9, 3, 3, 1, 2, (1, 2)),   # taps with dilation: an entry per tap
    (1, 3, 9, 60, 33, 7, 7, 2, 3, 1),       # a stem-like strided 7x7 on taps
    (1, 256, 4, 4, 300, 3, 3, 1, 1, 1),     # pixel rows, weight slices past L2: panels outer
    (1, 256, 3, 26, 300, 3, 3, 1, 1, 1),    # taps likewise
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_bits_are_matmul_of_the_patch_matrix(isa, rng, case, fmt):
    N, C, H, W, K, R, S, stride, padding, dil = case
    x = rng.standard_normal((N, C, H, W)).astype(BF16)
    w = rng.standard_normal((K, C, R, S)).astype(BF16)
    st2, dl2 = np.broadcast_to(stride, 2), np.broadcast_to(dil, 2)
    pads = pads_of(padding, R, S, tuple(dl2), tuple(st2))
    want = im2col_product(x, w, tuple(st2), pads, tuple(dl2))
    out = np.full(to_fmt(want, fmt).shape, np.nan, np.float32)
    y = conv2d(to_fmt(x, fmt), w, None, stride, padding, dil, data_format=fmt, out=out)
    assert y is out
    np.testing.assert_array_equal(from_fmt(out, fmt).view(np.uint32), want.view(np.uint32))
    yb = conv2d(to_fmt(x, fmt), w, None, stride, padding, dil, data_format=fmt)
    assert yb.dtype == BF16
    np.testing.assert_array_equal(from_fmt(yb, fmt).view(np.uint16),
                                  want.astype(BF16).view(np.uint16))


@st.composite
def bf16_case(draw):
    return {"N": draw(st.sampled_from([1, 2])), "C": draw(st.integers(1, 40)),
            "K": draw(st.integers(1, 70)), **draw(kernel_geometry(max_dil=2))}


@HYP
@given(case=bf16_case(), fmt=st.sampled_from(["NCHW", "NHWC"]),
       act=st.sampled_from([None, "relu", "gelu"]), use_bias=st.booleans(),
       out_dt=st.sampled_from([None, np.float32]), seed=st.integers(0, 2**16))
def test_matches_float64_reference(isa, case, fmt, act, use_bias, out_dt, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((case["N"], case["C"], case["H"], case["W"])).astype(BF16)
    w = rng.standard_normal((case["K"], case["C"], case["R"], case["S"])).astype(BF16)
    b = rng.standard_normal(case["K"]).astype(BF16) if use_bias else None
    pads = pads_of(case["padding"], case["R"], case["S"], case["dil"], case["stride"])
    ref, absref = activated_ref(x, w, b, case["stride"], pads, case["dil"], 1, act)
    out = None
    if out_dt is not None:
        out = np.full(to_fmt(ref, fmt).shape, np.nan, out_dt)
    y = conv2d(to_fmt(x, fmt), w, b, case["stride"], case["padding"], case["dil"],
               data_format=fmt, activation=act, out=out)
    assert y.dtype == (BF16 if out_dt is None else out_dt)
    n = case["C"] * case["R"] * case["S"]
    tol = (n + 2) * EPS32 * absref + 8 * EPS32 * np.abs(ref) + 1e-300
    if out_dt is None:
        tol += 2.0 ** -8 * (np.abs(ref) + tol)
    err = np.abs(from_fmt(y, fmt).astype(np.float64) - ref)
    assert (err <= tol).all(), f"worst excess {(err - tol).max():.3g}"


def test_levels_and_threads_agree_bit_for_bit(rng, threads):
    x = rng.standard_normal((2, 9, 13, 11)).astype(BF16)
    w = rng.standard_normal((37, 9, 3, 3)).astype(BF16)
    got = {}
    for level in pytpp.available_isas():
        with pytpp.use_isa(level):
            got[level] = conv2d(x, w, stride=(1, 2), padding=1, activation="gelu")
    first = next(iter(got.values()))
    for level, y in got.items():
        np.testing.assert_array_equal(y.view(np.uint16), first.view(np.uint16), err_msg=level)


def test_noncontiguous_input_and_packed_weight(isa, rng):
    x = rng.standard_normal((2, 12, 9, 20)).astype(BF16)
    w = rng.standard_normal((6, 6, 3, 3)).astype(BF16)
    view = x[:, ::2, :, ::2]                       # strided channels and columns
    want = conv2d(np.ascontiguousarray(view), w, padding=1)
    np.testing.assert_array_equal(conv2d(view, w, padding=1).view(np.uint16),
                                  want.view(np.uint16))
    fort = np.asfortranarray(view)
    np.testing.assert_array_equal(conv2d(fort, w, padding=1).view(np.uint16),
                                  want.view(np.uint16))
    nhwc = np.ascontiguousarray(view.transpose(0, 2, 3, 1))[:, :, ::-1]   # negative stride
    want_nhwc = conv2d(np.ascontiguousarray(nhwc), w, padding=1, data_format="NHWC")
    np.testing.assert_array_equal(
        conv2d(nhwc, PackedConvWeight(w), padding=1, data_format="NHWC").view(np.uint16),
        want_nhwc.view(np.uint16))


@pytest.mark.parametrize("K,C,R,S", [(37, 9, 3, 3), (33, 7, 1, 1), (5, 1, 2, 5), (64, 66, 3, 3),
                                     (70, 1601, 3, 3)])
def test_weight_views_pack_alike(isa, threads, rng, K, C, R, S):
    # torch's contiguous layout goes through the 16-bit transpose (threads over panels past a
    # million elements), other views element by element: the same packed weight, the same bits
    x = rng.standard_normal((1, C, 5, 4)).astype(BF16)
    w = rng.standard_normal((K, C, R, S)).astype(BF16)
    want = conv2d(x, w, padding=(R // 2, S // 2))
    wide = np.zeros((K, 2 * C, R, S), BF16)
    wide[:, ::2] = w
    taps_swapped = w.transpose(0, 1, 3, 2).copy().transpose(0, 1, 3, 2)
    for view in (wide[:, ::2], np.asfortranarray(w), taps_swapped,
                 PackedConvWeight(np.asfortranarray(w))):
        got = conv2d(x, view, padding=(R // 2, S // 2))
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_bias_alone_and_zero_sizes(rng):
    w = rng.standard_normal((4, 3, 3, 3)).astype(BF16)
    assert conv2d(np.zeros((0, 3, 5, 5), BF16), w).shape == (0, 4, 3, 3)
    b = np.arange(4).astype(BF16)
    y = conv2d(np.zeros((1, 0, 5, 5), BF16), np.zeros((4, 0, 3, 3), BF16), b)
    assert y.dtype == BF16
    np.testing.assert_array_equal(y.astype(np.float32),
                                  np.broadcast_to(np.arange(4.0)[:, None, None], (1, 4, 3, 3)))


def test_grouped_bf16_rounds_the_float32_result_once(rng):
    """groups > 1 computes in float32 (the float32 engine) and rounds once."""
    x = rng.standard_normal((2, 6, 9, 8)).astype(BF16)
    w = rng.standard_normal((4, 3, 3, 3)).astype(BF16)
    y = conv2d(x, w, padding=1, groups=2)
    assert y.dtype == BF16
    y32 = conv2d(x.astype(np.float32), w.astype(np.float32), padding=1, groups=2)
    np.testing.assert_array_equal(y.view(np.uint16), y32.astype(BF16).view(np.uint16))


def test_denormal_results_flush_to_zero_on_every_level():
    """The epilogue runs under DAZ + FTZ like the sums: a sum plus bias in the float32 denormal
    range is zero on every level (the native bf16 store would flush it, the emulated one round
    it), in both output dtypes."""
    x = np.zeros((1, 2, 3, 3), BF16)
    x[0, 0] = 1
    w = np.zeros((3, 2, 1, 1), BF16)
    w[:, 0, 0, 0] = 2.0 ** -120
    bias = np.array([-(2.0 ** -120) + 2.0 ** -130, 1.0, -(2.0 ** -120)], np.float32)
    for level in pytpp.available_isas():
        with pytpp.use_isa(level):
            y32 = np.empty((1, 3, 3, 3), np.float32)
            conv2d(x, w, bias, out=y32)
            yb = conv2d(x, w, bias)
        assert (y32[0, 0] == 0).all() and (y32[0, 2] == 0).all(), level
        np.testing.assert_array_equal(y32[0, 1], np.float32(1.0 + 2.0 ** -120))
        np.testing.assert_array_equal(yb.view(np.uint16)[0, 0], 0)
        np.testing.assert_array_equal(yb.astype(np.float32)[0, 1], 1.0)


BACKWARD_CASES = [  # N, C, H, W, K, R, S, padding, dilation
    (2, 16, 9, 11, 12, 3, 3, 1, 1),
    (1, 33, 7, 30, 17, 3, 3, 0, 1),         # odd K (the engine's input channels), taps rows
    (1, 20, 10, 12, 9, 5, 3, (2, 1), (1, 2)),
    (2, 24, 6, 6, 40, 3, 3, "same", 1),
]


@pytest.mark.parametrize("case", BACKWARD_CASES)
@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_backward_data_at_stride_1_is_the_flipped_forward(isa, rng, case, fmt):
    """bf16 grad_out and w at stride 1: the forward engine on grad_out (bordered by the kernel
    extent minus the padding) with the flipped, channel-swapped weight, bit for bit; within the
    bf16 bound of the float64 gradient."""
    N, C, H, W, K, R, S, padding, dil = case
    dl2 = tuple(np.broadcast_to(dil, 2))
    pt, pb, pl, pr = pads_of(padding, R, S, dl2, (1, 1))
    P = H + pt + pb - dl2[0] * (R - 1)
    Q = W + pl + pr - dl2[1] * (S - 1)
    go = rng.standard_normal((N, K, P, Q)).astype(BF16)
    w = rng.standard_normal((K, C, R, S)).astype(BF16)
    ishape = (N, C, H, W) if fmt == "NCHW" else (N, H, W, C)
    gx = pytpp.nn.conv2d_backward_data(to_fmt(go, fmt), w, ishape, 1, padding, dil,
                                       data_format=fmt)
    assert gx.dtype == BF16 and gx.shape == ishape
    wf = np.ascontiguousarray(w.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1])
    eh, ew = dl2[0] * (R - 1), dl2[1] * (S - 1)
    want = im2col_product(go, wf, (1, 1), (eh - pt, eh - pb, ew - pl, ew - pr), dl2)
    np.testing.assert_array_equal(from_fmt(gx, fmt).view(np.uint16),
                                  want.astype(BF16).view(np.uint16))
    ref, _, _ = conv2d_backward_ref(go, np.zeros((N, C, H, W)), w, (1, 1), (pt, pb, pl, pr),
                                    dl2, 1)
    absref, _, _ = conv2d_backward_ref(go, np.zeros((N, C, H, W)), w, (1, 1),
                                       (pt, pb, pl, pr), dl2, 1, absolute=True)
    tol = (K * R * S + 2) * EPS32 * absref
    tol += 2.0 ** -8 * (np.abs(ref) + tol) + 1e-300
    assert (np.abs(from_fmt(gx, fmt).astype(np.float64) - ref) <= tol).all()


def test_backward_data_below_the_pixel_floor_rounds_the_float32_gradient(rng):
    """Fewer input pixels than BF16_BACKWARD_MIN_PIXELS: the float32 path, rounded once."""
    from pytpp.nn._conv import BF16_BACKWARD_MIN_PIXELS
    H = W = int(BF16_BACKWARD_MIN_PIXELS ** 0.5) - 1
    go = rng.standard_normal((1, 24, H, W)).astype(BF16)
    w = rng.standard_normal((24, 20, 3, 3)).astype(BF16)
    gx = pytpp.nn.conv2d_backward_data(go, w, (1, 20, H, W), 1, 1)
    g32 = pytpp.nn.conv2d_backward_data(go.astype(np.float32), w.astype(np.float32),
                                        (1, 20, H, W), 1, 1)
    np.testing.assert_array_equal(gx.view(np.uint16), g32.astype(BF16).view(np.uint16))
