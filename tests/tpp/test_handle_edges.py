"""Kernel handles at their edges: counts no buffer can hold, empty reductions, bitmask tails
next to unmapped memory, pickling, the shared cache under threads."""
import ctypes
import mmap
import pickle
import sys
import threading

import numpy as np
import pytest

import pytpp

PAGE = mmap.PAGESIZE


# ---- counts that overflow the extent arithmetic ----------------------------------------------

@pytest.mark.parametrize("count", [2 ** 62 + 1, 2 ** 63 - 1, 2 ** 61])
def test_brgemm_handle_count_overflow(count):
    kern = pytpp.tpp.brgemm(2, 2, 2, beta=0.0)
    with pytest.raises((ValueError, TypeError, OverflowError)):
        kern(np.ones(4), np.ones(4), np.zeros((2, 2)), count)


@pytest.mark.parametrize("count", [2 ** 62 + 1, 2 ** 63 - 1, 2 ** 59])
def test_gemm_stack_count_overflow(count):
    kern = pytpp.tpp.gemm(2, 2, 2, beta=0.0)
    with pytest.raises((ValueError, TypeError, OverflowError)):
        kern.stack(np.ones(4), np.ones(4), np.zeros(4), count)


def test_brgemm_handle_count_too_big_for_the_buffer_names_it():
    kern = pytpp.tpp.brgemm(2, 2, 2, beta=0.0)
    with pytest.raises(ValueError, match="a has 8 elements"):
        kern(np.ones(8), np.ones(800), np.zeros((2, 2)), 3)


# ---- empty reductions: C = beta * C once --------------------------------------------------------

@pytest.mark.parametrize("beta, expect", [(0.0, 0.0), (1.0, 1.0), (2.0, 2.0)])
def test_brgemm_handle_k0_applies_beta_once(beta, expect, isa):
    kern = pytpp.tpp.brgemm(3, 4, 0, beta=beta)
    c = np.ones((3, 4))
    assert kern(np.zeros(0), np.zeros(0), c, 2 ** 40) is c     # returns at once
    np.testing.assert_array_equal(c, expect)
    off = pytpp.tpp.brgemm(3, 4, 0, beta=beta, batch="offset")
    c = np.ones((3, 4))
    off(np.zeros(0), np.zeros(0), c, [0] * 1000, [0] * 1000)
    np.testing.assert_array_equal(c, expect)


def test_brgemm_function_k0(isa):
    out = pytpp.brgemm(np.ones((5, 3, 0)), np.ones((5, 0, 2)), np.ones((3, 2)), beta=3.0)
    np.testing.assert_array_equal(out, 3.0)


# ---- bitmask tails read only the mask's bytes ---------------------------------------------------

class GuardedBytes:
    """`nbytes` bytes that end exactly where an unmapped (PROT_NONE) page begins."""

    def __init__(self, nbytes):
        self.mm = mmap.mmap(-1, 2 * PAGE)
        base = ctypes.addressof(ctypes.c_char.from_buffer(self.mm))
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        if libc.mprotect(ctypes.c_void_p(base + PAGE), PAGE, 0) != 0:
            pytest.fail(f"mprotect failed: errno {ctypes.get_errno()}")
        self.array = np.frombuffer(self.mm, np.uint8, count=nbytes, offset=PAGE - nbytes)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 3, 5, 8, 9, 15, 17, 21, 33])
def test_blend_reads_only_the_mask(dtype, n, isa):
    m = 3
    ldm = (n + 7) // 8
    guard = GuardedBytes(m * ldm)
    rng = np.random.default_rng(n)
    bits = rng.integers(0, 256, m * ldm, dtype=np.uint8)
    guard.array[:] = bits
    x = rng.standard_normal((m, n)).astype(dtype)
    y = rng.standard_normal((m, n)).astype(dtype)
    out = np.empty((m, n), dtype)
    kern = pytpp.tpp.ternary("blend", m, n, dtype)
    kern(x, y, guard.array, out)    # a read past the mask would fault here
    keep = np.unpackbits(bits.reshape(m, ldm), axis=1, bitorder="little")[:, :n].astype(bool)
    np.testing.assert_array_equal(out, np.where(keep, y, x))


