"""GEMM driven by a loop-spec string (``pytpp.matmul(a, b, loops=...)``, 001 Listing 1: BRGEMMs
over A read in place and B copied into column panels, the nest run in C) against the Goto path
(``pytpp.matmul``), 2048^3 float32, a few strings. GFLOP/s and % of the measured fp32 FMA peak;
the copy of B is made in every call and counted.
"""
import numpy as np

import pytpp

STRINGS = ("bcaBCb", "cbaBC", "BCa", "cBa", "bcBCa @ schedule(dynamic, 1)")


def run(h):
    h.header("Loop-string GEMM: GFLOP/s, % of measured fp32 peak")
    n = 2048
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    out = np.empty((n, n), np.float32)
    for threads in h.threads:
        h.set_threads(threads)
        impls = [("pytpp.matmul", lambda: pytpp.matmul(a, b, out=out))]
        for s in STRINGS:
            impls.append((f"loops={s}", lambda s=s: pytpp.matmul(a, b, out=out, loops=s)))
        h.compare(f"gemm float32 {n}^3", threads, 2.0 * n ** 3, "GFLOP/s", "f32", impls,
                  nbytes=3 * a.nbytes)
