"""Small-GEMM stacks (CP2K / EDGE shapes): pytpp vs np.matmul, np.einsum and torch.bmm.

Stacks of 20000 products, beta = 0, output buffers reused; then DBCSR-style indexed stacks
(pytpp.linalg.matmul_stack vs a numpy loop over c blocks) and the call cost of one 2x2 product
through a kernel handle (vs np.dot and np.matmul). Rates are GFLOP/s and % of the measured FMA
peak; the summary line per case gives ns per matrix, the ratio to the LIBXSMM rate measured on
the Zen 4 reference machine (AVX-512) where one is listed, and the memory roofline: a stack reads A
and B and writes C once, the traffic of np.add(x, y, out=z), whose bandwidth on arrays far larger
than the caches is measured in the same run. It is an estimate: stacks that fit the last-level
cache beat it by far (they stay in L2/L3 between repetitions), those just beyond it by up to a
quarter (part of them is still cached), the large ones stay below it.
"""
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import pytpp
from pytpp.linalg._smallgemm import batched_matmul

SHAPES = [(s, s, s) for s in (4, 5, 8, 9, 13, 16, 23, 26, 32, 64)] + [(35, 9, 9), (9, 35, 35),
                                                                      (9, 35, 15)]
# LIBXSMM (JIT), batch 20000, beta = 0, one thread, measured on the project's reference machine
LIBXSMM = {("float64", 4): 18, ("float64", 5): 22, ("float64", 8): 24, ("float64", 13): 30,
           ("float64", 16): 33, ("float64", 23): 40, ("float64", 26): 40, ("float64", 32): 42,
           ("float32", 8): 48, ("float32", 16): 64, ("float32", 23): 81}
BATCH = 20000
STREAM_BYTES = 3 * 64 << 20  # np.add on three 64 MiB arrays: far beyond any L3


