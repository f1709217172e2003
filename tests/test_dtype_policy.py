"""The one dtype / byte-order / out= policy (pytpp/_validate.py), applied by every public function
that takes ``out=``: non-native byte order computes right, an ``out`` that partially overlaps an
input gives numpy's answer, results follow numpy's promotion, ``out`` casts same_kind."""
import math

import ml_dtypes
import numpy as np
import pytest
from scipy import special

import pytpp

BF16 = np.dtype(ml_dtypes.bfloat16)
SQRT1_2 = 1.0 / math.sqrt(2.0)


def _gelu(x):
    return x * 0.5 * (1.0 + special.erf(x * SQRT1_2))


def _gelu_grad(g, x):
    return g * (0.5 * (1.0 + special.erf(x * SQRT1_2)) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi))


def _softmax_grad(g, y):
    return y * (g - (g * y).sum(axis=-1, keepdims=True))


# name -> (call(inputs, out), number of array inputs, float64 reference of the inputs)
UNARY = {
    "relu": (lambda x, out=None: pytpp.nn.relu(x, out=out), lambda x: np.maximum(x, 0)),
    "exp": (lambda x, out=None: pytpp.nn.exp(x, out=out), np.exp),
    "tanh": (lambda x, out=None: pytpp.nn.tanh(x, out=out), np.tanh),
    "sigmoid": (lambda x, out=None: pytpp.nn.sigmoid(x, out=out), lambda x: 1 / (1 + np.exp(-x))),
    "gelu": (lambda x, out=None: pytpp.nn.gelu(x, out=out), _gelu),
    "softmax": (lambda x, out=None: pytpp.nn.softmax(x, out=out), special.softmax),
}
BINARY = {
    "relu_backward": (lambda g, x, out=None: pytpp.nn.relu_backward(g, x, out=out),
                      lambda g, x: g * (x > 0)),
    "tanh_backward": (lambda g, y, out=None: pytpp.nn.tanh_backward(g, y, out=out),
                      lambda g, y: g * (1 - y * y)),
    "sigmoid_backward": (lambda g, y, out=None: pytpp.nn.sigmoid_backward(g, y, out=out),
                         lambda g, y: g * y * (1 - y)),
    "exp_backward": (lambda g, y, out=None: pytpp.nn.exp_backward(g, y, out=out),
                     lambda g, y: g * y),
    "gelu_backward": (lambda g, x, out=None: pytpp.nn.gelu_backward(g, x, out=out), _gelu_grad),
    "softmax_backward": (lambda g, y, out=None: pytpp.nn.softmax_backward(g, y, out=out),
                         _softmax_grad),
    "matmul": (lambda a, b, out=None: pytpp.matmul(a, b, out=out), lambda a, b: a @ b),
}


def _inputs(rng, n, count):
    return [rng.uniform(-2, 2, n) for _ in range(count)]


