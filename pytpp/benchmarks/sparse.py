"""Block-sparse x dense (pytpp.sparse.spmm, paper 001 III-C / Fig. 8): effective GFLOP/s
(2 * M * K * N * density / time: the dense product's flops scaled by the stored-block density)
and % of the measured peak, against scipy csr and bsr (sparray), torch sparse csr and bsr,
pytpp's dense matmul and numpy's dense matmul of the same shape, all in one run.

``python -m pytpp bench sparse`` runs a subset that takes a few minutes: the headline case
(4096^2, 16 x 16 blocks, density 0.1, N = 256), block sizes and densities on 2048^2, N = 32,
bfloat16 (with the same product in float32 beside it), a skewed matrix (half the blocks in 5% of the block rows) and the BERT-base FFN pruned
to 20% in 8 x 8 blocks (dense x sparse). ``python -m pytpp bench sparse_grid`` runs the issue's
full grid (4096^2 and 2048^2, blocks 1-32, densities 0.5-0.01, N 32 and 256, fp32 and bf16).
Run with ``--threads 1,2`` for the thread scaling."""
import warnings

import ml_dtypes
import numpy as np

import pytpp
from pytpp import sparse

BF16 = np.dtype(ml_dtypes.bfloat16)


def random_block_sparse(size, block, density, dtype, skew=False, seed=0):
    """A size x size matrix with round(density * blocks) random non-zero (block x block)
    blocks; skew: half of them in the first 5% of the block rows."""
    rng = np.random.default_rng(seed)
    nb = size // block
    total = nb * nb
    keep = round(density * total)
    if skew:
        heavy_rows = max(1, nb // 20)
        heavy = min(keep // 2, heavy_rows * nb)
        first = rng.choice(heavy_rows * nb, heavy, replace=False)
        rest = rng.choice(np.arange(heavy_rows * nb, total), keep - heavy, replace=False)
        chosen = np.concatenate([first, rest])
    else:
        chosen = rng.choice(total, keep, replace=False)
    mask = np.zeros(total, bool)
    mask[chosen] = True
    mask = mask.reshape(nb, nb)
    vals = rng.standard_normal((size, size)).astype(np.float32)
    a = vals * np.kron(mask, np.ones((block, block), np.float32))
    return a.astype(dtype), mask.mean()


def _torch_peers(torch, a32, b32, block):
    """torch sparse csr and bsr (fp32 only: torch's CPU sparse matmul has no bfloat16)."""
    ta, tb = torch.from_numpy(a32), torch.from_numpy(b32)
    with warnings.catch_warnings():  # "sparse CSR/BSR tensor support is in beta"
        warnings.simplefilter("ignore", UserWarning)
        csr = ta.to_sparse_csr()
        bsr = ta.to_sparse_bsr((block, block)) if block > 1 else None
    peers = [("torch csr", lambda: csr @ tb)]
    if bsr is not None:
        peers.append(("torch bsr", lambda: bsr @ tb))
    return peers


def spmm_case(h, threads, size, block, density, n, dtype, skew=False, peers=True):
    """A @ B with A (size x size) block-sparse, B (size x n) dense."""
    import scipy.sparse as sp
    a, dens = random_block_sparse(size, block, density, dtype, skew)
    rng = np.random.default_rng(1)
    b = rng.standard_normal((size, n)).astype(dtype)
    A = sparse.BSR.from_dense(a, block=(block, block))
    out = np.empty((size, n), np.float32 if dtype == BF16 else dtype)
    flops = 2.0 * size * size * n * dens
    tag = f"{'skewed ' if skew else ''}{size}^2 b{block} d{density:g} N{n} {np.dtype(dtype).name}"
    if not h.wants(f"spmm {tag}"):
        return
    impls = [("pytpp spmm", lambda: sparse.spmm(A, b, out=out)),
             ("pytpp dense", lambda: pytpp.matmul(a, b, out=out))]
    if dtype != BF16:
        impls.append(("numpy dense", lambda: np.matmul(a, b, out=out)))
    else:  # the same product in float32: what bf16 gains
        a32, b32 = a.astype(np.float32), b.astype(np.float32)
        A32 = sparse.BSR.from_dense(a32, block=(block, block))
        impls.append(("pytpp spmm f32", lambda: sparse.spmm(A32, b32, out=out)))
    if peers and dtype != BF16:
        csr, bsr = sp.csr_array(a), sp.bsr_array(a, blocksize=(block, block))
        impls += [("scipy csr", lambda: csr @ b), ("scipy bsr", lambda: bsr @ b)]
        if h.torch is not None:
            impls += _torch_peers(h.torch, a, b, block)
    h.compare(f"spmm {tag}", threads, flops, "GFLOP/s", "bf16" if dtype == BF16 else "f32",
              impls)


def ffn_case(h, threads, tokens, d_in, d_out, block=8, density=0.2):
    """BERT-base FFN layer x @ W.T + b with W (d_out x d_in) pruned to `density` in
    block x block blocks (dense x sparse: the block-sparse BERT case)."""
    import scipy.sparse as sp
    rng = np.random.default_rng(2)
    w = (rng.standard_normal((d_out, d_in)) / np.sqrt(d_in)).astype(np.float32)
    x = rng.standard_normal((tokens, d_in)).astype(np.float32)
    bias = rng.standard_normal(d_out).astype(np.float32)
    W = sparse.prune(w, (block, block), density)
    lin = sparse.SparseLinear(W, bias)
    wd = W.to_dense()
    out = np.empty((tokens, d_out), np.float32)
    case = f"ffn {tokens}x{d_in}->{d_out} b{block} d{density:g}"
    if not h.wants(case):
        return
    impls = [("pytpp SparseLinear", lambda: lin(x)),
             ("pytpp dense", lambda: np.add(pytpp.matmul(x, wd.T, out=out), bias, out=out))]
    impls.append(("numpy dense", lambda: np.add(x @ wd.T, bias)))
    csr = sp.csr_array(wd)
    bsr = sp.bsr_array(wd, blocksize=(block, block))
    impls += [("scipy csr", lambda: (csr @ x.T).T + bias),
              ("scipy bsr", lambda: (bsr @ x.T).T + bias)]
    torch = h.torch
    if torch is not None:
        tx, tb = torch.from_numpy(x), torch.from_numpy(bias)
        with warnings.catch_warnings():  # "sparse CSR/BSR tensor support is in beta"
            warnings.simplefilter("ignore", UserWarning)
            tw_csr = torch.from_numpy(wd).to_sparse_csr()
            tw_bsr = torch.from_numpy(wd).to_sparse_bsr((block, block))
        impls += [("torch csr", lambda: torch.addmm(tb[:, None], tw_csr, tx.T).T),
                  ("torch bsr", lambda: torch.addmm(tb[:, None], tw_bsr, tx.T).T),
                  ("torch dense", lambda: torch.nn.functional.linear(tx, torch.from_numpy(wd), tb))]
    h.compare(case, threads, 2.0 * tokens * d_in * d_out * W.density, "GFLOP/s", "f32", impls)


def run(h):
    h.header("Block-sparse x dense (pytpp.sparse): effective GFLOP/s = 2 M K N density / time, "
             "% of peak; ratios vs dense and sparse peers")
    for threads in h.threads:
        h.set_threads(threads)
        spmm_case(h, threads, 4096, 16, 0.1, 256, np.float32)
        spmm_case(h, threads, 4096, 16, 0.1, 256, np.float32, skew=True, peers=False)
        if not h.quick:
            for block in (1, 4, 8, 32):
                spmm_case(h, threads, 2048, block, 0.1, 256, np.float32)
            for density in (0.5, 0.2, 0.05, 0.01):
                spmm_case(h, threads, 2048, 16, density, 256, np.float32)
            spmm_case(h, threads, 2048, 16, 0.1, 32, np.float32)
        spmm_case(h, threads, 4096, 16, 0.1, 256, BF16)
        if not h.quick:
            for block in (4, 8, 16, 32):
                spmm_case(h, threads, 2048, block, 0.1, 256, BF16)
            spmm_case(h, threads, 2048, 16, 0.1, 32, BF16)
        ffn_case(h, threads, 384, 768, 3072)
        ffn_case(h, threads, 384, 3072, 768)
