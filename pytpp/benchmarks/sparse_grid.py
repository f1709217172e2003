"""The full block-sparse grid of the issue (``python -m pytpp bench sparse_grid``; long: scipy
and torch at density 0.5 take seconds per call): 4096^2 and 2048^2 sparse operand, blocks 1, 4,
8, 16, 32, densities 0.5, 0.2, 0.1, 0.05, 0.01, N = 32 and 256, fp32 and bf16; the peers of
``bench sparse`` in every case (numpy, scipy and torch for fp32 only)."""
import numpy as np

from pytpp.benchmarks.sparse import BF16, spmm_case

IN_DEFAULT_RUN = False  # tens of minutes: run it by name


def run(h):
    h.header("Block-sparse x dense, full grid: effective GFLOP/s and % of peak")
    for threads in h.threads:
        h.set_threads(threads)
        for dtype in (np.float32, BF16):
            for size in (4096, 2048):
                for n in (256, 32):
                    for block in (1, 4, 8, 16, 32):
                        for density in (0.5, 0.2, 0.1, 0.05, 0.01):
                            spmm_case(h, threads, size, block, density, n, dtype)