# float64 results of element-wise kernels are within a few ulp; 1e-12 relative is ample
TOL = dict(rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("order", [">", "<"])
def test_unary_byte_order(name, order, rng):
    fn, ref = UNARY[name]
    x = rng.uniform(-2, 2, 37)
    xs = x.astype(np.dtype(np.float64).newbyteorder(order))
    np.testing.assert_allclose(fn(xs), ref(x), **TOL)
    out = np.empty(37, np.dtype(np.float64).newbyteorder(order))
    assert fn(xs, out=out) is out
    np.testing.assert_allclose(out, ref(x), **TOL)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_byte_order(name, rng):
    fn, ref = BINARY[name]
    shape = (7, 7) if name == "matmul" else (37,)
    g, x = rng.uniform(-2, 2, shape), rng.uniform(-2, 2, shape)
    big = np.dtype(">f8")
    np.testing.assert_allclose(fn(g.astype(big), x.astype(big)), ref(g, x), **TOL)
    out = np.empty(shape, np.dtype(">f4"))
    fn(g.astype(big), x, out=out)
    np.testing.assert_allclose(out, ref(g, x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("shift", [1, -1, 5])
def test_unary_out_partially_overlapping_input(name, shift, rng):
    fn, ref = UNARY[name]
    z = rng.uniform(-2, 2, 1001)
    n = 1001 - abs(shift)
    x = z[:n] if shift > 0 else z[-n:]
    out = z[shift:shift + n] if shift > 0 else z[:n]
    expect = ref(x.copy())
    fn(x, out=out)
    np.testing.assert_allclose(out, expect, **TOL)


def test_softmax_issue_example():
    z = np.zeros(1001)
    pytpp.nn.softmax(z[:-1], out=z[1:])
    np.testing.assert_allclose(z[1:], 1e-3, rtol=1e-12)


@pytest.mark.parametrize("name", sorted(n for n in BINARY if n != "matmul"))
@pytest.mark.parametrize("which", [0, 1])
def test_binary_out_partially_overlapping_input(name, which, rng):
    fn, ref = BINARY[name]
    z = rng.uniform(-2, 2, 1001)
    other = rng.uniform(-2, 2, 1000)
    shifted = z[:-1]
    args = [shifted, other] if which == 0 else [other, shifted]
    expect = ref(*[a.copy() for a in args])
    fn(*args, out=z[1:])
    np.testing.assert_allclose(z[1:], expect, **TOL)


def test_in_place_is_allowed(rng):
    x = rng.uniform(-2, 2, (5, 7))
    expect = special.softmax(x, axis=-1)
    assert pytpp.nn.softmax(x, out=x) is x
    np.testing.assert_allclose(x, expect, **TOL)
    g = rng.uniform(-2, 2, 9)
    y = rng.uniform(-2, 2, 9)
    expect = g * (1 - y * y)
    pytpp.nn.tanh_backward(g, y, out=g)
    np.testing.assert_allclose(g, expect, **TOL)


def test_dropout_shifted_out(rng):
    z = rng.uniform(1, 2, 1001)
    x = z[:-1].copy()
    expect, mask = pytpp.nn.dropout(x, 0.3, seed=11, return_mask=True)
    pytpp.nn.dropout(z[:-1], 0.3, seed=11, out=z[1:])
    np.testing.assert_array_equal(z[1:], expect)
    g = rng.uniform(1, 2, 1001)
    gx = g[:-1].copy()
    expect = pytpp.nn.dropout_backward(gx, mask, 0.3)
    pytpp.nn.dropout_backward(g[:-1], mask, 0.3, out=g[1:])
    np.testing.assert_array_equal(g[1:], expect)


def test_brgemm_out_overlaps_inputs():
    z = np.arange(40.0).reshape(10, 2, 2)
    ref = np.einsum("bik,bkj->ij", z[:3].copy(), z[:3].copy())
    pytpp.brgemm(z[:3], z[:3], out=z[1])
    np.testing.assert_array_equal(z[1], ref)
    w = np.arange(60.0).reshape(15, 2, 2)
    a = w[:4]
    ref = np.einsum("bik,bkj->ij", a.copy(), a.copy()) + 2 * a[3].copy()
    pytpp.brgemm(a, a, a[3], beta=2.0, out=w[3])      # c is out, and out is inside a
    np.testing.assert_array_equal(w[3], ref)


def test_matmul_out_overlaps_inputs(rng):
    z = rng.standard_normal((6, 6))
    ref = z[:3, :3] @ z[:3, :3]
    pytpp.matmul(z[:3, :3], z[:3, :3], out=z[1:4, 1:4])
    np.testing.assert_allclose(z[1:4, 1:4], ref, rtol=1e-12, atol=1e-12)


def test_batched_matmul_out_overlaps_inputs(rng):
    z = rng.standard_normal((5, 3, 3))
    ref = z[:4] @ z[:4]
    pytpp.linalg.batched_matmul(z[:4], z[:4], z[1:])
    np.testing.assert_allclose(z[1:], ref, rtol=1e-12, atol=1e-12)


def test_matmul_stack_c_overlapping_a(rng):
    z = rng.standard_normal((4, 3, 3))
    a = z[:2]
    c = z[1:3]
    expect = c.copy()
    expect[0] += a[0].copy() @ a[1].copy()
    pytpp.linalg.matmul_stack(a, a, c, [0], [1], [0])
    np.testing.assert_allclose(c, expect, rtol=1e-12, atol=1e-12)


# ---- byte order of the contractions ---------------------------------------------------------

@pytest.mark.parametrize("dt", [">f8", ">f4"])
def test_brgemm_byte_swapped(dt):
    a = np.ones((2, 2, 2), dt)
    np.testing.assert_array_equal(pytpp.brgemm(a, a), np.full((2, 2), 4.0))
    c = np.ones((2, 2), dt)
    np.testing.assert_array_equal(pytpp.brgemm(a, a, c, beta=1.0), np.full((2, 2), 5.0))
    out = np.zeros((2, 2), dt)
    pytpp.brgemm(a, a, out=out)
    np.testing.assert_array_equal(out, np.full((2, 2), 4.0))


@pytest.mark.parametrize("dt", [">f8", ">f4"])
def test_matmul_pack_stack_byte_swapped(dt, rng):
    a = rng.standard_normal((5, 4))
    b = rng.standard_normal((4, 3))
    tol = dict(rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(pytpp.matmul(a.astype(dt), b.astype(dt)), a @ b, **tol)
    np.testing.assert_allclose(pytpp.matmul(a.astype(dt), pytpp.linalg.pack(b.astype(dt))), a @ b, **tol)
    c = np.zeros((1, 5, 3), dt)
    pytpp.linalg.matmul_stack(a[None].astype(dt), b[None].astype(dt), c, [0], [0], [0])
    np.testing.assert_allclose(c[0], a @ b, **tol)
    out = np.empty((1, 5, 3), dt)
    pytpp.linalg.batched_matmul(a[None].astype(dt), b[None].astype(dt), out)
    np.testing.assert_allclose(out[0], a @ b, **tol)


@pytest.mark.parametrize("make", [
    lambda: (pytpp.tpp.brgemm(2, 2, 2, beta=0.0), lambda k, x, c: k(x, x, c, 1)),
    lambda: (pytpp.tpp.gemm(2, 2, 2, beta=0.0), lambda k, x, c: k(x, x, c)),
    lambda: (pytpp.tpp.gemm(2, 2, 2, beta=0.0), lambda k, x, c: k.stack(x, x, c, 1)),
    lambda: (pytpp.tpp.unary("relu", 2, 2, np.float64), lambda k, x, c: k(x, c)),
])
def test_handles_reject_byte_swapped(make):
    kern, call = make()
    good = np.ones((2, 2))
    for x, c in ((good.astype(">f8"), np.zeros((2, 2))), (good, np.zeros((2, 2), ">f8"))):
        with pytest.raises(ValueError, match="byte order"):
            call(kern, x, c)


# ---- promotion and casting --------------------------------------------------------------------

@pytest.mark.parametrize("name", ["relu", "exp", "tanh", "softmax"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.bool_])
def test_elementwise_integers_compute_in_float64(name, dtype):
    fn, ref = UNARY[name]
    x = np.array([0, 1, 2, 1], dtype)
    res = fn(x)
    assert res.dtype == np.float64
    np.testing.assert_allclose(res, ref(x.astype(np.float64)), **TOL)


@pytest.mark.parametrize("name", ["relu_backward", "tanh_backward", "exp_backward"])
def test_backward_integer_grad_and_input(name):
    fn, ref = BINARY[name]
    g, x = np.array([1, -2, 3]), np.array([2, 0, -1])
    res = fn(g, x)
    assert res.dtype == np.float64
    np.testing.assert_allclose(res, ref(g.astype(float), x.astype(float)))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_float16_returns_float16(name, rng):
    fn, ref = UNARY[name]
    x = rng.uniform(-2, 2, 33).astype(np.float16)
    res = fn(x)
    assert res.dtype == np.float16
    # computed in float32 from the float16 values, rounded once to float16
    np.testing.assert_allclose(res, ref(x.astype(np.float64)), rtol=2e-3, atol=2e-3)


def test_backward_promotes(rng):
    g = rng.uniform(-1, 1, 8).astype(np.float32)
    x = rng.uniform(-1, 1, 8)
    assert pytpp.nn.relu_backward(g, x).dtype == np.float64
    assert pytpp.nn.relu_backward(g, x.astype(BF16)).dtype == np.float32
    assert pytpp.nn.relu_backward(g.astype(BF16), x.astype(BF16)).dtype == BF16


@pytest.mark.parametrize("fn", [      # matmul takes them: tests/linalg/test_matmul_dropin.py
    lambda a, b: pytpp.brgemm(a[None], b[None]),
    lambda a, b: pytpp.linalg.pack(b),
    lambda a, b: pytpp.linalg.matmul_stack(a[None], b[None], np.zeros((1, 2, 2)), [0], [0], [0]),
    lambda a, b: pytpp.linalg.batched_matmul(a[None], b[None], np.zeros((1, 2, 2))),
])
def test_contractions_reject_integers(fn):
    a = np.ones((2, 2), np.int64)
    with pytest.raises(TypeError, match="integer"):
        fn(a, a)


def test_contractions_float16(rng):
    a = rng.standard_normal((4, 5)).astype(np.float16)
    b = rng.standard_normal((5, 3)).astype(np.float16)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    r = pytpp.matmul(a, b)
    assert r.dtype == np.float16
    np.testing.assert_allclose(r, exact, rtol=2e-3, atol=5e-3)
    assert pytpp.matmul(a, b.astype(np.float32)).dtype == np.float32
    s = pytpp.brgemm(a[None], b[None])
    assert s.dtype == np.float16
    np.testing.assert_allclose(s, exact, rtol=2e-3, atol=5e-3)


def test_brgemm_out_same_kind_casting(rng):
    a = rng.standard_normal((3, 4, 5))
    b = rng.standard_normal((3, 5, 2))
    out = np.empty((4, 2), np.float32)
    pytpp.brgemm(a, b, out=out)           # float64 result into float32: same_kind
    np.testing.assert_allclose(out, np.einsum("bik,bkj->ij", a, b), rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match="cannot write"):
        pytpp.brgemm(a, b, out=np.empty((4, 2), np.int64))
    with pytest.raises(TypeError, match="cannot write"):
        pytpp.nn.relu(a, out=np.empty(a.shape, np.int64))


def test_brgemm_c_takes_part_in_promotion(rng):
    a = rng.standard_normal((2, 3, 3)).astype(np.float32)
    c = rng.standard_normal((3, 3))
    r = pytpp.brgemm(a, a, c)
    assert r.dtype == np.float64


def test_matmul_stack_computes_in_promoted_type(rng):
    # float64 blocks into a float32 c: the products are summed in float64, then rounded once
    a = rng.standard_normal((1, 4, 200))
    b = rng.standard_normal((1, 200, 4))
    a[0, 0, 0] = 1e8
    b[0, 0, 0] = 1.0
    a[0, 0, 1] = -1e8
    b[0, 1, 0] = 1.0
    c = np.zeros((1, 4, 4), np.float32)
    pytpp.linalg.matmul_stack(a, b, c, [0, 0], [0, 0], [0, 0])
    expect = (2 * (a[0] @ b[0])).astype(np.float32)
    np.testing.assert_allclose(c[0], expect, rtol=1e-6, atol=1e-4)
    with pytest.raises(TypeError, match="int32"):
        pytpp.linalg.matmul_stack(a, b, np.zeros((1, 4, 4), np.int32), [0], [0], [0])
