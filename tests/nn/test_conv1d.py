"""conv1d and its backward functions against the float64 reference (as a 1 x S conv2d, which
conv_reference computes by direct sums) and torch; the bound is test_conv.py's."""
import numpy as np
import pytest
from conv_reference import conv2d_backward_ref, conv2d_ref, pads_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytpp.nn import conv1d, conv1d_backward_data, conv1d_backward_weight

EPS32 = float(np.finfo(np.float32).eps)


def within(got, ref, absref, n):
    assert np.all(np.abs(got - ref) <= (n + 2) * EPS32 * absref + 8 * EPS32 * np.abs(ref) + 1e-300)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(C=st.integers(1, 17), K=st.integers(1, 17), S=st.integers(1, 9), d=st.integers(1, 8),
       stride=st.integers(1, 3), pad=st.sampled_from([0, 1, 4, "same", "valid"]),
       W=st.integers(1, 1500), seed=st.integers(0, 999), bias=st.booleans())
def test_conv1d_matches_reference(isa, C, K, S, d, stride, pad, W, seed, bias):
    if pad == "same":
        stride = 1
    _, _, pl, pr = pads_of(pad if isinstance(pad, str) else (0, pad), 1, S, (1, d), (1, stride))
    W = max(W, d * (S - 1) + 1 - pl - pr)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, C, W)).astype(np.float32)
    w = rng.standard_normal((K, C, S)).astype(np.float32)
    b = rng.standard_normal(K).astype(np.float32) if bias else None
    args = ((1, stride), (0, 0, pl, pr), (1, d), 1)
    ref = conv2d_ref(x[:, :, None], w[:, :, None], b, *args)[:, :, 0]
    absref = conv2d_ref(x[:, :, None], w[:, :, None], b, *args, absolute=True)[:, :, 0]
    y = conv1d(x, w, b, stride, pad, d)
    within(y, ref, absref, C * S)
    go = rng.standard_normal(y.shape).astype(np.float32)
    gx_r, gw_r, gb_r = conv2d_backward_ref(go[:, :, None], x[:, :, None], w[:, :, None], *args)
    gx_a, gw_a, gb_a = conv2d_backward_ref(go[:, :, None], x[:, :, None], w[:, :, None], *args,
                                           absolute=True)
    within(conv1d_backward_data(go, w, x.shape, stride, pad, d), gx_r[:, :, 0], gx_a[:, :, 0],
           K * S)
    gw, gb = conv1d_backward_weight(go, x, w.shape, stride, pad, d)
    within(gw, gw_r[:, :, 0], gw_a[:, :, 0], go.shape[0] * go.shape[2])
    within(gb, gb_r, gb_a, go.shape[0] * go.shape[2])


def test_conv1d_atacworks_shape_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 15, 6040)).astype(np.float32)
    w = rng.standard_normal((15, 15, 51)).astype(np.float32)
    b = rng.standard_normal(15).astype(np.float32)
    ref = torch.nn.functional.conv1d(torch.from_numpy(x).double(), torch.from_numpy(w).double(),
                                     torch.from_numpy(b).double(), 1, "same", 8)
    y = conv1d(x, w, b, padding="same", dilation=8, activation="relu")
    np.testing.assert_allclose(y, torch.relu(ref).numpy(), rtol=1e-5, atol=1e-4)
    out = np.empty_like(y)
    assert conv1d(x, w, b, padding="same", dilation=8, activation="relu", out=out) is out
    np.testing.assert_array_equal(out, y)
    # backward: long rows are cut into 512-pixel batch entries (the last one 408 here)
    tx = torch.from_numpy(x).double().requires_grad_(True)
    tw = torch.from_numpy(w).double().requires_grad_(True)
    tz = torch.nn.functional.conv1d(tx, tw, None, 1, "same", 8)
    go = rng.standard_normal(tz.shape).astype(np.float32)
    gx, gw = torch.autograd.grad(tz, (tx, tw), torch.from_numpy(go).double())
    np.testing.assert_allclose(conv1d_backward_data(go, w, x.shape, 1, "same", 8), gx.numpy(),
                               rtol=1e-5, atol=1e-4)
    pw, pb = conv1d_backward_weight(go, x, w.shape, 1, "same", 8)
    np.testing.assert_allclose(pw, gw.numpy(), rtol=1e-5, atol=2e-3)
    np.testing.assert_allclose(pb, go.sum(axis=(0, 2), dtype=np.float64), rtol=1e-5, atol=1e-3)


def test_conv1d_bad_arguments():
    x = np.ones((1, 3, 10), np.float32)
    with pytest.raises(ValueError, match="x must be"):
        conv1d(np.ones((3, 10), np.float32), np.ones((2, 3, 3), np.float32))
    with pytest.raises(ValueError, match="w must be"):
        conv1d(x, np.ones((2, 3, 3, 1), np.float32))
    with pytest.raises(ValueError, match="dilation"):
        conv1d(x, np.ones((2, 3, 3), np.float32), dilation=0)
    with pytest.raises(ValueError, match="larger"):
        conv1d(x, np.ones((2, 3, 4), np.float32), dilation=4)
