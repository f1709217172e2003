"""pytpp.nn activations, softmax and dropout against float64 numpy/scipy references.

Tolerances: float32 exact forms are within the bounds of tests/tpp/test_eltwise_approx.py
(a few ulp: rtol 2e-6 + atol 1e-6 covers them), float64 within 1e-12, bfloat16 results are the
float32 result rounded once (rtol 2^-8)."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import erfc, expit
from scipy.special import softmax as sp_softmax

import pytpp
from pytpp import nn

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.float32, np.float64, BF16]


def tol(dtype):
    return {np.dtype(np.float32): (2e-6, 1e-6), np.dtype(np.float64): (1e-12, 1e-300),
            BF16: (2 ** -7, 1e-6)}[np.dtype(dtype)]


def gelu_ref(x):
    return 0.5 * x * erfc(-x / np.sqrt(2))


def gelu_tanh_ref(x):
    # 0.5 x (1 + tanh(u)) == x expit(2u), without the cancellation of 1 + tanh(u) for x < 0
    return x * expit(2 * np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))


FORWARD = {
    "relu": (nn.relu, lambda x: np.maximum(x, 0)),
    "exp": (nn.exp, np.exp),
    "tanh": (nn.tanh, np.tanh),
    "sigmoid": (nn.sigmoid, expit),
    "gelu": (nn.gelu, gelu_ref),
    "gelu_tanh": (lambda x, **kw: nn.gelu(x, "tanh", **kw), gelu_tanh_ref),
}


def layouts(rng, dtype):
    """Contiguous, odd shapes, transposed, Fortran, negative strides, strided slices, 0-d."""
    base = rng.standard_normal((6, 7, 9)) * 3
    yield base.astype(dtype)
    yield rng.standard_normal(65).astype(dtype)
    yield base.astype(dtype).transpose(2, 0, 1)
    yield np.asfortranarray(base.astype(dtype))
    yield base.astype(dtype)[::-1, :, ::2]
    yield base.astype(dtype)[:, 1:5, :]
    yield base.astype(dtype)[::2, ::-1]
    yield np.zeros((0, 3), dtype)
    yield np.array(1.5, dtype)


@pytest.mark.parametrize("name", list(FORWARD))
@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_layouts(isa, rng, name, dtype):
    f, ref = FORWARD[name]
    rtol, atol = tol(dtype)
    for x in layouts(rng, dtype):
        y = f(x)
        assert y.shape == x.shape and y.dtype == x.dtype
        want = ref(x.astype(np.float64))
        if np.dtype(dtype) == BF16:
            want = want.astype(np.float32)
        np.testing.assert_allclose(y.astype(np.float64), want, rtol=rtol, atol=atol * max(1, np.abs(want).max(initial=0)))


@pytest.mark.parametrize("name", ["exp", "tanh", "sigmoid", "gelu", "gelu_tanh"])
def test_forward_approx(isa, rng, name):
    f, ref = FORWARD[name]
    x = (rng.standard_normal((33, 65)) * 4).astype(np.float32)
    y = f(x, approx=True)
    want = ref(x.astype(np.float64))
    if name == "exp":
        np.testing.assert_allclose(y, want, rtol=8e-6)
    else:
        np.testing.assert_allclose(y, want, atol=1e-4, rtol=3e-3)


def test_sigmoid_approx_choices(isa, rng):
    """approx=True is the sigmoid from the approximate exp, 'pade' the one through the Pade tanh:
    the same bits as the kernel handles; no 'minimax' sigmoid."""
    x = (rng.standard_normal((7, 33)) * 6).astype(np.float32)
    for approx in (True, "pade"):
        want = np.empty_like(x)
        pytpp.tpp.unary("sigmoid", 7, 33, np.float32, approx=approx)(x, want)
        np.testing.assert_array_equal(nn.sigmoid(x, approx=approx), want)
    assert not np.array_equal(nn.sigmoid(x, approx=True), nn.sigmoid(x, approx="pade"))
    # the exp form saturates exactly and keeps the relative accuracy of the exp in the tail
    t = np.array([-30.0, -12.0, 0.0, 12.0, 30.0, np.inf, -np.inf], np.float32)
    y = nn.sigmoid(t, approx=True)
    assert abs(y[2] - 0.5) < 1e-6 and y[4] == 1.0 and y[5] == 1.0 and 0 <= y[6] < 1e-37
    np.testing.assert_allclose(y[:2], expit(t[:2].astype(np.float64)), rtol=4e-6)
    with pytest.raises(ValueError, match="approx"):
        nn.sigmoid(x, approx="minimax")


@pytest.mark.parametrize("name", list(FORWARD))
def test_out_and_in_place(isa, rng, name):
    f, ref = FORWARD[name]
    x = rng.standard_normal((17, 33)).astype(np.float32)
    want = f(x.copy())
    out = np.empty_like(x)
    assert f(x, out=out) is out
    np.testing.assert_array_equal(out, want)
    # strided out
    big = np.zeros((17, 66), np.float32)
    f(x, out=big[:, ::2])
    np.testing.assert_array_equal(big[:, ::2], want)
    assert (big[:, 1::2] == 0).all()
    # in place
    x2 = x.copy()
    assert f(x2, out=x2) is x2
    np.testing.assert_array_equal(x2, want)


def test_threads_large(threads, rng):
    x = rng.standard_normal((300, 1001)).astype(np.float32)
    np.testing.assert_allclose(nn.tanh(x), np.tanh(x.astype(np.float64)), rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(nn.softmax(x), sp_softmax(x.astype(np.float64), axis=-1), rtol=1e-5)
    row = rng.standard_normal(200_001).astype(np.float32)   # one long row split by columns
    np.testing.assert_allclose(nn.gelu(row), gelu_ref(row.astype(np.float64)), rtol=2e-6, atol=1e-6)


# ---- backward ----------------------------------------------------------------------------------
def numeric_grad(f, x, h=1e-6):
    return (f(x + h) - f(x - h)) / (2 * h)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_backward(isa, rng, dtype):
    x = rng.standard_normal((7, 65)) * 3
    g = rng.standard_normal((7, 65))
    xd, gd = x.astype(dtype), g.astype(dtype)
    rtol = 2e-5 if dtype == np.float32 else 1e-7
    xs, gs = xd.astype(np.float64), gd.astype(np.float64)
    np.testing.assert_allclose(nn.relu_backward(gd, xd), gs * (xs > 0), rtol=rtol)
    y = np.tanh(xs).astype(dtype)
    np.testing.assert_allclose(nn.tanh_backward(gd, y), gs * (1 - y.astype(np.float64) ** 2),
                               rtol=rtol, atol=1e-6)
    y = expit(xs).astype(dtype)
    np.testing.assert_allclose(nn.sigmoid_backward(gd, y),
                               gs * y.astype(np.float64) * (1 - y.astype(np.float64)),
                               rtol=rtol, atol=1e-6)
    np.testing.assert_allclose(nn.exp_backward(gd, y), gs * y.astype(np.float64), rtol=rtol)
    np.testing.assert_allclose(nn.gelu_backward(gd, xd), gs * numeric_grad(gelu_ref, xs),
                               rtol=max(rtol, 1e-6), atol=1e-6)
    np.testing.assert_allclose(nn.gelu_backward(gd, xd, "tanh"),
                               gs * numeric_grad(gelu_tanh_ref, xs), rtol=max(rtol, 1e-6), atol=1e-6)


def test_backward_bf16(rng):
    x = rng.standard_normal(100).astype(BF16)
    g = np.ones(100, BF16)
    got = nn.gelu_backward(g, x)
    assert got.dtype == BF16
    np.testing.assert_allclose(got.astype(np.float64), numeric_grad(gelu_ref, x.astype(np.float64)),
                               rtol=2 ** -7, atol=1e-3)


# ---- softmax -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axis", [((4096 // 64, 1024), -1), ((7, 17), 0), ((3, 5, 33), 1),
                                        ((1,), 0), ((5, 63), -1), ((2, 3, 65), -1)])
def test_softmax(isa, rng, dtype, shape, axis):
    x = (rng.standard_normal(shape) * 5).astype(dtype)
    y = nn.softmax(x, axis=axis)
    want = sp_softmax(x.astype(np.float64), axis=axis)
    # float32: x - max is rounded (|x - max| up to ~40 here: 40 * 2^-24 relative in exp)
    rtol = {np.dtype(np.float32): 5e-6, np.dtype(np.float64): 1e-12, BF16: 2 ** -7}[np.dtype(dtype)]
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=rtol, atol=1e-30)
    ya = nn.softmax(x, axis=axis, approx=True)
    np.testing.assert_allclose(ya.astype(np.float64), want, rtol=max(rtol, 1.5e-5), atol=1e-30)


def test_softmax_layouts_and_edge(isa, rng):
    x = rng.standard_normal((8, 12))
    for v in (x.T, x[::-1, ::2], np.asfortranarray(x)):
        np.testing.assert_allclose(nn.softmax(v), sp_softmax(v, axis=-1), rtol=1e-12)
        np.testing.assert_allclose(nn.softmax(v, axis=0), sp_softmax(v, axis=0), rtol=1e-12)
    big = np.array([[1000.0, 1000.0], [-np.inf, 0.0]], np.float32)
    np.testing.assert_allclose(nn.softmax(big), [[0.5, 0.5], [0.0, 1.0]])
    # float64 rows (the vector exp): huge, -inf, NaN and +inf entries, a row of only -inf
    edge = np.array([[1e300, 1e300, 0.0], [-np.inf, 0.0, 1.0], [1.0, np.nan, 2.0],
                     [np.inf, 1.0, 2.0], [-np.inf] * 3, [-800.0, -800.0, -1e4]])
    with np.errstate(invalid="ignore"):
        want = sp_softmax(edge, axis=-1)
    np.testing.assert_allclose(nn.softmax(edge), want, rtol=1e-12, atol=1e-300, equal_nan=True)
    out = np.empty_like(x)
    assert nn.softmax(x, out=out) is out
    x2 = x.copy()
    nn.softmax(x2, out=x2)
    np.testing.assert_allclose(x2, sp_softmax(x, axis=-1), rtol=1e-12)
    g = rng.standard_normal((8, 12))
    y = sp_softmax(x, axis=-1)
    jac = np.einsum("ij,ik->ijk", -y, y) + np.einsum("ij,jk->ijk", y, np.eye(12))
    np.testing.assert_allclose(nn.softmax_backward(g, y), np.einsum("ij,ijk->ik", g, jac), rtol=1e-10,
                               atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=3), st.integers(0, 2))
def test_softmax_hypothesis(shape, axis):
    axis = axis % len(shape)
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(nn.softmax(x, axis=axis), sp_softmax(x.astype(np.float64), axis=axis),
                               rtol=3e-6, atol=1e-30)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 30), min_size=1, max_size=4), st.sampled_from(["tanh", "gelu", "relu"]))
def test_activation_hypothesis(shape, name):
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    if x.ndim > 1:
        x = x.swapaxes(0, -1)
    f, ref = FORWARD[name]
    np.testing.assert_allclose(f(x), ref(x.astype(np.float64)), rtol=2e-6, atol=1e-6)


# ---- dropout -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_dropout(isa, threads, dtype):
    x = np.random.default_rng(0).standard_normal((64, 1001)).astype(dtype)
    y1, m1 = nn.dropout(x, 0.25, seed=7, return_mask=True)
    y2, m2 = nn.dropout(x, 0.25, seed=7, return_mask=True)
    np.testing.assert_array_equal(m1, m2)
    np.testing.assert_array_equal(y1.astype(np.float64), y2.astype(np.float64))
    keep = np.unpackbits(m1, bitorder="little")[:x.size].reshape(x.shape).astype(bool)
    assert abs(keep.mean() - 0.75) < 0.01
    rt = 2 ** -7 if np.dtype(dtype) == BF16 else 1e-6
    np.testing.assert_allclose(y1.astype(np.float64), np.where(keep, x.astype(np.float64) / 0.75, 0),
                               rtol=rt)
    g = nn.dropout_backward(np.ones_like(x), m1, 0.25)
    np.testing.assert_allclose(g.astype(np.float64), np.where(keep, 1 / 0.75, 0), rtol=rt)


def test_dropout_layout_independent(rng):
    x = rng.standard_normal((30, 40))
    a = nn.dropout(x, 0.5, seed=1)
    b = nn.dropout(np.asfortranarray(x), 0.5, seed=1)
    np.testing.assert_array_equal(a, b)
    out = np.zeros((30, 80))
    nn.dropout(x, 0.5, seed=1, out=out[:, ::2])
    np.testing.assert_array_equal(out[:, ::2], a)
    assert nn.dropout(x, 0.5, training=False) is not x
    np.testing.assert_array_equal(nn.dropout(x, 0.5, training=False), x)


# ---- errors ----------------------------------------------------------------------------------------
def test_errors():
    with pytest.raises(TypeError, match="pytpp.nn.relu: x has dtype complex128"):
        nn.relu(np.zeros(3, complex))
    with pytest.raises(ValueError, match="approximate must be"):
        nn.gelu(np.zeros(3), approximate="erf")
    with pytest.raises(ValueError, match="approx must be"):
        nn.exp(np.zeros(3), approx="pade")
    with pytest.raises(ValueError, match="out has shape"):
        nn.tanh(np.zeros(3), out=np.zeros(4))
    with pytest.raises(TypeError, match="cannot write a float64 result into out of dtype int64"):
        nn.tanh(np.zeros(3), out=np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="axis 2 is out of bounds"):
        nn.softmax(np.zeros((2, 2)), axis=2)
    with pytest.raises(ValueError, match="p must be"):
        nn.dropout(np.zeros(3), p=1.0)
    with pytest.raises(ValueError, match="mask must be"):
        nn.dropout_backward(np.zeros(30), np.zeros(1, np.uint8), 0.5)
    with pytest.raises(ValueError, match="grad has shape"):
        nn.relu_backward(np.zeros(3), np.zeros(4))
    # integers are promoted like numpy's float functions
    np.testing.assert_array_equal(nn.relu(np.array([-1, 2])), [0.0, 2.0])


def test_exported():
    for name in ("relu", "gelu", "tanh", "sigmoid", "exp", "softmax", "dropout", "gelu_backward"):
        assert hasattr(pytpp.nn, name)