@pytest.mark.parametrize("n", [1, 5, 9, 17, 33])
def test_dropout_backward_reads_only_the_mask(n, isa):
    guard = GuardedBytes((n + 7) // 8)
    x = np.ones(n, np.float32)
    _, mask = pytpp.nn.dropout(x, 0.5, seed=n, return_mask=True)
    guard.array[:] = mask
    np.testing.assert_array_equal(pytpp.nn.dropout_backward(x, guard.array, 0.5),
                                  pytpp.nn.dropout(x, 0.5, seed=n))


# ---- pickling: handles travel as their descriptor ----------------------------------------------

HANDLES = {
    "gemm": lambda: pytpp.tpp.gemm(3, 4, 5, np.float32, beta=0.0, trans_b=True),
    "brgemm": lambda: pytpp.tpp.brgemm(3, 4, 5, beta=0.0, batch="offset"),
    "unary": lambda: pytpp.tpp.unary("gelu", 3, 4, np.float32, approx=True),
    "binary": lambda: pytpp.tpp.binary("add", 3, 4, np.float64, bcast1="row"),
    "ternary": lambda: pytpp.tpp.ternary("blend", 3, 4, np.float32),
    "transform": lambda: pytpp.tpp.unary("transpose", 3, 4, np.float32),
    "dropout": lambda: pytpp.tpp.unary("dropout", 3, 4, np.float32, p=0.25, seed=7),
}


@pytest.mark.parametrize("name", sorted(HANDLES))
def test_handles_pickle(name):
    kern = HANDLES[name]()
    back = pickle.loads(pickle.dumps(kern))
    assert type(back) is type(kern)
    assert back.descriptor == kern.descriptor
    assert back is kern          # same process, same ISA: the cached handle


@pytest.mark.parametrize("name", sorted(HANDLES))
def test_unpickled_handles_run_at_the_loading_isa(name):
    blob = pickle.dumps(HANDLES[name]())
    with pytpp.use_isa("ref"):
        back = pickle.loads(blob)
    assert back.isa == "ref"


def test_unpickled_gemm_handle_computes(rng):
    kern = pickle.loads(pickle.dumps(pytpp.tpp.gemm(3, 4, 5, beta=0.0)))
    a, b = rng.standard_normal((3, 5)), rng.standard_normal((5, 4))
    np.testing.assert_allclose(kern(a, b, np.empty((3, 4))), a @ b, rtol=1e-12, atol=1e-12)


# ---- the handle cache ---------------------------------------------------------------------------

def test_clear_cache_forgets_every_family():
    makers = [HANDLES[name] for name in sorted(HANDLES)]
    before = [make() for make in makers]
    assert all(make() is kern for make, kern in zip(makers, before))
    pytpp.tpp.clear_cache()
    after = [make() for make in makers]
    assert all(a is not b for a, b in zip(after, before))
    # handles from before keep working
    c = np.empty((3, 4))
    before[1](np.ones(15), np.ones(20), c, [0], [0])
    np.testing.assert_array_equal(c, 5.0)


@pytest.fixture
def eager_switching():
    """Switch Python threads every microsecond, so check-then-insert races show up."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def test_threads_dispatching_one_new_descriptor_get_one_handle(eager_switching):
    nthreads = 8
    for trial in range(50):
        pytpp.tpp.clear_cache()
        barrier = threading.Barrier(nthreads)
        got = [None] * nthreads

        def work(i):
            barrier.wait()
            got[i] = (pytpp.tpp.gemm(7, 9, 11 + trial), pytpp.tpp.brgemm(7, 9, 11 + trial),
                      pytpp.tpp.unary("tanh", 7, 11 + trial))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(nthreads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for j in range(3):
            assert len({id(g[j]) for g in got}) == 1
