"""pytpp.dask on a LocalCluster of 1 and 2 worker processes (one thread each): the same graph with
pytpp's kernels and with dask's own (numpy/scipy) kernels, and the speedup from 1 to 2 workers.

Inputs are made on the workers and persisted before timing; each timed graph ends in a small
reduction, so no result crosses to the client. Every case runs 3 times (1 with --quick); the
table gives median and best seconds.
"""
import time

import numpy as np

from pytpp.benchmarks._harness import optional_import

IN_DEFAULT_RUN = False     # starts clusters of worker processes: `python -m pytpp bench dask`


def _cases(quick):
    n = 4096 if quick else 8192
    stack = 200_000 if quick else 2_000_000
    gelu = (64 if quick else 256) << 20      # float32 elements: 256 MiB / 1 GiB
    return n, stack, gelu


def _gelu_numpy(x):
    from scipy import special
    return x * np.float32(0.5) * (np.float32(1) + special.erf(x * np.float32(2 ** -0.5)))


def run(h):
    da = optional_import("dask.array")
    distributed = optional_import("distributed")
    if da is None or distributed is None:
        h.out("\n== dask: skipped (pip install 'pytpp[dask]')")
        return
    import pytpp.dask

    h.header("pytpp.dask on a LocalCluster (worker processes, 1 thread each) vs dask + numpy")
    n, stack, gelu_n = _cases(h.quick)
    reps = 1 if h.quick else 3
    times = {}
    for workers in (1, 2):
        cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1,
                                           processes=True, dashboard_address=":0",
                                           silence_logs=50)
        with distributed.Client(cluster) as client:
            rng = da.random.default_rng(0)
            a = rng.standard_normal((n, n), chunks=2048, dtype=np.float32).persist()
            s = rng.standard_normal((stack, 23, 23), chunks=(5000, 23, 23)).persist()
            x = rng.standard_normal(gelu_n, chunks=16 << 20, dtype=np.float32).persist()
            distributed.wait([a, s, x])
            graphs = {
                f"matmul fp32 {n}^3": (2.0 * n ** 3, "GFLOP/s",
                                       lambda: pytpp.dask.matmul(a, a).sum(),
                                       lambda: (a @ a).sum()),
                f"small GEMM {stack}x23^3 fp64": (2.0 * 23 ** 3 * stack, "GFLOP/s",
                                                  lambda: pytpp.dask.matmul(s, s).sum(axis=0),
                                                  lambda: (s @ s).sum(axis=0)),
                f"gelu fp32 {gelu_n * 4 >> 20} MiB": (8.0 * gelu_n, "GB/s",
                                                      lambda: pytpp.dask.nn.gelu(x).sum(),
                                                      lambda: x.map_blocks(_gelu_numpy).sum()),
            }
            for case, (work, unit, ours, peer) in graphs.items():
                if not h.wants(case):
                    continue
                for impl, make in (("pytpp.dask", ours), ("dask + numpy", peer)):
                    make().compute()                      # warm up (and the workers' imports)
                    samples = []
                    for _ in range(reps):
                        t0 = time.perf_counter()
                        make().compute()
                        samples.append(time.perf_counter() - t0)
                    med, best = float(np.median(samples)), min(samples)
                    times[(case, impl, workers)] = med
                    ratio = med / times[(case, "pytpp.dask", workers)]   # peer time / ours
                    h.out(f"{case:34s} {impl:13s} workers={workers} {med:8.3f} s (best {best:7.3f})"
                          f" {work / med / 1e9:8.1f} {unit}  pytpp x{ratio:5.2f}")
                    h.record(case, impl, workers, med, best, work, unit, ratio)
        cluster.close()
    for case in dict.fromkeys(c for c, _, _ in times):
        for impl in ("pytpp.dask", "dask + numpy"):
            one, two = times[(case, impl, 1)], times[(case, impl, 2)]
            h.out(f"{case:34s} {impl:13s} 2 workers / 1 worker: x{one / two:4.2f}")
