"""Shared fixtures: every kernel test runs at every ISA level this machine has."""
import numpy as np
import pytest

import pytpp


@pytest.fixture(params=pytpp.available_isas())
def isa(request):
    """Run the test body with kernels dispatched for one ISA level (ref, avx2, avx512...)."""
    with pytpp.use_isa(request.param):
        yield request.param


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    old = pytpp.get_num_threads()
    pytpp.set_num_threads(request.param)
    yield request.param
    pytpp.set_num_threads(old)


def gemm_tolerance(dtype, k, a, b):
    """Bound on |C - C_ref| for a sum of k products in `dtype` (C_ref exact in float64):
    each output is a k-term dot product, whose rounding error is at most ~k * eps * sum|a||b|
    (Higham); we use a 2x slack on the typical sqrt-free worst case for blocked summation."""
    eps = np.finfo(dtype).eps
    mag = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64) if a.ndim == 2 else None
    return 2 * max(k, 1) * eps, mag
