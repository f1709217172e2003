"""PackedMatrix as an array-like: unpacking, attributes, pickling, and re-packing for the ISA
level a product runs at."""
import os
import pickle
import shutil
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import pytpp

DTYPES = [np.float64, np.float32, ml_dtypes.bfloat16]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k, n", [(1, 1), (7, 33), (300, 70), (0, 3), (3, 0), (513, 17)])
def test_asarray_unpacks_exactly(dtype, k, n, rng):
    b = rng.standard_normal((k, n)).astype(dtype)
    if b.size:
        b.flat[0] = np.inf
        b.flat[-1] = np.nan
    p = pytpp.linalg.pack(b)
    u = np.asarray(p)
    assert u.dtype == b.dtype and u.shape == b.shape
    bits = np.dtype(f"u{b.itemsize}")
    np.testing.assert_array_equal(u.view(bits), b.view(bits))      # bit for bit, NaN included
    assert (p.shape, p.ndim, p.dtype, p.size, len(p)) == ((k, n), 2, np.dtype(dtype), k * n, k)
    np.testing.assert_array_equal(p.T.view(bits), b.T.view(bits))
    np.testing.assert_array_equal(np.asarray(p, dtype=np.float64), b.astype(np.float64))


def test_asarray_without_copy_raises():
    with pytest.raises(ValueError, match="copy"):
        np.asarray(pytpp.linalg.pack(np.eye(2)), copy=False)


def test_packed_on_the_left(rng):
    b = rng.standard_normal((4, 3))
    x = rng.standard_normal((3, 2))
    np.testing.assert_allclose(pytpp.linalg.pack(b) @ x, b @ x, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
def test_pickle_round_trip(dtype, rng):
    b = rng.standard_normal((37, 21)).astype(dtype)
    p = pytpp.linalg.pack(b)
    q = pickle.loads(pickle.dumps(p))
    assert type(q) is pytpp.linalg.PackedMatrix
    np.testing.assert_array_equal(np.asarray(q), b)
    a = rng.standard_normal((5, 37)).astype(dtype)
    np.testing.assert_array_equal(pytpp.matmul(a, q), pytpp.matmul(a, p))


@pytest.mark.parametrize("dtype", DTYPES)
def test_product_runs_at_the_active_isa(dtype, rng):
    b = rng.standard_normal((64, 48)).astype(dtype)
    a = rng.standard_normal((9, 64)).astype(dtype)
    p = pytpp.linalg.pack(b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    for level in pytpp.available_isas():
        with pytpp.use_isa(level):
            r = pytpp.matmul(a, p)
            assert p.isa.startswith("ref") == (level == "ref"), (level, p.isa)
            np.testing.assert_allclose(r, ref, rtol=1e-2 if dtype != np.float64 else 1e-12,
                                       atol=1e-2 if dtype != np.float64 else 1e-12)
            with pytpp.use_isa(level):
                q = pickle.loads(pickle.dumps(p))
            np.testing.assert_array_equal(pytpp.matmul(a, q), r)


def test_unpickled_in_a_process_capped_to_ref(tmp_path, rng):
    b = rng.standard_normal((40, 30)).astype(np.float32)
    path = tmp_path / "p.pkl"
    path.write_bytes(pickle.dumps(pytpp.linalg.pack(b)))
    code = ("import pickle, sys, numpy as np, pytpp; p = pickle.load(open(sys.argv[1], 'rb')); "
            "a = np.ones((3, 40), np.float32); r = pytpp.matmul(a, p); "
            "print(pytpp.get_isa(), p.isa, float(abs(r - a @ np.asarray(p)).max()))")
    env = dict(os.environ, PYTPP_ISA="ref")
    res = subprocess.run([sys.executable, "-c", code, str(path)], env=env, capture_output=True,
                         text=True, check=True)
    isa, kernels, err = res.stdout.split()
    assert isa == "ref" and kernels.startswith("ref") and float(err) < 1e-4


QEMU = shutil.which("qemu-x86_64")

GUEST = """
import pickle, sys, numpy as np, pytpp
p, gemm, brgemm, relu = pickle.load(open(sys.argv[1], "rb"))
a = np.arange(120, dtype=np.float32).reshape(3, 40) / 100
r = pytpp.matmul(a, p)
err = float(abs(r - a @ np.asarray(p)).max())
x = np.arange(12.0).reshape(3, 4)
c = gemm(x, x.T.copy(), np.empty((3, 3)))
err = max(err, float(abs(c - x @ x.T).max()))
s = brgemm(np.ones(12), np.ones(12), np.empty((2, 2)), 3)
err = max(err, float(abs(s - 6.0).max()))
y = relu(np.array([[-1.0, 2.0]], np.float32), np.empty((1, 2), np.float32))
err = max(err, float(abs(y - [[0.0, 2.0]]).max()))
print(pytpp.available_isas()[-1], p.isa, gemm.isa, brgemm.isa, relu.isa, err)
"""


@pytest.mark.skipif(QEMU is None, reason="qemu-user is not installed (apt-get install qemu-user)")
@pytest.mark.skipif("asan" in os.environ.get("LD_PRELOAD", ""),
                    reason="a sanitizer run: ASan's shadow memory does not map under qemu-user")
def test_unpickled_on_an_older_cpu(tmp_path, rng):
    """A pack and handles pickled here, loaded by a whole Python process that qemu-user runs as
    an older CPU (without this machine's best ISA level): they must re-dispatch for that CPU,
    not die of an illegal instruction."""
    host = pytpp.available_isas()[-1]
    if host == "ref":
        pytest.skip("this CPU has no vector level to take away")
    b = rng.standard_normal((40, 30)).astype(np.float32)
    objs = (pytpp.linalg.pack(b), pytpp.tpp.gemm(3, 3, 4, beta=0.0),
            pytpp.tpp.brgemm(2, 2, 2, beta=0.0), pytpp.tpp.unary("relu", 1, 2, np.float32))
    path = tmp_path / "objs.pkl"
    path.write_bytes(pickle.dumps(objs))
    # qemu's "max" model has AVX2 but no AVX-512; Nehalem has neither
    cpu = "max" if host == "avx512" else "Nehalem"
    res = subprocess.run([QEMU, "-cpu", cpu, sys.executable, "-c", GUEST, str(path)],
                         capture_output=True, text=True, timeout=600, cwd=os.getcwd())
    assert res.returncode == 0, res.stderr[-2000:]
    guest, *isas, err = res.stdout.split()
    assert pytpp.available_isas().index(guest) < pytpp.available_isas().index(host)
    assert all(i.startswith(guest) for i in isas[1:]), isas
    assert not isas[0].startswith(host), isas
    assert float(err) < 1e-4
