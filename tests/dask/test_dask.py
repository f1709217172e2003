"""pytpp.dask on a real distributed.LocalCluster (worker processes): results equal numpy for odd
chunkings, objects pickle to workers and re-dispatch there, threads per worker as configured, and
a worker killed in the middle of a matmul costs a retry, not the result."""
import os
import pickle
import signal
import time

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import pytpp  # noqa: E402
import pytpp.dask  # noqa: E402

pytestmark = pytest.mark.cluster

TOL = dict(rtol=1e-12, atol=1e-12)


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=":0", silence_logs=40)
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def _arr(rng, shape, chunks, dtype=np.float64):
    x = rng.standard_normal(shape).astype(dtype)
    return x, da.from_array(x, chunks=chunks)


MATMUL_CASES = [
    ((7, 9), (3, 4), (9, 5), (2, 3)),              # k chunks of a and b do not line up
    ((1, 9), (1, 9), (9, 1), (9, 1)),              # a chunk of 1, single chunks
    ((10, 11), (4, 5), (11, 3), (11, 1)),          # uneven last chunks
    ((9,), (4,), (9, 5), (5, 2)),                  # 1-D a
    ((6, 9), (5, 2), (9,), (3,)),                  # 1-D b
    ((4, 7, 9), (3, 3, 4), (9, 5), (4, 2)),        # a stack against a 2-D operand
    ((1, 7, 9), (1, 3, 4), (5, 9, 3), (2, 5, 2)),  # broadcast leading dimension
    ((64, 8, 8), (10, 8, 8), (64, 8, 8), (7, 8, 8)),   # small-GEMM stack by batch chunks
]


@pytest.mark.parametrize("ash, ach, bsh, bch", MATMUL_CASES)
@pytest.mark.parametrize("slab", [True, False], ids=["slab", "tree"])
def test_matmul_equals_numpy(client, ash, ach, bsh, bch, slab, rng, monkeypatch):
    if not slab:
        monkeypatch.setattr(pytpp.dask, "SLAB_BYTES", 0)
    a, da_a = _arr(rng, ash, ach)
    b, da_b = _arr(rng, bsh, bch)
    c = pytpp.dask.matmul(da_a, da_b)
    assert c.dtype == np.matmul(a, b).dtype and c.shape == np.matmul(a, b).shape
    np.testing.assert_allclose(c.compute(), np.matmul(a, b), **TOL)


@pytest.mark.parametrize("slab", [True, False], ids=["slab", "tree"])
def test_contractions_fuse_with_a_following_reduction(rng, slab, monkeypatch):
    """A product's tasks and the per-chunk step of a reduction that consumes them run as one task
    after dask's optimisation (no product block is stored between tasks): matmul stacks, the
    matmul tree path and brgemm."""
    import dask
    if not slab:
        monkeypatch.setattr(pytpp.dask, "SLAB_BYTES", 0)
    x = rng.standard_normal((12, 3, 4))
    s = da.from_array(x, chunks=(4, 3, 2)).persist(scheduler="sync")
    t = da.from_array(x.transpose(0, 2, 1).copy(), chunks=(4, 2, 3)).persist(scheduler="sync")
    for graph, name in ((pytpp.dask.matmul(s, t).sum(axis=0), "matmul_"),
                        (pytpp.dask.brgemm(s, t) * 2.0, "brgemm_partial")):
        (opt,) = dask.optimize(graph)
        keys = [k[0] if isinstance(k, tuple) else k for k in dict(opt.__dask_graph__())]
        assert not [k for k in keys if k.startswith(name)], keys
    np.testing.assert_allclose(pytpp.dask.matmul(s, t).sum(axis=0).compute(scheduler="sync"),
                               (x @ x.transpose(0, 2, 1)).sum(axis=0), **TOL)


def test_matmul_dtypes(client, rng):
    a, da_a = _arr(rng, (6, 5), 3, np.float32)
    b, da_b = _arr(rng, (5, 4), 2, np.float64)
    c = pytpp.dask.matmul(da_a, da_b)
    assert c.dtype == np.float64
    np.testing.assert_allclose(c.compute(), a.astype(np.float64) @ b, rtol=1e-6, atol=1e-6)
    for bad in (np.complex128, np.int64):
        with pytest.raises(TypeError, match="pytpp.dask.matmul: b has dtype"):
            pytpp.dask.matmul(da_a, da.ones((5, 4), dtype=bad, chunks=2))
    with pytest.raises(ValueError, match="core dimensions"):
        pytpp.dask.matmul(da_a, da_a)


