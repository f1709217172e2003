"""conv2d(algorithm="yaconv") (thesis 002 ch. 5, pytpp/_core/frame/yaconv.c) against the float64
numpy reference (conv_reference.py), at every ISA level.

Tolerances as test_conv.py: every output is a sum of n = C * R * S products (each tap row's sum
is added into the output in order, so the sum is still one sequence of n roundings); a float32
(float64) recursive sum of n terms is within n * eps * sum|terms| of the exact sum (Higham), the
check uses (n + 2) * eps * sum|terms| with sum|terms| from the reference on |x| and |w|, plus
8 eps |y| for the bias add and activation (gelu: its Lipschitz constant 1.13 scales the bound).
"""
import numpy as np
import pytest
from conv_reference import conv2d_ref, gelu_ref, pads_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytpp
from pytpp.nn import PackedConvWeight, conv2d

EPS = {np.dtype(np.float32): float(np.finfo(np.float32).eps),
       np.dtype(np.float64): float(np.finfo(np.float64).eps)}
HYP = settings(max_examples=40, deadline=None,
               suppress_health_check=[HealthCheck.function_scoped_fixture])
ODD = [1, 2, 5, 7, 13, 14, 17]
# C = 70 and 130 take more than one channel block (YC_PANEL_BYTES: 128 channels at S = 2)


def assert_within(got, ref, absref, n, eps, extra=0.0):
    tol = (n + 2) * eps * absref + (8 * eps + extra) * np.abs(ref) + 1e-300
    err = np.abs(np.asarray(got, np.float64) - ref)
    bad = err > tol
    assert not bad.any(), (f"{bad.sum()} of {bad.size} elements beyond the bound; worst "
                           f"{(err - tol).max():.3g}")


def nhwc(a):
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1))


@st.composite
def yaconv_case(draw):
    R, S = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    if R * S == 1:
        S = 2
    padding = draw(st.sampled_from(["int", "pair", "same", "valid"]))
    if padding == "int":
        padding = draw(st.integers(0, 4))
    elif padding == "pair":
        padding = (draw(st.integers(0, 5)), draw(st.integers(0, 3)))
    pt, pb, pl, pr = pads_of(padding, R, S, (1, 1), (1, 1))
    H = draw(st.one_of(st.sampled_from(ODD), st.integers(1, 20)).filter(
        lambda h: h + pt + pb >= R))
    W = draw(st.integers(max(1, S - pl - pr), 19))
    return {"N": draw(st.sampled_from([1, 1, 2, 3])),
            "C": draw(st.sampled_from([1, 3, 7, 17, 33, 70, 130])),
            "K": draw(st.sampled_from([1, 5, 16, 17, 33, 63])), "H": H, "W": W, "R": R, "S": S,
            "padding": padding}


def reference(x, w, b, padding, act):
    pads = pads_of(padding, w.shape[2], w.shape[3], (1, 1), (1, 1))
    ref = conv2d_ref(x, w, b, (1, 1), pads)
    absref = conv2d_ref(x, w, b, (1, 1), pads, absolute=True)
    if act == "relu":
        ref = np.maximum(ref, 0)
    elif act == "gelu":
        ref, absref = gelu_ref(ref), 1.13 * absref
    return ref, absref


@HYP
@given(case=yaconv_case(), fmt=st.sampled_from(["NCHW", "NHWC"]),
       dtype=st.sampled_from([np.float32, np.float64]),
       act=st.sampled_from([None, "relu", "gelu"]), use_bias=st.booleans(),
       seed=st.integers(0, 2**16))
