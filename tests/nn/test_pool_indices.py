"""Max pooling with indices (``return_indices=True``) and the backward from them: the indices
are torch's (flat h * W + w in the plane of the element the backward's rule picks), the values
are max_pool2d's, and the backward from indices equals the backward from x and the float64
reference exactly (integer gradients: every sum is exact), at every ISA level, one thread or
two. Indices that are not max_pool2d's are scattered as given, checked against their plane."""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pool_reference import (
    backward_ref,
    pool_case,
    same_values,
    taps_ref,
    windows,
    with_special_values,
)

import pytpp
from pytpp.nn import max_pool2d, max_pool2d_backward

NHWC = lambda a: np.ascontiguousarray(a.transpose(0, 2, 3, 1))   # noqa: E731
NCHW_OF_NHWC = lambda a: a.transpose(0, 3, 1, 2)                  # noqa: E731


def indices_ref(x, k, s, p):
    """Each output's flat index h * W + w by torch's rule: the window's first element inside
    the image, replaced by each later one that is greater or NaN."""
    N, C, H, W = x.shape
    P = (H + 2 * p[0] - k[0]) // s[0] + 1
    Q = (W + 2 * p[1] - k[1]) // s[1] + 1
    idx = np.zeros((N, C, P, Q), np.int64)
    for i, j, cells in windows(H, W, k, s, p):
        for n, c in itertools.product(range(N), range(C)):
            at, best = None, None
            for h, w in cells:
                v = float(x[n, c, h, w])
                if at is None or v > best or np.isnan(v):
                    at, best = h * W + w, v
            idx[n, c, i, j] = at
    return idx


def each_level(fn):
    """fn() at every ISA level with one thread and with two."""
    old = pytpp.get_num_threads()
    for level, nt in itertools.product(pytpp.available_isas(), (1, 2)):
        pytpp.set_num_threads(nt)
        try:
            with pytpp.use_isa(level):
                yield level, fn()
        finally:
            pytpp.set_num_threads(old)


@settings(max_examples=50, deadline=None)
@given(case=pool_case(), fmt=st.sampled_from(["NCHW", "NHWC"]),
       dtype=st.sampled_from([np.float32, np.float64]), layout=st.sampled_from(["c", "view", "f"]),
       C=st.sampled_from([1, 3, 17, 70]), seed=st.integers(0, 999))
def test_indices_and_their_backward(case, fmt, dtype, layout, C, seed):
    shape, k, s, p = case
    shape = (shape[0], C) + shape[2:]
    rng = np.random.default_rng(seed)
    x = with_special_values(rng, shape, dtype, [(0.05, np.nan), (0.35, 0.0), (0.4, -0.0),
                                                (0.45, -np.inf), (0.47, np.inf)])
    xi = x if fmt == "NCHW" else x.transpose(0, 2, 3, 1)
    xi = {"c": np.ascontiguousarray, "f": np.asfortranarray, "view": lambda a: a}[layout](xi)
    back = NCHW_OF_NHWC if fmt == "NHWC" else (lambda a: a)
    y_ref, idx_ref = taps_ref(x, k, s, p, "max"), indices_ref(x, k, s, p)
    g = rng.integers(-4, 5, idx_ref.shape).astype(dtype)
    gi = g if fmt == "NCHW" else NHWC(g)
    gx_ref = backward_ref(g, x, k, s, p, "max")
    for level, (y, idx) in each_level(
            lambda: max_pool2d(xi, k, s, p, data_format=fmt, return_indices=True)):
        assert y.dtype == dtype and idx.dtype == np.int64 and idx.shape == y.shape
        assert same_values(back(y), y_ref), level
        np.testing.assert_array_equal(back(idx), idx_ref, err_msg=level)
    for level, gx in each_level(
            lambda: max_pool2d_backward(gi, xi, k, s, p, data_format=fmt, indices=idx)):
        assert gx.dtype == dtype and gx.shape == xi.shape
        np.testing.assert_array_equal(back(gx), gx_ref, err_msg=level)


