"""BRGEMM: in-cache batch-reduce, long streaming reductions, independent batches on threads."""
import numpy as np

import pytpp


def _case(h, dtype, nb, m, n, k, threads, hot):
    case = f"brgemm {np.dtype(dtype).name} {nb}x{m}x{n}x{k}"
    if not h.wants(case):
        return
    rng = np.random.default_rng(0)
    a = rng.standard_normal((nb, m, k)).astype(dtype)
    b = rng.standard_normal((nb, k, n)).astype(dtype)
    out = np.empty((m, n), dtype)
    kern = pytpp.tpp.brgemm(m, n, k, dtype=dtype, beta=0.0)
    tmp = np.empty((nb, m, n), dtype)
    torch = h.torch
    impls = [("pytpp kernel", lambda: kern(a, b, out, nb)),
             ("pytpp.brgemm", lambda: pytpp.brgemm(a, b, out=out)),
             ("numpy matmul+sum", lambda: np.matmul(a, b, out=tmp).sum(0, out=out)),
             ("numpy einsum", lambda: np.einsum("bik,bkj->ij", a, b, out=out, optimize=True))]
    if torch is not None:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        tout = torch.from_numpy(out)
        flat_a = ta.permute(1, 0, 2).reshape(m, nb * k)
        flat_b = tb.reshape(nb * k, n)
        impls.append(("torch mm(concat)", lambda: torch.mm(flat_a, flat_b, out=tout)))
    kind = "f64" if np.dtype(dtype) == np.float64 else "f32"
    h.compare(case, threads, 2.0 * nb * m * n * k, "GFLOP/s", kind, impls,
              nbytes=a.nbytes + b.nbytes + out.nbytes, hot=hot)


def _independent(h, dtype, many, nb, m, n, k, threads):
    case = f"{many} independent brgemm {np.dtype(dtype).name} {nb}x{m}^3"
    if not h.wants(case):
        return
    rng = np.random.default_rng(1)
    a = rng.standard_normal((many, nb, m, k)).astype(dtype)
    b = rng.standard_normal((many, nb, k, n)).astype(dtype)
    out = np.empty((many, m, n), dtype)
    kind = "f64" if np.dtype(dtype) == np.float64 else "f32"
    h.compare(case, threads, 2.0 * many * nb * m * n * k, "GFLOP/s", kind,
              [("pytpp.brgemm", lambda: pytpp.brgemm(a, b, out=out)),
               ("numpy einsum", lambda: np.einsum("lbik,lbkj->lij", a, b, out=out, optimize=True))],
              nbytes=a.nbytes + b.nbytes + out.nbytes)


def run(h):
    h.header("BRGEMM (C = sum_i A_i B_i), operands hot in cache, then streaming from memory")
    long_count = 2000 if h.quick else 20000
    for threads in h.threads:
        h.set_threads(threads)
        for dtype in (np.float32, np.float64):
            # in cache: every implementation timed in blocks of back-to-back calls (a peer's
            # temporaries, as numpy's 16 products, would evict the operands between calls)
            _case(h, dtype, 16, 64, 64, 64, threads, hot=True)
            _case(h, dtype, 16, 32, 32, 32, threads, hot=True)
            _case(h, dtype, long_count, 64, 64, 64, threads, hot=False)
            _independent(h, dtype, 64, 16, 64, 64, 64, threads)