def stream_bandwidth(h, threads):
    """Bytes per second of z = x + y on arrays much larger than the caches, counting x, y and z
    once (the write's read-for-ownership, if the CPU does one, is part of what it costs); with
    several threads each adds its share (numpy releases the GIL in ufunc loops)."""
    n = STREAM_BYTES // 3 // 8
    x, y, z = np.ones(n), np.ones(n), np.empty(n)
    parts = [slice(n * t // threads, n * (t + 1) // threads) for t in range(threads)]
    with ThreadPoolExecutor(threads) as pool:
        def run():
            list(pool.map(lambda sl: np.add(x[sl], y[sl], out=z[sl]), parts))
        med, _ = h.time(run, repeats=max(h.repeats // 2, 5))
    return 3 * n * 8 / med


def _stack_case(h, dtype, m, n, k, threads, batch, bandwidth):
    name = np.dtype(dtype).name
    case = f"stack {name} {batch}x({m}x{k} @ {k}x{n})"
    if not h.wants(case):
        return
    rng = np.random.default_rng(0)
    a = rng.standard_normal((batch, m, k)).astype(dtype)
    b = rng.standard_normal((batch, k, n)).astype(dtype)
    out = np.empty((batch, m, n), dtype)
    impls = [("pytpp", lambda: batched_matmul(a, b, out)),
             ("np.matmul", lambda: np.matmul(a, b, out=out)),
             ("np.einsum", lambda: np.einsum("lik,lkj->lij", a, b, out=out))]
    torch = h.torch
    if torch is not None:
        ta, tb, tout = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(out)
        impls.append(("torch.bmm", lambda: torch.bmm(ta, tb, out=tout)))
    kind = "f64" if name == "float64" else "f32"
    flops = 2.0 * m * n * k * batch
    results = h.compare(case, threads, flops, "GFLOP/s", kind, impls,
                        nbytes=a.nbytes + b.nbytes + out.nbytes)
    per = "  ".join(f"{impl} {med / batch * 1e9:.1f}" for impl, med, _ in results)
    line = f"    ns/matrix: {per}"
    ref = LIBXSMM.get((name, m)) if m == n == k else None
    if ref and threads == 1:
        line += f"   pytpp/LIBXSMM({ref} GFLOP/s) = {flops / results[0][1] / 1e9 / ref:.2f}"
    h.out(line)
    nbytes = (m * k + k * n + m * n) * np.dtype(dtype).itemsize  # A, B, C of one product
    roof = 2.0 * m * n * k * bandwidth / nbytes / 1e9
    pytpp_rate = flops / results[0][1] / 1e9
    h.out(f"    memory roofline: {nbytes} B/matrix, stack {nbytes * batch / 2**20:.1f} MiB, at "
          f"{bandwidth / 1e9:.1f} GB/s (np.add, same run) -> {roof:.1f} GFLOP/s; pytpp at "
          f"{100 * pytpp_rate / roof:.0f}% of it")


def _dbcsr_case(h, dtype, m, n, k, threads):
    """c[c_index[i]] += a[a_index[i]] @ b[b_index[i]]: 20000 products into 500 blocks."""
    count, na, nb, nc = BATCH, 2000, 2000, 500
    name = np.dtype(dtype).name
    case = f"dbcsr {name} {count}x({m}x{k} @ {k}x{n}) -> {nc}"
    if not h.wants(case):
        return
    rng = np.random.default_rng(1)
    a = rng.standard_normal((na, m, k)).astype(dtype)
    b = rng.standard_normal((nb, k, n)).astype(dtype)
    c = np.zeros((nc, m, n), dtype)
    ia, ib, ic = rng.integers(0, na, count), rng.integers(0, nb, count), rng.integers(0, nc, count)
    tmp = np.empty((count, m, n), dtype)

    def numpy_way():  # gathered batched product, then a scatter-add (the fast numpy idiom)
        np.matmul(a[ia], b[ib], out=tmp)
        np.add.at(c, ic, tmp)

    # compulsory traffic: the A and B blocks of every product read, every C block read and written
    nbytes = count * (a[0].nbytes + b[0].nbytes) + 2 * c.nbytes
    h.compare(case, threads, 2.0 * m * n * k * count, "GFLOP/s",
              "f64" if name == "float64" else "f32",
              [("pytpp matmul_stack", lambda: pytpp.linalg.matmul_stack(a, b, c, ia, ib, ic)),
               ("numpy gather+add.at", numpy_way)], nbytes=nbytes)


def _handle_case(h):
    kern = pytpp.tpp.gemm(2, 2, 2, beta=0.0)
    a, b, c = np.ones((2, 2)), np.ones((2, 2)), np.empty((2, 2))
    rows = []
    for name, fn in (("pytpp.tpp.gemm handle", lambda: kern(a, b, c)),
                     ("np.dot(out=)", lambda: np.dot(a, b, out=c)),
                     ("np.matmul(out=)", lambda: np.matmul(a, b, out=c))):
        med, best = h.time(fn, repeats=max(h.repeats, 20))
        rows.append(f"{name} {med * 1e9:.0f} ns (best {best * 1e9:.0f})")
    h.out("2x2 float64 product, one call from Python: " + " | ".join(rows))


def run(h):
    h.header("Small-GEMM stacks (batch 20000, beta = 0), DBCSR stacks, kernel-handle call cost")
    if h.match is None:     # a printed line, not a row: --match selects rows
        _handle_case(h)
    for threads in h.threads:
        h.set_threads(threads)
        bandwidth = stream_bandwidth(h, threads)
        h.out(f"t={threads}: np.add on 3 x {STREAM_BYTES // 3 >> 20} MiB arrays moves "
              f"{bandwidth / 1e9:.1f} GB/s (the memory roofline below)")
        for dtype in (np.float64, np.float32):
            for m, n, k in SHAPES:
                batch = BATCH if (m * n * k <= 40000 or not h.quick) else BATCH // 10
                _stack_case(h, dtype, m, n, k, threads, batch, bandwidth)
        for dtype in (np.float64, np.float32):
            for m, n, k in ((5, 5, 5), (23, 23, 23)):
                _dbcsr_case(h, dtype, m, n, k, threads)
