"""Attention forward alone (``python -m pytpp bench attention``): pytpp.nn's fused
scaled_dot_product_attention against torch's SDPA (float32, CPU) on BERT shapes, 12 heads of
64: seq 512 at batch 1 and 8, seq 128 at batch 8, causal seq 512, and longer sequences (full
score rows up to S = 16384, the online-softmax tiles beyond). The same inputs, both
implementations interleaved in one run; GFLOP/s counts the two products, 4 B H L S E.
``--threads 1,2`` for the thread counts. `bench dense` also times the backward."""
import numpy as np

from pytpp import nn


def _case(h, threads, B, H, L, E, causal=False):
    case = f"sdpa fwd B={B} H={H} L={L} E={E}{' causal' if causal else ''}"
    if not h.wants(case):
        return
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((B, H, L, E)).astype(np.float32) for _ in range(3))
    impls = [("pytpp fused", lambda: nn.scaled_dot_product_attention(q, k, v, is_causal=causal))]
    torch = h.torch
    if torch is not None:
        tq, tk, tv = map(torch.from_numpy, (q, k, v))
        impls.append(("torch SDPA", lambda: torch.nn.functional.scaled_dot_product_attention(
            tq, tk, tv, is_causal=causal)))
    # causal: about half the products are needed; counted in full, as for the other rows
    h.compare(case, threads, 4.0 * B * H * L * L * E, "GFLOP/s", "f32", impls)


def run(h):
    h.header("Attention forward (float32): fused SDPA against torch's")
    for threads in h.threads:
        h.set_threads(threads)
        _case(h, threads, 1, 12, 512, 64)           # BERT-base, seq 512
        _case(h, threads, 8, 12, 512, 64)           # batch 8
        if not h.quick:
            _case(h, threads, 8, 12, 128, 64)       # batch 8 x seq 128
            _case(h, threads, 1, 12, 512, 64, causal=True)
            _case(h, threads, 1, 4, 2048, 64)       # longer sequences
            _case(h, threads, 1, 1, 8192, 64)