def test_brgemm(client, rng):
    a, da_a = _arr(rng, (23, 4, 6), (5, 2, 3))
    b, da_b = _arr(rng, (23, 6, 3), (7, 6, 3))
    np.testing.assert_allclose(pytpp.dask.brgemm(da_a, da_b).compute(),
                               np.einsum("bik,bkj->ij", a, b), rtol=1e-12, atol=1e-11)
    with pytest.raises(ValueError, match="do not match"):
        pytpp.dask.brgemm(da_a, da_a)


@pytest.mark.parametrize("name", pytpp.dask.nn.UNARY)
def test_elementwise(client, name, rng):
    x, dx = _arr(rng, (13, 17), (4, 5), np.float32)
    np.testing.assert_array_equal(getattr(pytpp.dask.nn, name)(dx).compute(),
                                  getattr(pytpp.nn, name)(x))


def test_backward_and_softmax(client, rng):
    g, dg = _arr(rng, (13, 17), (4, 5))
    x, dx = _arr(rng, (13, 17), (5, 4))
    np.testing.assert_array_equal(pytpp.dask.nn.gelu_backward(dg, dx).compute(),
                                  pytpp.nn.gelu_backward(g, x))
    for axis in (-1, 0):
        np.testing.assert_allclose(pytpp.dask.nn.softmax(dx, axis=axis).compute(),
                                   pytpp.nn.softmax(x, axis=axis), rtol=1e-15, atol=1e-15)
    with pytest.raises(ValueError, match="axis 1 spans 5 chunks"):
        pytpp.dask.nn.softmax(dx, rechunk=False)
    with pytest.raises(TypeError, match="no pytpp kernel"):
        pytpp.dask.nn.relu(da.ones(3, dtype=np.complex64, chunks=1))


def _worker_state():
    return pytpp.get_num_threads(), pytpp.get_isa()


def test_norms_and_linear(client, rng):
    x, dx = _arr(rng, (9, 4, 6), (2, 3, 4))            # the normalised axes span chunks
    w, b = rng.standard_normal((4, 6)), rng.standard_normal((4, 6))
    np.testing.assert_allclose(pytpp.dask.nn.layer_norm(dx, (4, 6), w, b).compute(),
                               pytpp.nn.layer_norm(x, (4, 6), w, b), **TOL)
    np.testing.assert_allclose(pytpp.dask.nn.rms_norm(dx, 6).compute(),
                               pytpp.nn.rms_norm(x, 6), **TOL)
    with pytest.raises(ValueError, match="rechunk"):
        pytpp.dask.nn.layer_norm(dx, 6, rechunk=False)
    with pytest.raises(ValueError, match="normalized_shape"):
        pytpp.dask.nn.layer_norm(dx, 5)
    wl, bl = rng.standard_normal((5, 6)), rng.standard_normal(5)
    r, dr = _arr(rng, (9, 4, 5), (4, 1, 5))
    y = pytpp.dask.nn.linear(dx, wl, bl, activation="gelu", residual=dr)
    assert y.shape == (9, 4, 5) and y.chunks[0] == dx.chunks[0]
    np.testing.assert_allclose(y.compute(), pytpp.nn.linear(x, wl, bl, activation="gelu",
                                                            residual=r), **TOL)
    # the weight is one task of the graph, not a copy inside every block's task
    graph = dict(y.__dask_graph__())
    assert sum(isinstance(v, np.ndarray) and v.shape == wl.shape for v in graph.values()) <= 1
    with pytest.raises(ValueError, match="do not match"):
        pytpp.dask.nn.linear(dx, wl[:, :4])


def test_threads_per_worker(client, rng):
    a, da_a = _arr(rng, (64, 64), 32)
    pytpp.dask.matmul(da_a, da_a).compute()
    states = client.run(_worker_state)
    assert all(t == 1 for t, _ in states.values())      # threads_per_worker=1, not the cores
    pytpp.dask.register(client, threads=1)
    assert all(t == 1 for t, _ in client.run(_worker_state).values())


