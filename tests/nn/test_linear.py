"""linear / linear_backward / PackedLinear against float64 references at every ISA level.

Tolerances: each output is a k-term dot product (error ~ k * eps * sum|x||w|, blocked: we allow
4 k eps times the magnitude of the product) followed by a few element-wise operations whose
float32 forms are within a few ulps (gelu exact erf: 2 ulp, see docs/eltwise.md)."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pytpp

BF16 = np.dtype(ml_dtypes.bfloat16)


def act_ref(name, z):
    from scipy import special
    if name is None:
        return z
    if name == "relu":
        return np.maximum(z, 0)
    if name == "gelu":
        return 0.5 * z * (1 + special.erf(z / np.sqrt(2)))
    if name == "gelu_tanh":
        return 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z ** 3)))
    if name == "sigmoid":
        return 1 / (1 + np.exp(-z))
    return np.tanh(z)


def bound(dtype, k, x, w):
    eps = np.finfo(dtype).eps
    mag = np.abs(x.astype(np.float64)) @ np.abs(w.astype(np.float64)).T
    return 4 * max(k, 1) * eps * max(1.0, mag.max(initial=0.0)) + 8 * eps


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (7, 17, 33), (63, 64, 65), (130, 200, 300)])
@pytest.mark.parametrize("act", [None, "relu", "gelu", "gelu_tanh", "sigmoid", "tanh"])
def test_linear_forward(isa, threads, rng, dtype, m, k, n, act):
    x = rng.standard_normal((m, k)).astype(dtype)
    w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    r = rng.standard_normal((m, n)).astype(dtype)
    r0 = r.copy()
    y = pytpp.nn.linear(x, w, b, activation=act, residual=r)
    z = x.astype(np.float64) @ w.astype(np.float64).T + b
    ref = act_ref(act, z) + r0
    assert y.dtype == dtype and y.shape == (m, n)
    np.testing.assert_allclose(y, ref, rtol=0, atol=bound(dtype, k, x, w) * 2)
    np.testing.assert_array_equal(r, r0)                # the residual is never modified


def test_leading_dims_broadcast_residual_and_out(rng):
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    w = rng.standard_normal((5, 8)).astype(np.float32)
    res = rng.standard_normal(5).astype(np.float32)        # broadcast over rows
    out = np.empty((2, 3, 5), np.float32)
    y = pytpp.nn.linear(x, w, None, activation="tanh", residual=res, out=out)
    assert y is out
    ref = np.tanh(x.astype(np.float64) @ w.T.astype(np.float64)) + res
    np.testing.assert_allclose(out, ref, atol=1e-5)
    out64 = np.empty((2, 3, 5))
    assert pytpp.nn.linear(x, w, out=out64) is out64
    np.testing.assert_allclose(out64, x @ w.T, atol=1e-5)
    xt = np.asfortranarray(rng.standard_normal((9, 4)))    # Fortran order, a transposed w view
    wt = np.ascontiguousarray(rng.standard_normal((4, 6))).T
    np.testing.assert_allclose(pytpp.nn.linear(xt, wt), xt @ wt.T, atol=1e-12)


def test_bfloat16_and_zero_size(rng):
    x = rng.standard_normal((4, 16)).astype(BF16)
    w = rng.standard_normal((8, 16)).astype(BF16)
    y = pytpp.nn.linear(x, w, activation="relu")
    assert y.dtype == BF16
    ref = np.maximum(x.astype(np.float64) @ w.astype(np.float64).T, 0)
    np.testing.assert_allclose(y.astype(np.float64), ref, rtol=2 ** -7, atol=1e-6)
    assert pytpp.nn.linear(np.zeros((0, 3)), np.ones((2, 3))).shape == (0, 2)
    y = pytpp.nn.linear(np.zeros((2, 0)), np.ones((3, 0)), np.ones(3), activation="relu")
    np.testing.assert_array_equal(y, np.ones((2, 3)))       # k = 0: act(bias)


@pytest.mark.parametrize("act", [None, "relu", "gelu", "gelu_tanh", "sigmoid", "tanh"])
def test_linear_backward_matches_torch(rng, act):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((2, 5, 12))
    w = rng.standard_normal((7, 12))
    b = rng.standard_normal(7)
    g = rng.standard_normal((2, 5, 7))
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    z = torch.nn.functional.linear(xt, wt, bt)
    f = {None: lambda t: t, "relu": torch.relu, "gelu": torch.nn.functional.gelu,
         "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
         "sigmoid": torch.sigmoid, "tanh": torch.tanh}[act]
    f(z).backward(torch.tensor(g))
    pre = pytpp.nn.linear(x, w, b)
    gx, gw, gb = pytpp.nn.linear_backward(g, x, w, activation=act,
                                          pre_activation=pre if act else None)
    for ours, theirs in ((gx, xt.grad), (gw, wt.grad), (gb, bt.grad)):
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-10, atol=1e-10)


def test_packed_linear_equals_linear(isa, rng):
    w = rng.standard_normal((33, 20)).astype(np.float32)
    b = rng.standard_normal(33).astype(np.float32)
    pl = pytpp.nn.PackedLinear(w, b)
    for m in (1, 7, 100):
        x = rng.standard_normal((m, 20)).astype(np.float32)
        r = rng.standard_normal((m, 33)).astype(np.float32)
        np.testing.assert_allclose(pl(x, activation="gelu", residual=r),
                                   pytpp.nn.linear(x, w, b, activation="gelu", residual=r),
                                   rtol=0, atol=1e-5)


@settings(max_examples=30, deadline=None)
@given(m=st.integers(0, 40), k=st.integers(0, 40), n=st.integers(1, 40),
       seed=st.integers(0, 2**32 - 1))
def test_hypothesis_shapes(m, k, n, seed):
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal((m, k)), rng.standard_normal((n, k))
    b = rng.standard_normal(n)
    np.testing.assert_allclose(pytpp.nn.linear(x, w, b, activation="relu"),
                               np.maximum(x @ w.T + b, 0), atol=1e-10)


@pytest.mark.parametrize("call, exc, match", [
    (lambda x, w: pytpp.nn.linear(x, w[:, :3]), ValueError, "features"),
    (lambda x, w: pytpp.nn.linear(x, w[0]), ValueError, "2-D"),
    (lambda x, w: pytpp.nn.linear(x, w, np.ones(3)), ValueError, "bias has shape"),
    (lambda x, w: pytpp.nn.linear(x, w, activation="swish"), ValueError, "activation"),
    (lambda x, w: pytpp.nn.linear(x, w, residual=np.ones((3, 3))), ValueError, "broadcast"),
    (lambda x, w: pytpp.nn.linear(x, w, out=np.zeros((2, 5))), ValueError, "out has shape"),
    (lambda x, w: pytpp.nn.linear(x, w, out=np.zeros((2, 6), np.int32)), TypeError, "cannot write"),
    (lambda x, w: pytpp.nn.linear(x.astype(complex), w), TypeError, "complex"),
    (lambda x, w: pytpp.nn.linear_backward(np.ones((2, 6)), x, w, activation="relu"), ValueError,
     "pre_activation"),
])
def test_bad_input(call, exc, match):
    x, w = np.ones((2, 4)), np.ones((6, 4))
    with pytest.raises(exc, match=match):
        call(x, w)
