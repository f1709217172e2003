"""softmax's axis forms: None (scipy's default), tuples of axes, torch's dim=, approx choices."""
import numpy as np
import pytest
from scipy import special

import pytpp

TOL = dict(rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("axis", [None, (0, 2), (2, 0), (1,), (0, 1, 2), (-1, -2), 0, -1])
@pytest.mark.parametrize("order", ["C", "F"])
def test_axis_forms_match_scipy(axis, order, rng, isa):
    x = np.asarray(rng.standard_normal((3, 4, 5)), order=order)
    np.testing.assert_allclose(pytpp.nn.softmax(x, axis=axis), special.softmax(x, axis=axis), **TOL)
    out = np.empty_like(x)
    assert pytpp.nn.softmax(x, axis, out=out) is out
    np.testing.assert_allclose(out, special.softmax(x, axis=axis), **TOL)


def test_dim_is_torch_axis(rng):
    x = rng.standard_normal((3, 4))
    np.testing.assert_allclose(pytpp.nn.softmax(x, dim=0), special.softmax(x, axis=0), **TOL)
    with pytest.raises(TypeError, match="not both"):
        pytpp.nn.softmax(x, 0, dim=1)
    g = rng.standard_normal((3, 4))
    y = special.softmax(x, axis=0)
    np.testing.assert_allclose(pytpp.nn.softmax_backward(g, y, dim=0),
                               y * (g - (g * y).sum(axis=0, keepdims=True)), **TOL)


def test_backward_axis_none(rng):
    g, x = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    y = special.softmax(x, axis=None)
    np.testing.assert_allclose(pytpp.nn.softmax_backward(g, y, axis=None),
                               y * (g - (g * y).sum()), **TOL)


def test_zero_d_and_empty():
    assert pytpp.nn.softmax(np.float64(3.0), axis=None) == 1.0
    assert pytpp.nn.softmax(np.zeros((0, 3))).shape == (0, 3)
    assert pytpp.nn.softmax(np.zeros((2, 0)), axis=None).shape == (2, 0)


@pytest.mark.parametrize("approx", ["pade", "minimax", 2, "yes"])
def test_unknown_approx_raises(approx):
    with pytest.raises(ValueError, match="approx"):
        pytpp.nn.softmax(np.zeros(4), approx=approx)


def test_known_approx(rng):
    x = rng.standard_normal((4, 64)).astype(np.float32)
    np.testing.assert_allclose(pytpp.nn.softmax(x, approx=True), special.softmax(x, axis=-1),
                               rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(pytpp.nn.softmax(x, approx=False), special.softmax(x, axis=-1),
                               rtol=1e-6, atol=1e-8)
    for old, new in (("fast", True), (None, False), ("exact", False), ("none", False)):
        with pytest.warns(DeprecationWarning, match="deprecated") as rec:
            y = pytpp.nn.softmax(x, approx=old)
        assert rec[0].filename == __file__     # points at the caller
        np.testing.assert_array_equal(y, pytpp.nn.softmax(x, approx=new))


@pytest.mark.parametrize("axis, exc", [((0, 0), ValueError), (5, ValueError), ("a", TypeError),
                                       ((0, 1.5), TypeError)])
def test_bad_axis(axis, exc):
    with pytest.raises(exc, match="pytpp.nn.softmax"):
        pytpp.nn.softmax(np.zeros((2, 3)), axis=axis)