def _use_on_worker(blob, a):
    packed, gemm, brg, relu = pickle.loads(blob)
    c = np.empty((3, 3))
    gemm(a[:3, :3].copy(), a[:3, :3].copy(), c)
    y = relu(np.ascontiguousarray(a[:1, :4], np.float32), np.empty((1, 4), np.float32))
    return pytpp.matmul(a, packed), c, y, packed.isa, gemm.isa


def test_objects_travel_to_workers(client, rng):
    a = rng.standard_normal((5, 7))
    b = rng.standard_normal((7, 4))
    objs = (pytpp.linalg.pack(b), pytpp.tpp.gemm(3, 3, 3, beta=0.0), pytpp.tpp.brgemm(2, 2, 2),
            pytpp.tpp.unary("relu", 1, 4, np.float32))
    prod, c, y, packed_isa, gemm_isa = client.submit(_use_on_worker, pickle.dumps(objs), a).result()
    np.testing.assert_allclose(prod, a @ b, **TOL)
    np.testing.assert_allclose(c, a[:3, :3] @ a[:3, :3], **TOL)
    np.testing.assert_array_equal(y, np.maximum(a[:1, :4], 0).astype(np.float32))
    assert packed_isa.startswith(pytpp.available_isas()[-1])


def _pid():
    return os.getpid()


def test_a_killed_worker_costs_a_retry(rng):
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=":0", silence_logs=50)
    try:
        with distributed.Client(cluster) as c:
            # ~460 GFLOP: seconds on 2 AVX2 cores, still about one on 2 Zen 5 cores at full
            # AVX-512 width (60 GFLOP finished there before the kill); made on the workers
            # (ones: the float32 result is exact)
            da_a = da.ones((6144, 6144), chunks=512, dtype=np.float32)
            pids = c.run(_pid)
            future = c.compute(pytpp.dask.matmul(da_a, da_a))
            deadline = time.monotonic() + 20
            while not c.processing() or not any(c.processing().values()):
                assert time.monotonic() < deadline, "the matmul never started"
                time.sleep(0.05)
            time.sleep(0.5)
            assert not future.done()                   # killed in the middle, not after
            os.kill(next(iter(pids.values())), signal.SIGKILL)
            result = future.result(timeout=90)
            np.testing.assert_array_equal(result, 6144.0)
    finally:
        cluster.close(timeout=20)


@pytest.mark.parametrize("parts", [1, 3, 100])
def test_sparse_spmm_both_sides(client, rng, parts):
    import pytpp.dask.sparse
    import pytpp.sparse
    dense = rng.standard_normal((48, 40)).astype(np.float32)
    dense[rng.random(dense.shape) < 0.6] = 0.0
    for cls in (pytpp.sparse.BSR, pytpp.sparse.BCSC):
        A = cls.from_dense(dense, block=(8, 4))
        b = rng.standard_normal((40, 13)).astype(np.float32)
        got = pytpp.dask.sparse.spmm(A, da.from_array(b, chunks=(7, 1)), row_parts=parts)
        np.testing.assert_allclose(got.compute(), dense @ b, rtol=1e-5, atol=1e-5)
        x = rng.standard_normal((9, 48)).astype(np.float32)
        got = pytpp.dask.sparse.spmm(da.from_array(x, chunks=(1, 20)), A)
        np.testing.assert_allclose(got.compute(), x @ dense, rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match="dtype"):
        pytpp.dask.sparse.spmm(A, da.ones((40, 2), dtype=np.float64))
    with pytest.raises(ValueError, match="rows"):
        pytpp.dask.sparse.spmm(A, da.ones((41, 2), dtype=np.float32))


def test_conv2d_over_batch_chunks(client, rng):
    x = rng.standard_normal((5, 3, 9, 8)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32)
    for fmt, xx in (("NCHW", x), ("NHWC", np.ascontiguousarray(x.transpose(0, 2, 3, 1)))):
        got = pytpp.dask.nn.conv2d(da.from_array(xx, chunks=(2, 1, 4, 3)), w, bias, stride=2,
                                   padding=1, data_format=fmt, activation="relu")
        want = pytpp.nn.conv2d(xx, w, bias, stride=2, padding=1, data_format=fmt,
                               activation="relu")
        np.testing.assert_allclose(got.compute(), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError):
        pytpp.dask.nn.conv2d(da.from_array(x), w[:, :2])
