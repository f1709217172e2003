"""pytpp.matmul as a drop-in for np.matmul: numpy's own TestMatmul passes against it; every
dtype pair numpy multiplies gives numpy's dtype and values; products with a pytpp kernel run
it (integer operands met with floating ones too), the others and every refused call are
numpy's, decided before any kernel runs."""
import itertools

import ml_dtypes
import numpy as np
import pytest

import pytpp
from pytpp.linalg import _matmul

np_multiarray = pytest.importorskip("numpy._core.tests.test_multiarray")

TYPES = "?bhilqBHILQefdgFDGO"     # MatmulCommon.types: every type numpy's matmul takes
KERNEL = set("efd")              # float16 (computed in float32), float32, float64


class TestPytppMatmul(np_multiarray.TestMatmul):
    """numpy's TestMatmul, every test, with pytpp.matmul in place of np.matmul."""
    matmul = staticmethod(pytpp.matmul)


@pytest.fixture
def kernel_calls(monkeypatch):
    """The shapes of the products pytpp's kernels computed during the test."""
    calls = []
    run = _matmul._run

    def counting(plan):
        calls.append((plan.m, plan.k, plan.n))
        return run(plan)
    monkeypatch.setattr(_matmul, "_run", counting)
    return calls


def _operand(dt, shape):
    return (np.arange(np.prod(shape)).reshape(shape) % 3).astype(dt)


@pytest.mark.parametrize("ta,tb", list(itertools.product(TYPES, TYPES)))
def test_every_dtype_pair_is_numpys(ta, tb, kernel_calls):
    a, b = _operand(ta, (2, 3, 4)), _operand(tb, (4, 5))
    try:
        expected = np.matmul(a, b)
    except TypeError as e:                       # a pair numpy refuses: the same error
        with pytest.raises(type(e)):
            pytpp.matmul(a, b)
        return
    got = pytpp.matmul(a, b)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got.astype(object), expected.astype(object))
    # the kernel runs where the result is a kernel dtype and no operand is complex/object/...
    kernel = expected.dtype.char in KERNEL and {ta, tb} <= KERNEL | set("?bhilqBHILQ")
    assert bool(kernel_calls) == kernel, (ta, tb, expected.dtype)


def test_integers_are_exact():
    a = np.array([[2**60, 1]], np.int64)
    b = np.array([[1], [1]], np.int64)
    r = pytpp.matmul(a, b)
    assert r.dtype == np.int64 and r[0, 0] == 2**60 + 1
    assert pytpp.matmul(np.array([200], np.uint8), np.array([2], np.uint8)) == np.uint8(144)


def test_longdouble_keeps_its_precision():
    a = np.array([[1, 2.0**-60]], np.longdouble)
    b = np.ones((2, 1), np.longdouble)
    r = pytpp.matmul(a, b)
    assert r.dtype == np.longdouble and r[0, 0] == np.matmul(a, b)[0, 0]


def test_integer_with_float_runs_the_kernel(kernel_calls, rng):
    a = rng.integers(-5, 5, (6, 7)).astype(np.int32)
    b = rng.standard_normal((7, 3)).astype(np.float32)
    r = pytpp.matmul(a, b)
    assert r.dtype == np.float64 == np.matmul(a, b).dtype    # int32 x float32 -> float64
    np.testing.assert_allclose(r, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-12)
    assert kernel_calls == [(6, 7, 3)]
    r = pytpp.matmul(a, b.astype(np.float64), dtype=np.float32)
    assert r.dtype == np.float32


def test_dtype_argument_without_kernel_is_numpys(kernel_calls):
    a = np.arange(4.0).reshape(2, 2)
    r = pytpp.matmul(a, a, dtype=np.complex128)
    assert r.dtype == np.complex128 and not kernel_calls
    np.testing.assert_array_equal(r, np.matmul(a, a, dtype=np.complex128))
    i = np.arange(4).reshape(2, 2)
    r = pytpp.matmul(i, i, dtype=np.float32)
    assert r.dtype == np.float32 and kernel_calls


def test_kept_pytpp_dtypes():
    """Where pytpp has kernels its rules stay: bfloat16 x bfloat16 returns float32 (float32
    accumulation), float16 computes in float32 and returns float16."""
    x = np.ones((2, 8), ml_dtypes.bfloat16)
    assert pytpp.matmul(x, x.T).dtype == np.float32
    h = np.full((2, 300), 0.1, np.float16)
    r = pytpp.matmul(h, h.T)
    assert r.dtype == np.float16
    exact = h.astype(np.float64) @ h.T.astype(np.float64)
    np.testing.assert_allclose(r, exact, rtol=1e-3)


def test_refused_calls_never_reach_a_kernel(monkeypatch):
    def no_kernel(*args):
        raise AssertionError("a kernel ran for a call numpy refuses")
    monkeypatch.setattr(_matmul, "_compute", no_kernel)
    ro = np.ones((3, 2))
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        pytpp.matmul(np.ones((3, 4)), np.ones((4, 2)), out=ro)
    with pytest.raises(TypeError, match="Cannot cast ufunc 'matmul' output"):
        pytpp.matmul(np.ones((3, 4)), np.ones((4, 2)), out=np.empty((3, 2), np.int64))
    with pytest.raises(ValueError, match="non-broadcastable"):
        pytpp.matmul(np.ones((0, 1, 1)), np.ones((0, 1, 1)), out=np.ones((1, 1, 1)))


def test_out_of_another_kind(rng):
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))
    out = np.zeros((4, 2), np.complex128)
    assert pytpp.matmul(a, b, out=out) is out
    np.testing.assert_allclose(out.real, a @ b, rtol=1e-12)
    i = np.arange(6).reshape(2, 3)
    out = np.zeros((2, 2), np.float64)
    pytpp.matmul(i, i.T, out=out)                 # numpy's integer product, cast into out
    np.testing.assert_array_equal(out, i @ i.T)
