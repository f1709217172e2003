"""The sparse benchmark's cases run (tiny sizes, one repeat) and print one row per peer."""
import numpy as np

from pytpp.benchmarks import sparse as bench
from pytpp.benchmarks._harness import Harness

PEAKS = {1: {"f32": 100.0, "f64": 50.0, "bf16": 100.0, "copy_gbs": 10.0, "read_gbs": 10.0}}


def test_cases_run_and_print_rows():
    lines = []
    # no h.set_threads: its threadpoolctl limit would outlive the test
    h = Harness((1,), quick=True, repeats=1, out=lines.append, peaks=PEAKS)
    bench.spmm_case(h, 1, 256, 16, 0.1, 32, np.float32)
    bench.spmm_case(h, 1, 256, 8, 0.1, 32, np.float32, skew=True, peers=False)
    bench.spmm_case(h, 1, 128, 4, 0.2, 16, bench.BF16)
    bench.ffn_case(h, 1, 16, 64, 128)
    names = {r.impl if hasattr(r, "impl") else r["impl"] for r in h.rows}
    assert {"pytpp spmm", "pytpp dense", "scipy csr", "scipy bsr"} <= names
    assert "pytpp SparseLinear" in names
    assert any("skewed" in line for line in lines)


def test_skewed_matrix_has_half_its_blocks_in_5_percent_of_rows():
    a, dens = bench.random_block_sparse(1280, 16, 0.1, np.float32, skew=True)
    nb = 1280 // 16
    mask = np.abs(a).reshape(nb, 16, nb, 16).max(axis=(1, 3)) > 0
    heavy = mask[: nb // 20].sum()
    assert abs(dens - 0.1) < 0.01
    assert heavy >= 0.45 * mask.sum()
