"""pytpp.matmul(a, b, loops="..."): 001's blocked GEMM driven by a loop-spec string."""
import numpy as np
import pytest

import pytpp

STRINGS = ["abc", "bcaBCb", "BCa", "cBa", "aabbcc", "bC{R:2}aB{C:2}cb", "BCa @ schedule(dynamic, 1)",
           "bcBCa @ schedule(guided)", "B{R:2}ca", "b|C|a"]


@pytest.mark.parametrize("spec", STRINGS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_loop_strings_give_the_product(isa, threads, spec, dtype, rng):
    for m, k, n in [(1, 1, 1), (7, 17, 33), (130, 200, 70), (64, 640, 128)]:
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
        got = pytpp.matmul(a, b, loops=spec)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        tol = 4 * k * np.finfo(dtype).eps * (np.abs(a) @ np.abs(b))
        assert got.dtype == dtype and got.shape == (m, n)
        assert (np.abs(got - ref) <= tol + 1e-30).all(), spec


def test_out_and_views(rng):
    a = rng.standard_normal((90, 70))[:, ::2]
    b = np.asfortranarray(rng.standard_normal((35, 50)))
    out = np.zeros((90, 50))
    r = pytpp.matmul(a, b, out=out, loops="bcaBCb")
    assert r is out
    np.testing.assert_allclose(out, a @ b, rtol=1e-12, atol=1e-12)
    out32 = np.zeros((90, 50), np.float32)
    pytpp.matmul(a, b, out=out32, loops="BCa")
    np.testing.assert_allclose(out32, a @ b, rtol=1e-5, atol=1e-5)
    # blocks that divide the operands (copied into the blocked layout in one pass): a strided
    # and a Fortran-order view, a float32 operand promoted
    a = rng.standard_normal((128, 256))[:, ::2]
    b = np.asfortranarray(rng.standard_normal((128, 192)))
    np.testing.assert_allclose(pytpp.matmul(a, b, loops="bcaBCb"), a @ b, rtol=1e-12, atol=1e-12)
    a32 = a.astype(np.float32)
    got = pytpp.matmul(a32, b[:, :64], loops="abc")
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, a32.astype(np.float64) @ b[:, :64], rtol=1e-12, atol=1e-12)
    assert pytpp.matmul(np.ones((0, 3)), np.ones((3, 4)), loops="abc").shape == (0, 4)
    np.testing.assert_array_equal(pytpp.matmul(np.ones((2, 0)), np.ones((0, 4)), loops="abc"),
                                  np.zeros((2, 4)))


@pytest.mark.parametrize("spec, pos", [("bcx", 2), ("bc{R:2}a", 2), ("abcd", 3), ("ab", 2),
                                       ("bcaBCb @ nope", 9)])
def test_malformed_strings(spec, pos):
    a = np.ones((4, 4))
    with pytest.raises(ValueError, match=f"character {pos}"):
        pytpp.matmul(a, a, loops=spec)


def test_parallel_k_refused():
    a = np.ones((4, 4))
    with pytest.raises(ValueError, match="K loop"):
        pytpp.matmul(a, a, loops="b|cA")
    with pytest.raises(ValueError, match="K loop"):
        pytpp.matmul(np.ones((64, 4096)), np.ones((4096, 64)), loops="aBC @ schedule(dynamic)")
    with pytest.raises(ValueError, match="2-D"):
        pytpp.matmul(np.ones((2, 4, 4)), a, loops="abc")
    with pytest.raises(TypeError):
        pytpp.matmul(a, a, loops=3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_long_k_runs_several_batches_per_c_block(isa, dtype, rng):
    # K beyond one BRGEMM batch (k_step blocks: half of L2 of A and B blocks), with a K tail and
    # an N tail inside the last B panel: later batches accumulate onto C
    for m, k, n in [(70, 4163, 40), (5, 2100, 17)]:
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        tol = 4 * k * np.finfo(dtype).eps * (np.abs(a) @ np.abs(b))
        for spec in ["bca", "aBC", "cab"]:
            got = pytpp.matmul(a, b, loops=spec)
            assert (np.abs(got - ref) <= tol).all(), (spec, m, k, n)


def test_operands_read_in_place_are_left_alone_and_may_alias_out(rng):
    a = rng.standard_normal((128, 128))
    b = rng.standard_normal((128, 128))
    a0, b0 = a.copy(), b.copy()
    ref = a @ b
    np.testing.assert_allclose(pytpp.matmul(a, b, loops="bcaBCb"), ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)
    # out is A (read in place) or B (packed before the product): same answer
    r = pytpp.matmul(a, b, out=a, loops="bcaBCb")
    assert r is a
    np.testing.assert_allclose(a, ref, rtol=1e-12, atol=1e-12)
    r = pytpp.matmul(a0, b, out=b, loops="BCa")
    np.testing.assert_allclose(b, ref, rtol=1e-12, atol=1e-12)


def test_b_views_reversed_broadcast_and_misaligned(rng):
    a = rng.standard_normal((33, 70)).astype(np.float32)
    base = rng.standard_normal((70, 90)).astype(np.float32)
    ref64 = a.astype(np.float64)
    for b in [base[::-1], base[:, ::-3], np.broadcast_to(base[0], (70, 90)), base.T.copy().T]:
        got = pytpp.matmul(a, b, loops="bca")
        ref = ref64 @ np.asarray(b, np.float64)
        np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-4)
    raw = np.zeros(70 * 90 * 4 + 1, np.uint8)
    b = raw[1:].view(np.float32).reshape(70, 90)   # not aligned to its element size
    b[...] = base
    np.testing.assert_allclose(pytpp.matmul(a, b, loops="bca"), ref64 @ base.astype(np.float64),
                               rtol=2e-5, atol=2e-4)


def test_loop_gemm_from_many_python_threads(rng):
    # the B panels use the shared packing workspace when it is free, own buffers otherwise
    from concurrent.futures import ThreadPoolExecutor
    ops = [(rng.standard_normal((96, 200)), rng.standard_normal((200, 72))) for _ in range(8)]

    def one(i):
        a, b = ops[i % len(ops)]
        got = pytpp.matmul(a, b, loops="bcaBCb") if i % 2 else pytpp.matmul(a, b)
        return np.abs(got - a @ b).max()

    with ThreadPoolExecutor(4) as ex:
        assert max(ex.map(one, range(48))) < 1e-10
