"""pytpp.linalg.matmul_stack: DBCSR stacks c[c_index[i]] += alpha * a[a_index[i]] @ b[b_index[i]].

Reference: the same loop in numpy (float64). Tolerance: a C block receives `reps` products of
k terms each (plus its initial value); the rounding error of that sum is bounded by
~(reps * k + 1) * eps * sum of |terms| (any order). We allow twice that bound.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

import pytpp
from pytpp.linalg import matmul_stack

DTYPES = [np.float64, np.float32]


def reference(a, b, c, ia, ib, ic, alpha):
    ref = c.astype(np.float64)
    mag = np.abs(ref)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    for x, y, z in zip(ia, ib, ic):
        ref[z] += alpha * a64[x] @ b64[y]
        mag[z] += abs(alpha) * np.abs(a64[x]) @ np.abs(b64[y])
    return ref, mag


def check(c, ref, mag, dtype, terms):
    bound = 2 * (terms + 1) * np.finfo(dtype).eps * mag + np.finfo(dtype).tiny
    err = np.abs(c.astype(np.float64) - ref)
    assert np.all(err <= bound), f"max err {err.max()} vs bound {bound.max()}"


def make(rng, dtype, na, nb, nc, m, n, k):
    a = rng.standard_normal((na, m, k)).astype(dtype)
    b = rng.standard_normal((nb, k, n)).astype(dtype)
    c = rng.standard_normal((nc, m, n)).astype(dtype)
    return a, b, c


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,k", [(5, 5, 5), (23, 23, 23), (9, 35, 15), (1, 7, 17), (17, 1, 3),
                                   (4, 13, 1), (33, 65, 7)])
def test_repeated_c_index(isa, threads, rng, dtype, m, n, k):
    """Heavily repeated c_index under 1 and 2 threads: no lost updates."""
    a, b, c = make(rng, dtype, 11, 13, 5, m, n, k)
    count = 600
    ia = rng.integers(0, 11, count)
    ib = rng.integers(0, 13, count)
    ic = rng.integers(0, 5, count)          # ~120 products per C block
    ic[:300] = 2                            # and one block with > 256 (several register passes)
    ref, mag = reference(a, b, c, ia, ib, ic, 0.75)
    out = matmul_stack(a, b, c, ia, ib, ic, alpha=0.75)
    assert out is c
    check(c, ref, mag, dtype, np.bincount(ic).max() * k)


def test_all_same_block_two_threads(rng):
    pytpp_threads = pytpp.get_num_threads()
    pytpp.set_num_threads(2)
    try:
        a, b, c = make(rng, np.float64, 50, 50, 1, 8, 8, 8)
        ia = np.arange(5000) % 50
        ib = (np.arange(5000) * 7) % 50
        ic = np.zeros(5000, np.int64)
        ref, mag = reference(a, b, c, ia, ib, ic, 1.0)
        matmul_stack(a, b, c, ia, ib, ic)
        check(c, ref, mag, np.float64, 5000 * 8)
    finally:
        pytpp.set_num_threads(pytpp_threads)


@pytest.mark.parametrize("dtype", DTYPES)
def test_block_layouts(isa, rng, dtype):
    """Transposed, column-major and sliced block views of a, b and c."""
    m, n, k = 7, 9, 5
    a, b, c = make(rng, dtype, 6, 6, 4, m, n, k)
    ia, ib, ic = rng.integers(0, 6, 40), rng.integers(0, 6, 40), rng.integers(0, 4, 40)
    views_a = [a, np.ascontiguousarray(a.transpose(0, 2, 1)).transpose(0, 2, 1),
               np.asfortranarray(a), a[::-1][::-1]]
    views_b = [b, np.ascontiguousarray(b.transpose(0, 2, 1)).transpose(0, 2, 1),
               np.asfortranarray(b)]
    for va in views_a:
        for vb in views_b:
            for kind in ("C", "T", "F", "strided"):
                if kind == "C":
                    cc = c.copy()
                elif kind == "T":
                    cc = np.ascontiguousarray(c.transpose(0, 2, 1)).transpose(0, 2, 1)
                elif kind == "F":
                    cc = np.asfortranarray(c)
                else:
                    cc = np.zeros((4, m, 2 * n), dtype)[:, :, ::2]
                    cc[...] = c
                ref, mag = reference(va, vb, cc, ia, ib, ic, -1.5)
                matmul_stack(va, vb, cc, ia, ib, ic, alpha=-1.5)
                check(cc, ref, mag, dtype, 40 * k)


def test_index_dtypes_and_lists(rng):
    a, b, c = make(rng, np.float64, 3, 3, 2, 4, 4, 4)
    ref, mag = reference(a, b, c, [0, 2], [1, 1], [1, 1], 1.0)
    matmul_stack(a, b, c, [0, 2], np.array([1, 1], np.uint8), np.array([1, 1], np.int32))
    check(c, ref, mag, np.float64, 8)


def test_mixed_dtype_inputs(rng):
    a, b, c = make(rng, np.float32, 3, 3, 2, 4, 5, 6)
    c = c.astype(np.float64)
    ref, mag = reference(a, b, c, [0, 1, 2], [2, 1, 0], [0, 1, 0], 2.0)
    matmul_stack(a, b, c, [0, 1, 2], [2, 1, 0], [0, 1, 0], alpha=2)
    check(c, ref, mag, np.float32, 12)


def test_empty_and_degenerate(rng):
    a, b, c = make(rng, np.float64, 2, 2, 2, 3, 4, 5)
    before = c.copy()
    matmul_stack(a, b, c, [], [], [])
    np.testing.assert_array_equal(c, before)
    a0, b0 = np.ones((2, 3, 0)), np.ones((2, 0, 4))
    matmul_stack(a0, b0, c, [0, 1], [1, 0], [0, 0])
    np.testing.assert_array_equal(c, before)
    c0 = np.ones((2, 0, 4))
    matmul_stack(np.ones((2, 0, 5)), b, c0, [0], [0], [1])


def test_errors(rng):
    a, b, c = make(rng, np.float64, 3, 4, 2, 5, 6, 7)
    ok = ([0, 1], [2, 3], [0, 1])
    before = c.copy()
    with pytest.raises(ValueError, match="c_index\\[1\\] = 2 is out of range"):
        matmul_stack(a, b, c, [0, 1], [0, 1], [0, 2])
    with pytest.raises(ValueError, match="a_index\\[0\\] = -1"):
        matmul_stack(a, b, c, [-1, 1], [0, 1], [0, 1])
    with pytest.raises(ValueError, match="b_index\\[1\\] = 4"):
        matmul_stack(a, b, c, [0, 1], [0, 4], [0, 1])
    np.testing.assert_array_equal(c, before)  # nothing ran
    with pytest.raises(ValueError, match="b_index has 1 entries; expected 2"):
        matmul_stack(a, b, c, [0, 1], [0], [0, 1])
    with pytest.raises(TypeError, match="a_index must be a 1-D array of integers"):
        matmul_stack(a, b, c, [0.0, 1.0], *ok[1:])
    with pytest.raises(TypeError, match="c_index must be a 1-D array of integers"):
        matmul_stack(a, b, c, *ok[:2], [[0, 1]])
    with pytest.raises(TypeError, match="c must be a numpy.ndarray"):
        matmul_stack(a, b, c.tolist(), *ok)
    with pytest.raises(TypeError, match="a has dtype complex128"):
        matmul_stack(a.astype(complex), b, c, *ok)
    with pytest.raises(TypeError, match="c has dtype int64"):
        matmul_stack(a, b, c.astype(np.int64), *ok)
    with pytest.raises(ValueError, match="a must be a 3-D stack"):
        matmul_stack(a[0], b, c, *ok)
    with pytest.raises(ValueError, match="k must match"):
        matmul_stack(a, b[:, :6], c, *ok)
    with pytest.raises(ValueError, match="c's blocks are 5x5; expected 5x6"):
        matmul_stack(a, b, c[:, :, :5], *ok)
    ro = c.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="c is read-only"):
        matmul_stack(a, b, ro, *ok)
    with pytest.raises(TypeError, match="alpha must be a real number"):
        matmul_stack(a, b, c, *ok, alpha="x")
    np.testing.assert_array_equal(c, before)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 30), n=st.integers(1, 30), k=st.integers(1, 30),
       count=st.integers(0, 300), nc=st.integers(1, 6), f32=st.booleans(),
       threads=st.sampled_from([1, 2]))
def test_hypothesis(rng, m, n, k, count, nc, f32, threads):
    dtype = np.float32 if f32 else np.float64
    a, b, c = make(rng, dtype, 4, 3, nc, m, n, k)
    ia, ib, ic = rng.integers(0, 4, count), rng.integers(0, 3, count), rng.integers(0, nc, count)
    ref, mag = reference(a, b, c, ia, ib, ic, 1.0)
    old = pytpp.get_num_threads()
    pytpp.set_num_threads(threads)
    try:
        matmul_stack(a, b, c, ia, ib, ic)
    finally:
        pytpp.set_num_threads(old)
    check(c, ref, mag, dtype, max(count, 1) * k)
