"""Zero-copy interop: public functions take objects that speak only DLPack, and torch tensors
(through __array__), and return numpy arrays."""
import numpy as np
import pytest

import pytpp
from pytpp import _validate


class DLPackOnly:
    """An array that offers __dlpack__ and nothing numpy would use otherwise."""

    def __init__(self, arr):
        self._arr = arr

    def __dlpack__(self, **kwargs):
        return self._arr.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._arr.__dlpack_device__()


def test_dlpack_conversion_is_zero_copy(rng):
    x = rng.standard_normal((5, 7)).astype(np.float32)
    view = _validate.asarray(DLPackOnly(x))
    assert np.shares_memory(view, x)
    assert _validate.asarray(x) is x


@pytest.mark.parametrize("wrap", [DLPackOnly, "torch"])
def test_functions_take_foreign_arrays(rng, wrap):
    if wrap == "torch":
        torch = pytest.importorskip("torch")
        wrap = torch.from_numpy
    a = rng.standard_normal((6, 8)).astype(np.float32)
    b = rng.standard_normal((8, 3)).astype(np.float32)
    got = pytpp.matmul(wrap(a), wrap(b))
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(pytpp.nn.gelu(wrap(a)), pytpp.nn.gelu(a))
    np.testing.assert_allclose(pytpp.nn.softmax(wrap(a)), pytpp.nn.softmax(a))
    np.testing.assert_allclose(pytpp.nn.layer_norm(wrap(a), (8,)), pytpp.nn.layer_norm(a, (8,)))
    blocks = rng.standard_normal((2, 6, 8)).astype(np.float32)
    np.testing.assert_allclose(pytpp.brgemm(wrap(blocks), wrap(np.stack([b, b]))),
                               pytpp.brgemm(blocks, np.stack([b, b])))
    q = rng.integers(0, 256, (4, 8)).astype(np.uint8)
    w = rng.integers(-128, 128, (8, 3)).astype(np.int8)
    np.testing.assert_array_equal(pytpp.quant.matmul_int8(wrap(q), wrap(w)),
                                  q.astype(np.int64) @ w.astype(np.int64))
