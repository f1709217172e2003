"""pytpp.linalg.batched_matmul validates what it is given: mismatched batches or core dimensions
raise ValueError (they used to read past the stacks or go unnoticed)."""
import numpy as np
import pytest

import pytpp
from pytpp.linalg._smallgemm import batched_matmul as private_name


@pytest.mark.parametrize("fn", [pytpp.linalg.batched_matmul, private_name])
@pytest.mark.parametrize("a_shape, b_shape, match", [
    ((200000, 8, 8), (2, 8, 8), "a has 200000 matrices"),
    ((3, 8, 8), (2, 8, 8), "a has 3 matrices"),
    ((2, 8, 8), (5, 8, 8), "b has 5 matrices"),
    ((2, 8, 5), (2, 6, 8), "expected \\(m, k\\) @ \\(k, n\\)"),
    ((2, 7, 8), (2, 8, 8), "expected \\(m, k\\)"),
    ((2, 8, 8), (2, 8, 7), "expected \\(m, k\\)"),
    ((8, 8), (2, 8, 8), "a must be 3-D"),
])
def test_mismatches_raise(fn, a_shape, b_shape, match):
    out = np.full((2, 8, 8), 7.0)
    with pytest.raises(ValueError, match=match):
        fn(np.ones(a_shape), np.ones(b_shape), out)
    np.testing.assert_array_equal(out, 7.0)       # nothing written when it raises


def test_out_checks():
    with pytest.raises(TypeError, match="out must be a numpy.ndarray"):
        pytpp.linalg.batched_matmul(np.ones((1, 2, 2)), np.ones((1, 2, 2)), [[0.0]])
    with pytest.raises(TypeError, match="out has dtype int64"):
        pytpp.linalg.batched_matmul(np.ones((1, 2, 2)), np.ones((1, 2, 2)),
                                    np.zeros((1, 2, 2), np.int64))
    ro = np.zeros((1, 2, 2))
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        pytpp.linalg.batched_matmul(np.ones((1, 2, 2)), np.ones((1, 2, 2)), ro)


@pytest.mark.parametrize("L, m, k, n", [(1, 1, 1, 1), (7, 5, 3, 4), (33, 17, 7, 1), (4, 0, 3, 2),
                                        (3, 2, 0, 5)])
def test_values_and_broadcast(L, m, k, n, rng, isa):
    a = rng.standard_normal((L, m, k))
    b = rng.standard_normal((1, k, n))
    out = np.empty((L, m, n))
    pytpp.linalg.batched_matmul(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-12, atol=1e-12)
