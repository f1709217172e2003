"""matmul: square sizes (call overhead at 1..64, Goto path from 256), DL shapes, pre-packed weights,
a few rows or one column against a large matrix (products of rows), fp64 / fp32 / bf16, against
numpy (OpenBLAS) and torch in the same run."""
import numpy as np

import pytpp

try:
    import ml_dtypes
    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
    BF16 = None

SQUARE = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
SQUARE_QUICK = (2, 8, 32, 64, 256, 1024, 2048)
DL = ((512, 1024, 1024), (2048, 4096, 1024), (128, 4096, 4096))  # (m, n, k)
# a few rows or one column against a 64 MiB (fp32) matrix: B read once by rows, nothing packed
# (48 rows: the packed path, where packing B is a large share of the time)
FEW_ROWS = ((1, 4096, 4096), (8, 4096, 4096), (16, 4096, 4096), (48, 4096, 4096),
            (4096, 1, 4096))


def _case(h, dtype, m, n, k, threads, packed=False):
    kind, name = {np.dtype(np.float64): ("f64", "fp64"), np.dtype(np.float32): ("f32", "fp32"),
                  BF16: ("bf16", "bf16")}[np.dtype(dtype)]
    case = f"matmul {name} {m}x{n}x{k}"
    if not h.wants(case):
        return
    rng = np.random.default_rng(0)
    if dtype == BF16:
        a = rng.standard_normal((m, k), np.float32).astype(BF16)
        b = rng.standard_normal((k, n), np.float32).astype(BF16)
        out = np.empty((m, n), np.float32)
    else:
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
        out = np.empty((m, n), dtype)
    impls = [("pytpp.matmul", lambda: pytpp.matmul(a, b, out=out))]
    if packed:
        pb = pytpp.linalg.pack(b)
        impls.append(("pytpp packed B", lambda: pytpp.matmul(a, pb, out=out)))
    if dtype != BF16:
        impls.append(("numpy", lambda: np.matmul(a, b, out=out)))
    else:  # the bf16 speed-up over pytpp's own fp32 product of the same shape (target 1.9x with
        # vdpbf16ps; without it bf16 runs on the fp32 FMAs and 1.0x is the ceiling)
        a32, b32 = a.astype(np.float32), b.astype(np.float32)
        impls.append(("pytpp fp32 (ref)", lambda: pytpp.matmul(a32, b32, out=out)))
    torch = h.torch
    if torch is not None:
        if dtype == BF16:
            ta = torch.from_numpy(a.view(np.uint16).astype(np.int32) << 16).view(torch.float32)
            ta = ta.to(torch.bfloat16)
            tb = torch.from_numpy(b.view(np.uint16).astype(np.int32) << 16).view(torch.float32)
            tb = tb.to(torch.bfloat16)
            tout = torch.empty((m, n), dtype=torch.bfloat16)
            impls.append(("torch bf16", lambda: torch.matmul(ta, tb, out=tout)))
        else:
            ta, tb, tout = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(out)
            impls.append(("torch", lambda: torch.matmul(ta, tb, out=tout)))
    nbytes = a.nbytes + b.nbytes + out.nbytes
    h.compare(case, threads, 2.0 * m * n * k, "GFLOP/s", kind, impls, nbytes=nbytes)


def run(h):
    h.header("matmul C = A B (m x n x k): square sizes, DL shapes, pre-packed B"
             " (bf16 % of peak: of the vdpbf16ps peak, or of the fp32 FMA peak on CPUs without it)")
    square = SQUARE_QUICK if h.quick else SQUARE
    dtypes = [np.float64, np.float32] + ([BF16] if BF16 is not None else [])
    for threads in h.threads:
        h.set_threads(threads)
        for dtype in dtypes:
            for s in square:
                if s >= 4096 and dtype == np.float64 and h.quick:
                    continue
                _case(h, dtype, s, s, s, threads)
            for m, n, k in DL:
                _case(h, dtype, m, n, k, threads, packed=True)
            for m, n, k in FEW_ROWS:
                if dtype != BF16:
                    _case(h, dtype, m, n, k, threads)
