"""batched_matmul: strided stacks of small products (the engine behind pytpp.matmul on 3-D stacks).

Tolerance: each output element is a k-term dot product; its rounding error is bounded by
~k * eps * (|A| @ |B|) (Higham, any summation order). We allow 2 * (k + 1) * eps times that
magnitude, checked against a float64 reference (exact enough for float32 inputs; for float64
inputs the reference has the same bound, which the factor 2 covers).
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

import pytpp
from pytpp._core import _smallgemm
from pytpp.linalg._smallgemm import batched_matmul

DTYPES = [np.float64, np.float32]
ODD = [1, 7, 17, 33, 63, 65]
BENCH_SHAPES = [(4, 4, 4), (5, 5, 5), (8, 8, 8), (9, 9, 9), (13, 13, 13), (23, 23, 23),
                (26, 26, 26), (35, 9, 9), (9, 35, 35), (9, 35, 15)]


def check(out, a, b, dtype, msg=""):
    a64 = np.asarray(a, np.float64)
    b64 = np.asarray(b, np.float64)
    ref = a64 @ b64
    k = a64.shape[-1]
    bound = 2 * (k + 1) * np.finfo(dtype).eps * (np.abs(a64) @ np.abs(b64)) + np.finfo(dtype).tiny
    err = np.abs(out.astype(np.float64) - ref)
    assert out.shape == ref.shape
    assert np.all(err <= bound), f"{msg}: max err {err.max()} vs bound {bound.max()}"


def rand(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,k", BENCH_SHAPES + [(m, n, k) for m in ODD[:3] for n in ODD[:3]
                                                   for k in (1, 17)])
def test_shapes(isa, threads, rng, dtype, m, n, k):
    L = 37
    a, b = rand(rng, (L, m, k), dtype), rand(rng, (L, k, n), dtype)
    out = np.full((L, m, n), np.nan, dtype)  # beta = 0 must never read out
    assert batched_matmul(a, b, out) is out
    check(out, a, b, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,k", [(33, 63, 65), (65, 33, 63), (63, 65, 7)])
def test_larger_odd(isa, rng, dtype, m, n, k):
    a, b = rand(rng, (3, m, k), dtype), rand(rng, (3, k, n), dtype)
    out = np.empty((3, m, n), dtype)
    check(batched_matmul(a, b, out), a, b, dtype)


def _layouts(rng, L, m, n, k, dtype):
    """(name, a, b, out) with every mix of row-major, transposed, Fortran, negative-stride,
    sliced and broadcast views."""
    a = rand(rng, (L, m, k), dtype)
    b = rand(rng, (L, k, n), dtype)
    aT = np.ascontiguousarray(a.transpose(0, 2, 1)).transpose(0, 2, 1)
    bT = np.ascontiguousarray(b.transpose(0, 2, 1)).transpose(0, 2, 1)
    aF = np.asfortranarray(a)
    big_a = rand(rng, (L, 2 * m + 1, k + 3), dtype)
    a_slice = big_a[:, 1::2, 2:2 + k]
    a_neg = np.ascontiguousarray(a[::-1, ::-1, ::-1])[::-1, ::-1, ::-1]
    b_neg = np.ascontiguousarray(b[:, ::-1])[:, ::-1]
    a_bc = np.broadcast_to(a[:1], a.shape)
    b_bc = np.broadcast_to(b[:1], b.shape)
    outs = {
        "C": lambda: np.empty((L, m, n), dtype),
        "T": lambda: np.empty((L, n, m), dtype).transpose(0, 2, 1),
        "F": lambda: np.empty((L, m, n), dtype, order="F"),
        "strided": lambda: np.empty((L, m, 2 * n), dtype)[:, :, ::2],
        "Lmid": lambda: np.empty((m, L, n), dtype).transpose(1, 0, 2),
        "neg": lambda: np.empty((L, m, n), dtype)[::-1, ::-1, ::-1],
    }
    for an, av in (("a", a), ("aT", aT), ("aF", aF), ("aslice", a_slice), ("aneg", a_neg),
                   ("abc", a_bc), ("a1", a[:1])):
        for bn, bv in (("b", b), ("bT", bT), ("bneg", b_neg), ("bbc", b_bc), ("b1", b[:1])):
            for on, of in outs.items():
                yield f"{an}-{bn}-{on}", av, bv, of()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,k", [(5, 7, 3), (9, 35, 15), (4, 4, 4), (1, 6, 2), (6, 1, 5)])
def test_layouts(isa, rng, dtype, m, n, k):
    L = 6
    for name, a, b, out in _layouts(rng, L, m, n, k, dtype):
        out[...] = np.nan
        batched_matmul(a, b, out)
        aa = np.broadcast_to(a, (L, m, k))
        bb = np.broadcast_to(b, (L, k, n))
        check(out, aa, bb, dtype, name)


@pytest.mark.parametrize("dtype,m,n,k", [(np.float64, 41, 47, 45), (np.float32, 61, 67, 59),
                                         (np.float64, 37, 70, 41), (np.float32, 9, 9, 9),
                                         (np.float64, 5, 5, 5)])
def test_prefetching_kernels(isa, rng, dtype, m, n, k):
    """The prefetching stack kernels, forced on for small stacks: on AVX-512 (and ref) the ones
    that fetch the next register block's A and C rows and the next product's B (the planner takes
    them for products of 40 kB and more), on AVX2 the ones that fetch each block's own operands
    some products ahead (the planner takes them for stacks too large for the cache, of products
    of 1 kB and more). Every layout, including transposed A (the prefetch walks k along the A
    columns then), broadcast operands (stride 0: not prefetched), several column blocks per
    product (37x70x41 f64: one product per kernel call) and the last products of a stack
    (prefetches past the end)."""
    info = _smallgemm.plan_info(m, n, k, dtype, k, 1, n, 1, n, 1)
    nbytes = (m * k + k * n + m * n) * np.dtype(dtype).itemsize
    assert info["pf"] == (nbytes >= (1024 if isa == "avx2" else 40000))
    assert info["pfd"] >= 1
    if n == 70 and isa in ("avx512", "avx2"):
        assert info["n_jb"] > 1
    L = 5
    _smallgemm.set_prefetch(1)
    try:
        for name, a, b, out in _layouts(rng, L, m, n, k, dtype):
            out[...] = np.nan
            batched_matmul(a, b, out)
            check(out, np.broadcast_to(a, (L, m, k)), np.broadcast_to(b, (L, k, n)), dtype, name)
    finally:
        _smallgemm.set_prefetch(-1)


@pytest.mark.parametrize("dtype", DTYPES)
def test_row_tails(isa, rng, dtype):
    """Every row width from 1 to 40 columns, with C read (beta != 0) and not: the last vector of a
    row is full, masked, or (AVX2) a full vector shifted left to end at column n, overlapping the
    one before; with beta != 0 the overlapped lanes must be read before either vector is
    stored, and a shifted vector never overlaps a column block computed before it."""
    kinds = set()
    for n in range(1, 41):
        for m, k in ((3, 5), (7, 2)):
            for alpha, beta in ((1.0, 0.0), (-0.5, 1.5)):
                kern = pytpp.tpp.gemm(m, n, k, dtype, alpha=alpha, beta=beta)
                a = rand(rng, (m, k), dtype)
                b = rand(rng, (k, n), dtype)
                c = rand(rng, (m, n), dtype)
                ref = alpha * (a.astype(np.float64) @ b) + beta * c.astype(np.float64)
                mag = np.abs(alpha) * (np.abs(a).astype(np.float64) @ np.abs(b)) + \
                    np.abs(beta) * np.abs(c)
                if beta == 0:
                    c[...] = np.nan
                kern(a, b, c)
                err = np.abs(c - ref)
                assert np.all(err <= 2 * (k + 2) * np.finfo(dtype).eps * mag), (n, m, k, beta)
                kinds.add(_smallgemm.plan_info(m, n, k, dtype, k, 1, n, 1, n, 1, alpha, beta)["tail"])
    if isa == "avx2":
        assert kinds == {"none", "mask", "shift"}


def test_layouts_threads(threads, rng):
    for name, a, b, out in _layouts(rng, 400, 13, 9, 11, np.float64):
        batched_matmul(a, b, out)
        check(out, np.broadcast_to(a, (400, 13, 11)), np.broadcast_to(b, (400, 11, 9)),
              np.float64, name)


@pytest.mark.parametrize("dtype", DTYPES)
def test_zero_sizes(isa, dtype):
    for L, m, n, k in [(0, 3, 4, 5), (3, 0, 4, 5), (3, 4, 0, 5), (3, 4, 5, 0), (0, 0, 0, 0)]:
        a, b = np.ones((L, m, k), dtype), np.ones((L, k, n), dtype)
        out = np.full((L, m, n), np.nan, dtype)
        batched_matmul(a, b, out)
        np.testing.assert_array_equal(out, np.zeros((L, m, n)))


def test_mixed_dtypes_and_odd_strides(rng):
    a = rand(rng, (5, 3, 4), np.float32)
    b = rand(rng, (5, 4, 6), np.float64)
    out = np.empty((5, 3, 6))
    check(batched_matmul(a, b, out), a, b, np.float32)
    # strides that are not whole elements (fields of a packed record array)
    rec = np.zeros((5, 3, 4), dtype=[("x", np.float64), ("pad", np.int8)])
    rec["x"] = rng.standard_normal((5, 3, 4))
    out2 = np.empty((5, 3, 6))
    check(batched_matmul(rec["x"], b, out2), rec["x"], b, np.float64)


def test_large_stack_parallel(threads, rng):
    """A stack big enough to run on threads: every product written exactly once."""
    a = rand(rng, (3001, 5, 5), np.float64)
    b = rand(rng, (3001, 5, 5), np.float64)
    out = np.full((3001, 5, 5), np.nan)
    check(batched_matmul(a, b, out), a, b, np.float64)


@pytest.mark.parametrize("flavour", [0, 1])
def test_forced_flavours(rng, flavour):
    """Both vector flavours of AVX-512 (zmm, ymm) and of AVX2 (ymm, xmm) give the same results;
    the planner's choice between them is only a matter of speed."""
    levels = [lvl for lvl in ("avx2", "avx512") if lvl in pytpp.available_isas()]
    if not levels:
        pytest.skip("no AVX2 or AVX-512")
    _smallgemm.set_flavour(flavour)
    try:
        for level in levels:
            with pytpp.use_isa(level):
                for m, n, k in BENCH_SHAPES + [(17, 33, 7), (3, 3, 3), (6, 2, 4)]:
                    for dtype in DTYPES:
                        a, b = rand(rng, (7, m, k), dtype), rand(rng, (7, k, n), dtype)
                        out = np.empty((7, m, n), dtype)
                        check(batched_matmul(a, b, out), a, b, dtype)
    finally:
        _smallgemm.set_flavour(-1)