def test_indices_match_torch_on_ties_and_nan():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(5)
    x = np.maximum(rng.standard_normal((2, 5, 13, 11)), 0).astype(np.float32)   # ReLU ties
    x[0, 1, 2:4, 3:5] = np.nan
    x[1, 2, 5:9, :] = -np.inf
    for (k, s, p), fmt in itertools.product([(3, 2, 1), (2, 2, 0), (3, 1, 1), (5, 3, 2)],
                                            ["NCHW", "NHWC"]):
        tx = torch.from_numpy(x).requires_grad_(True)
        ty, ti = F.max_pool2d(tx, k, s, p, return_indices=True)
        g = rng.standard_normal(ty.shape).astype(np.float32)
        (tgx,) = torch.autograd.grad(ty, tx, torch.from_numpy(g))
        xi, gi = (x, g) if fmt == "NCHW" else (NHWC(x), NHWC(g))
        back = NCHW_OF_NHWC if fmt == "NHWC" else (lambda a: a)
        y, idx = max_pool2d(xi, k, s, p, data_format=fmt, return_indices=True)
        assert same_values(back(y), ty.detach().numpy())
        np.testing.assert_array_equal(back(idx), ti.numpy())
        gx = max_pool2d_backward(gi, xi, k, s, p, data_format=fmt, indices=idx)
        np.testing.assert_allclose(back(gx), tgx.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
@pytest.mark.parametrize("C", [1, 64, 70])
def test_backward_scatters_any_indices(fmt, C):
    """Indices anywhere in the plane (last element, first, backwards, repeated), int32 and
    non-contiguous indices: the gradient summed at each, every other element zero."""
    rng = np.random.default_rng(C)
    N, H, W, k = 2, 9, 7, 3
    x = np.zeros((N, C, H, W), np.float32)
    P, Q = H // k, W // k
    g = rng.integers(-4, 5, (N, C, P, Q)).astype(np.float32)
    for pattern in ("last", "first", "reversed", "random"):
        if pattern == "last":
            idx = np.full(g.shape, H * W - 1)
        elif pattern == "first":
            idx = np.zeros(g.shape, np.int64)
        elif pattern == "reversed":
            idx = (H * W - 1 - np.arange(g.size) % (H * W)).reshape(g.shape)
        else:
            idx = rng.integers(0, H * W, g.shape)
        ref = np.zeros((N, C, H * W))
        for n, c in itertools.product(range(N), range(C)):
            np.add.at(ref[n, c], idx[n, c].ravel(), g[n, c].ravel())
        ref = ref.reshape(x.shape)
        back = NCHW_OF_NHWC if fmt == "NHWC" else (lambda a: a)
        xi, gi = (x, g) if fmt == "NCHW" else (NHWC(x), NHWC(g))
        ii = idx if fmt == "NCHW" else idx.transpose(0, 2, 3, 1)      # a view, not copied
        for indices in (ii, ii.astype(np.int32)):
            for level, gx in each_level(
                    lambda: max_pool2d_backward(gi, xi, k, data_format=fmt, indices=indices)):
                np.testing.assert_array_equal(back(gx), ref, err_msg=f"{pattern} {level}")


@pytest.mark.parametrize("bad,exc,text", [
    (lambda i, hw: np.where(i == i.flat[0], hw, i), ValueError, r"\[0, 20\)"),
    (lambda i, hw: np.where(i == i.flat[-1], -1, i), ValueError, r"\[0, 20\)"),
    (lambda i, hw: i.astype(np.uint64) + np.uint64(2**63), ValueError, r"\[0, 20\)"),
    (lambda i, hw: i[..., :1], ValueError, "grad_out's shape"),
    (lambda i, hw: i.astype(np.float32), TypeError, "integers"),
])
@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_bad_indices(bad, exc, text, fmt):
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    xi = x if fmt == "NCHW" else NHWC(x)
    y, idx = max_pool2d(xi, 2, data_format=fmt, return_indices=True)
    with pytest.raises(exc, match=text):
        max_pool2d_backward(np.ones_like(y), xi, 2, data_format=fmt, indices=bad(idx, 20))


@pytest.mark.parametrize("shape", [(0, 3, 4, 4), (2, 0, 4, 4)])
@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_zero_size(shape, fmt):
    x = np.zeros(shape, np.float32)
    xi = x if fmt == "NCHW" else NHWC(x)
    y, idx = max_pool2d(xi, 2, data_format=fmt, return_indices=True)
    assert y.size == 0 and idx.shape == y.shape and idx.dtype == np.int64
    gx = max_pool2d_backward(y, xi, 2, data_format=fmt, indices=idx)
    assert gx.shape == xi.shape


def test_bfloat16_and_a_window_of_many_taps():
    """bfloat16 pooled in float32 (indices as float32's); a 17x17 window (more than 256 taps:
    the tap table then comes from the heap)."""
    import ml_dtypes
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5, 37, 41)).astype(ml_dtypes.bfloat16)
    x32 = x.astype(np.float32)
    for k, s, p in ((3, 2, 1), (17, 5, 8)):
        for fmt in ("NCHW", "NHWC"):
            xi, back = (x, lambda a: a) if fmt == "NCHW" else (NHWC(x), NCHW_OF_NHWC)
            y, idx = max_pool2d(xi, k, s, p, data_format=fmt, return_indices=True)
            assert y.dtype == x.dtype
            assert same_values(back(y).astype(np.float32), taps_ref(x32, (k, k), (s, s), (p, p),
                                                                     "max"))
            np.testing.assert_array_equal(back(idx), indices_ref(x32, (k, k), (s, s), (p, p)))


def test_indices_beyond_int32():
    """A plane of more than 2^31 elements (a broadcast view: nothing allocated) takes the
    forward's wide-index path; the last window's index needs 64 bits."""
    H = W = 46342
    for C, dtype in ((3, np.float32), (1, np.float64)):   # C = 1: the stride of C unused
        x = np.broadcast_to(np.arange(C, dtype=dtype), (1, H, W, C))
        y, idx = max_pool2d(x, 2, 46340, data_format="NHWC", return_indices=True)
        assert y.shape == (1, 2, 2, C)
        want = np.array([[0, 46340], [46340 * W, 46340 * W + 46340]])
        np.testing.assert_array_equal(idx, np.repeat(want[None, :, :, None], C, axis=3))
        np.testing.assert_array_equal(y, np.broadcast_to(np.arange(C, dtype=dtype), y.shape))
        assert idx.max() > np.iinfo(np.int32).max