def test_yaconv_matches_float64_reference(isa, case, fmt, dtype, act, use_bias, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((case["N"], case["C"], case["H"], case["W"])).astype(dtype)
    w = rng.standard_normal((case["K"], case["C"], case["R"], case["S"])).astype(dtype)
    b = rng.standard_normal(case["K"]).astype(dtype) if use_bias else None
    ref, absref = reference(x, w, b, case["padding"], act)
    xin = nhwc(x) if fmt == "NHWC" else x
    y = conv2d(xin, w, b, padding=case["padding"], data_format=fmt, activation=act,
               algorithm="yaconv")
    assert y.dtype == dtype
    y = y.transpose(0, 3, 1, 2) if fmt == "NHWC" else y
    assert y.shape == ref.shape
    assert_within(y, ref, absref, case["C"] * case["R"] * case["S"], EPS[np.dtype(dtype)])


RESNET_3X3 = [(64, 56, 64), (128, 28, 128), (256, 14, 256), (512, 7, 512)]


@pytest.mark.parametrize("C,H,K", RESNET_3X3)
def test_yaconv_resnet50_3x3_layers(isa, rng, C, H, K):
    """The layers "auto" may send to YaConv, at their real sizes (N = 1)."""
    x = rng.standard_normal((1, H, H, C)).astype(np.float32)
    w = rng.standard_normal((K, C, 3, 3)).astype(np.float32)
    xc = x.transpose(0, 3, 1, 2)
    ref, absref = reference(xc, w, None, 1, None)
    y = conv2d(x, w, padding=1, data_format="NHWC", algorithm="yaconv")
    assert_within(y.transpose(0, 3, 1, 2), ref, absref, C * 9, EPS[np.dtype(np.float32)])


@pytest.mark.parametrize("N", [1, 2, 3, 5])
def test_threads_give_the_one_thread_result(rng, threads, N):
    """Each output's sum runs in the same order whatever the split over threads (one image
    shared by the threads, or whole images per thread)."""
    x = rng.standard_normal((N, 13, 11, 40)).astype(np.float32)
    w = rng.standard_normal((70, 40, 3, 3)).astype(np.float32)
    y = conv2d(x, w, padding=1, data_format="NHWC", algorithm="yaconv")
    old = pytpp.get_num_threads()
    try:
        pytpp.set_num_threads(1)
        y1 = conv2d(x, w, padding=1, data_format="NHWC", algorithm="yaconv")
    finally:
        pytpp.set_num_threads(old)
    np.testing.assert_array_equal(y, y1)
    ref, absref = reference(x.transpose(0, 3, 1, 2), w, None, 1, None)
    assert_within(y.transpose(0, 3, 1, 2), ref, absref, 40 * 9, EPS[np.dtype(np.float32)])


def test_strided_fortran_input_out_and_packed_weight(isa, rng):
    base = rng.standard_normal((2, 15, 22, 9)).astype(np.float32)
    xv = base[:, 1:14, ::2, :]                       # NHWC view, strided rows and pixels
    xf = np.asfortranarray(xv)
    w = rng.standard_normal((17, 9, 3, 2)).astype(np.float32)
    b = rng.standard_normal(17).astype(np.float32)
    ref, absref = reference(xv.transpose(0, 3, 1, 2), w, b, (2, 1), "relu")
    xr = base[:, ::-1].copy()[:, ::-1][:, 1:14, ::2]  # a negative row stride, xv's values
    for xin in (xv, xf, xr):
        y = conv2d(xin, w, b, padding=(2, 1), data_format="NHWC", activation="relu",
                   algorithm="yaconv")
        assert_within(y.transpose(0, 3, 1, 2), ref, absref, 9 * 6, EPS[np.dtype(np.float32)])
    out = np.full(y.shape, np.nan, np.float32)
    r = conv2d(xv, PackedConvWeight(w), b, padding=(2, 1), data_format="NHWC",
               activation="relu", algorithm="yaconv", out=out)
    assert r is out
    np.testing.assert_array_equal(out, y)
    outc = np.empty((2, 17, 15, 12), np.float64)     # NCHW, another dtype: cast on the way out
    conv2d(xv.transpose(0, 3, 1, 2), w, b, padding=(2, 1), activation="relu",
           algorithm="yaconv", out=outc)
    np.testing.assert_allclose(outc, y.transpose(0, 3, 1, 2), rtol=0, atol=0)
    out32 = np.full((2, 17, 15, 12), np.nan, np.float32)      # NCHW, the compute dtype
    r = conv2d(xv.transpose(0, 3, 1, 2), w, b, padding=(2, 1), activation="relu",
               algorithm="yaconv", out=out32)
    assert r is out32
    np.testing.assert_array_equal(out32, y.transpose(0, 3, 1, 2))


def test_agrees_with_brgemm_and_bfloat16_widens(rng):
    x = rng.standard_normal((1, 20, 7, 7)).astype(np.float32)
    w = rng.standard_normal((30, 20, 3, 3)).astype(np.float32)
    ya = conv2d(x, w, padding="same", algorithm="yaconv")
    np.testing.assert_allclose(ya, conv2d(x, w, padding="same", algorithm="brgemm"),
                               rtol=1e-5, atol=1e-4)
    import ml_dtypes
    xb, wb = x.astype(ml_dtypes.bfloat16), w.astype(ml_dtypes.bfloat16)
    yb = conv2d(xb, wb, padding="same", algorithm="yaconv")
    assert yb.dtype == xb.dtype
    np.testing.assert_array_equal(
        yb.view(np.uint16),
        conv2d(xb.astype(np.float32), wb.astype(np.float32), padding="same",
               algorithm="yaconv").astype(
            xb.dtype).view(np.uint16))


def test_zero_sizes(rng):
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    assert conv2d(np.zeros((0, 3, 5, 5), np.float32), w, algorithm="yaconv").shape == (0, 4, 3, 3)
    y = conv2d(np.zeros((1, 0, 5, 5), np.float32), np.zeros((4, 0, 3, 3), np.float32),
               np.arange(4, dtype=np.float32), algorithm="yaconv")
    np.testing.assert_array_equal(y, np.broadcast_to(np.arange(4.0)[:, None, None], (1, 4, 3, 3)))


UNSUPPORTED = [  # (kwargs changes, the argument the message must name)
    ({"stride": 2}, "stride"),
    ({"stride": (1, 2)}, "stride"),
    ({"dilation": 2}, "dilation"),
    ({"groups": 3, "w": np.ones((6, 1, 3, 3), np.float32)}, "groups"),
    ({"w": np.ones((6, 3, 1, 1), np.float32)}, "w"),
]


@pytest.mark.parametrize("change,name", UNSUPPORTED)
def test_unsupported_arguments_raise_before_writing(change, name):
    kw = {"x": np.ones((1, 3, 8, 8), np.float32), "w": np.ones((6, 3, 3, 3), np.float32),
          "padding": 1, "algorithm": "yaconv"}
    kw.update(change)
    x, w = kw.pop("x"), kw.pop("w")
    shape = conv2d(x, w, **{**kw, "algorithm": "brgemm"}).shape
    out = np.full(shape, 7, np.float32)
    with pytest.raises(ValueError, match=rf"pytpp\.nn\.conv2d: algorithm='yaconv'.*{name}="):
        conv2d(x, w, out=out, **kw)
    assert (out == 7).all()


def test_auto_runs_brgemm(rng):
    """The rule in pytpp/nn/_conv.py: "auto" is "brgemm" (same bits), also on the short, wide
    layers YaConv was written for."""
    for C, H, K in [(64, 9, 8), (160, 7, 136)]:
        x = rng.standard_normal((2, C, H, H)).astype(np.float32)
        w = rng.standard_normal((K, C, 3, 3)).astype(np.float32)
        for fmt in ("NCHW", "NHWC"):
            xf = x if fmt == "NCHW" else np.ascontiguousarray(x.transpose(0, 2, 3, 1))
            np.testing.assert_array_equal(
                conv2d(xf, w, padding=1, data_format=fmt),
                conv2d(xf, w, padding=1, data_format=fmt, algorithm="brgemm"))
