"""pytpp.matmul and pytpp.brgemm on int8/uint8: numpy's result dtype and wrapping, exact."""
import ml_dtypes
import numpy as np
import pytest

import pytpp

I8, U8 = np.int8, np.uint8


def ints(rng, shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


@pytest.mark.parametrize("adt,bdt", [(I8, I8), (U8, I8), (U8, U8), (I8, U8)])
@pytest.mark.parametrize("sa,sb", [((5, 7), (7, 3)), ((7,), (7, 3)), ((2, 5, 7), (7,)),
                                   ((7,), (7,)), ((3, 1, 4, 9), (2, 9, 5)), ((1, 63), (63, 65))])
def test_matmul_matches_numpy(isa, rng, adt, bdt, sa, sb):
    a, b = ints(rng, sa, adt), ints(rng, sb, bdt)
    got, want = pytpp.matmul(a, b), np.matmul(a, b)
    assert np.asarray(got).dtype == want.dtype
    np.testing.assert_array_equal(got, want)          # wraps exactly as numpy's arithmetic
    got32 = pytpp.matmul(a, b, dtype=np.int32)
    np.testing.assert_array_equal(got32, a.astype(np.int64) @ b.astype(np.int64))
    out = np.empty(np.shape(want), np.int32)
    assert pytpp.matmul(a, b, out=out) is out
    np.testing.assert_array_equal(out, a.astype(np.int64) @ b.astype(np.int64))


def test_matmul_int64_result_is_exact_past_int32(rng):
    k = 70000
    a, b = np.full((2, k), 255, U8), np.full((k, 3), -128, I8)
    got = pytpp.matmul(a, b, dtype=np.int64)
    assert (got == 255 * -128 * k).all()


def test_matmul_views_and_zero_sizes(rng):
    a = ints(rng, (9, 40), U8)[::2, 1::3]
    b = np.asfortranarray(ints(rng, (13, 6), I8))
    np.testing.assert_array_equal(pytpp.matmul(a, b, dtype=np.int32),
                                  a.astype(np.int64) @ b.astype(np.int64))
    assert pytpp.matmul(np.zeros((0, 3), U8), np.zeros((3, 4), I8)).shape == (0, 4)
    np.testing.assert_array_equal(pytpp.matmul(np.zeros((2, 0), U8), np.zeros((0, 4), I8)),
                                  np.zeros((2, 4), np.int16))


def test_matmul_errors_are_numpys():
    with pytest.raises(ValueError):
        pytpp.matmul(np.ones((2, 3), I8), np.ones((4, 2), I8))


def test_brgemm_integer_blocks(isa, rng):
    a, b = ints(rng, (2, 3, 5, 7), U8), ints(rng, (3, 7, 4), I8)
    s = np.einsum("...ipk,...ikq->...pq", a.astype(np.int64), b.astype(np.int64))
    got = pytpp.brgemm(a, b)
    assert got.dtype == np.int16
    np.testing.assert_array_equal(got, s.astype(np.int16))
    np.testing.assert_array_equal(pytpp.brgemm(a, b, dtype=np.int32), s)
    c = ints(rng, (5, 4), np.int16).astype(np.int32)
    out = np.empty((2, 5, 4), np.int32)
    assert pytpp.brgemm(a, b, c, out=out) is out
    np.testing.assert_array_equal(out, s + c)
    with pytest.raises(TypeError):
        pytpp.brgemm(a, b, dtype=np.float32)


def test_brgemm_bf16_blocks_use_the_bf16_kernels(rng):
    a = rng.standard_normal((3, 6, 10)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((3, 10, 7)).astype(ml_dtypes.bfloat16)
    h = pytpp.tpp.brgemm(6, 7, 10, dtype=ml_dtypes.bfloat16, beta=0.0)
    want = h(a, b, np.empty((6, 7), np.float32), 3)
    got = pytpp.brgemm(a, b)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    assert pytpp.brgemm(a, b, dtype=ml_dtypes.bfloat16).dtype == ml_dtypes.bfloat16