def test_plan_info():
    info = _smallgemm.plan_info(23, 23, 23, np.float64, 23, 1, 23, 1, 23, 1)
    assert info["n_ib"] >= 1 and info["n_jb"] >= 1 and not info["pack_b"]
    # column-major C is computed as C^T = B^T A^T, no copies
    info = _smallgemm.plan_info(5, 7, 3, np.float64, 1, 5, 1, 3, 1, 5)
    assert info["swap"] and not info["pack_b"] and not info["scratch_c"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(L=st.integers(0, 9), m=st.integers(0, 40), n=st.integers(0, 40), k=st.integers(0, 40),
       ta=st.booleans(), tb=st.booleans(), tc=st.booleans(), f32=st.booleans(),
       bca=st.booleans(), bcb=st.booleans())
def test_hypothesis(rng, L, m, n, k, ta, tb, tc, f32, bca, bcb):
    dtype = np.float32 if f32 else np.float64
    a = rand(rng, (L, k, m) if ta else (L, m, k), dtype)
    b = rand(rng, (L, n, k) if tb else (L, k, n), dtype)
    if ta:
        a = a.transpose(0, 2, 1)
    if tb:
        b = b.transpose(0, 2, 1)
    if bca and L:
        a = np.broadcast_to(a[:1], a.shape)
    if bcb and L:
        b = np.broadcast_to(b[:1], b.shape)
    out = np.empty((L, n, m), dtype).transpose(0, 2, 1) if tc else np.empty((L, m, n), dtype)
    out[...] = np.nan
    batched_matmul(a, b, out)
    if out.size:
        check(out, a, b, dtype)
