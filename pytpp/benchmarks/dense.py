"""Dense layers: linear with a fused activation (and residual), against pytpp's own matmul then
gelu, torch's F.linear then its activation, and numpy; the weight packed once (PackedLinear) for
repeated inference; bf16 linear at decoding batch sizes against torch's; fused attention against
torch's SDPA and pytpp's unfused pieces. GFLOP/s and % of the measured fp32 FMA peak (bf16: of
the vdpbf16ps peak, or of the fp32 one on CPUs without it)."""
import numpy as np

from pytpp import linalg, nn


def _case(h, threads, m, k, n, activation, residual):
    torch = h.torch
    rng = np.random.default_rng(0)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    r = rng.standard_normal((m, n)).astype(np.float32) if residual else None
    out, tmp = np.empty((m, n), np.float32), np.empty((m, n), np.float32)
    packed = nn.PackedLinear(w, b)
    act = activation

    def unfused():
        linalg.matmul(x, w.T, out=tmp)
        np.add(tmp, b, out=tmp)
        if act == "gelu":
            nn.gelu(tmp, out=tmp)
        elif act == "relu":
            nn.relu(tmp, out=tmp)
        if r is not None:
            np.add(tmp, r, out=tmp)

    impls = [("pytpp linear", lambda: nn.linear(x, w, b, activation=act, residual=r, out=out)),
             ("pytpp packed", lambda: packed(x, activation=act, residual=r, out=out)),
             ("pytpp matmul+act", unfused)]
    if torch is not None:
        F = torch.nn.functional
        tx, tw, tb = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)
        tr = torch.from_numpy(r) if r is not None else None
        tact = {"gelu": F.gelu, "relu": F.relu, None: lambda t: t}[act]

        def torch_fn():
            y = tact(F.linear(tx, tw, tb))
            return y.add_(tr) if tr is not None else y
        impls.append(("torch", torch_fn))
    # numpy: the product and bias only (its activation would be a further pass): a lower bound
    impls.append(("numpy x@w.T+b", lambda: np.add(x @ w.T, b)))
    label = f"linear{'+' + act if act else ''}{'+res' if residual else ''} {m}x{k}->{n}"
    h.compare(label, threads, 2.0 * m * k * n, "GFLOP/s", "f32", impls)


def _case_bf16(h, threads, m, k, n):
    """bf16 linear (fp32 accumulation, bf16 out): w in torch's layout as given and packed once,
    against torch's bf16 F.linear."""
    case = f"linear bf16 {m}x{k}->{n}"
    if not h.wants(case):
        return
    import ml_dtypes
    bf16 = np.dtype(ml_dtypes.bfloat16)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((m, k)).astype(np.float32).astype(bf16)
    w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32).astype(bf16)
    out = np.empty((m, n), bf16)
    packed = nn.PackedLinear(w)
    impls = [("pytpp linear", lambda: nn.linear(x, w, out=out)),
             ("pytpp packed", lambda: packed(x, out=out))]
    torch = h.torch
    if torch is not None:
        tx = torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16)
        tw = torch.from_numpy(w.astype(np.float32)).to(torch.bfloat16)
        impls.append(("torch bf16", lambda: torch.nn.functional.linear(tx, tw)))
    h.compare(case, threads, 2.0 * m * k * n, "GFLOP/s", "bf16", impls,
              nbytes=x.nbytes + w.nbytes + out.nbytes)


def _attention(h, threads, B, H, L, E):
    torch = h.torch
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((B, H, L, E)).astype(np.float32) for _ in range(3))
    impls = [("pytpp fused", lambda: nn.scaled_dot_product_attention(q, k, v))]
    if torch is not None:
        tq, tk, tv = map(torch.from_numpy, (q, k, v))
        impls.append(("torch SDPA", lambda: torch.nn.functional.scaled_dot_product_attention(
            tq, tk, tv)))

    def unfused():   # pytpp's own pieces with the (L, L) scores in memory
        s = linalg.matmul(q, np.swapaxes(k, -1, -2)) * np.float32(1 / np.sqrt(E))
        return linalg.matmul(nn.softmax(s, out=s), v)
    impls.append(("pytpp matmul+softmax", unfused))
    h.compare(f"attention B={B} H={H} L={L} E={E}", threads, 4.0 * B * H * L * L * E,
              "GFLOP/s", "f32", impls)
    g = rng.standard_normal(q.shape).astype(np.float32)
    impls = [("pytpp fused", lambda: nn.scaled_dot_product_attention_backward(g, q, k, v))]

    def numpy_blocks():   # the reference path: blocks of 128 queries through pytpp.matmul
        from pytpp.nn import _attention as front
        front._BWD_PATH = "numpy"
        try:
            return nn.scaled_dot_product_attention_backward(g, q, k, v)
        finally:
            front._BWD_PATH = "auto"
    impls.append(("pytpp numpy blocks", numpy_blocks))
    if torch is not None:
        tq, tk, tv = (torch.from_numpy(a.copy()).requires_grad_(True) for a in (q, k, v))
        to = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv)
        tg = torch.from_numpy(g)
        impls.append(("torch autograd", lambda: torch.autograd.grad(to, (tq, tk, tv), tg,
                                                                    retain_graph=True)))
    h.compare(f"attention backward B={B} H={H} L={L} E={E}", threads,
              10.0 * B * H * L * L * E, "GFLOP/s", "f32", impls)


def _mlp(h, threads, batch, width, depth):
    case = f"mlp {depth}x{width} batch {batch}"
    if not h.wants(case):
        return
    rng = np.random.default_rng(3)
    layers = [((rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32),
               rng.standard_normal(width).astype(np.float32), "relu") for _ in range(depth)]
    x = rng.standard_normal((batch, width)).astype(np.float32)
    packed = nn.PackedMLP(layers)
    impls = [("pytpp.nn.mlp", lambda: nn.mlp(x, layers)),
             ("pytpp PackedMLP", lambda: packed(x))]

    def chain():
        y = x
        for w, b, act in layers:
            y = nn.linear(y, w, b, activation=act)
        return y
    impls.append(("pytpp linear x3", chain))
    torch = h.torch
    if torch is not None:
        seq = torch.nn.Sequential(*[m for w, b, _ in layers for m in (
            torch.nn.Linear(width, width), torch.nn.ReLU())])
        tx = torch.from_numpy(x)

        def run_torch():
            with torch.no_grad():
                return seq(tx)
        impls.append(("torch Sequential", run_torch))
    h.compare(case, threads, 2.0 * batch * width * width * depth, "GFLOP/s", "f32", impls)


def _bert(h, threads, B, L, D=768, H=12, F=3072):
    case = f"bert layer B={B} L={L} D={D}"
    if not h.wants(case):
        return
    w = nn.bert_layer_weights(D, F)
    x = np.random.default_rng(4).standard_normal((B, L, D)).astype(np.float32)
    impls = [("pytpp bert_layer", lambda: nn.bert_layer(x, w, H))]
    torch = h.torch
    if torch is not None:
        layer = torch.nn.TransformerEncoderLayer(D, H, F, dropout=0.0, activation="gelu",
                                                 batch_first=True, layer_norm_eps=1e-12).eval()
        tx = torch.from_numpy(x)

        def run_torch():
            with torch.no_grad():
                return layer(tx)
        impls.append(("torch EncoderLayer", run_torch))
    flops = B * L * (2.0 * D * 4 * D + 2.0 * 2 * D * F) + 4.0 * B * L * L * D
    h.compare(case, threads, flops, "GFLOP/s", "f32", impls)


def run(h):
    h.header("Dense layers (float32; bf16 at decoding sizes): linear with fused bias + activation"
             " (+ residual)")
    shapes = [(1024, 768, 3072, "gelu", False),     # BERT-base FFN up, batch 8 x seq 128
              (1024, 3072, 768, None, True),        # FFN down + residual
              (512, 1024, 1024, "relu", False),     # an MLP layer 1024 wide
              (8, 4096, 4096, None, False),         # an LLM decoder step (M = 8)
              (1, 4096, 4096, None, False),         # one token: w read once (a GEMV)
              (8, 4096, 11008, None, False),        # a LLaMA-7B MLP projection, 8 tokens
              (1, 4096, 11008, None, False)]        # ... and one
    if h.quick:
        shapes = shapes[:1] + shapes[2:3]
    for threads in h.threads:
        h.set_threads(threads)
        for m, k, n, act, res in shapes:
            _case(h, threads, m, k, n, act, res)
        bf16_shapes = [(1, 4096, 4096), (8, 4096, 4096), (32, 4096, 4096)] if h.quick else [
            (1, 4096, 4096), (4, 4096, 4096), (8, 4096, 4096), (32, 4096, 4096),
            (128, 4096, 4096),                             # a short prompt
            (1, 4096, 11008), (8, 4096, 11008)]            # decoding steps
        for m, k, n in bf16_shapes:
            _case_bf16(h, threads, m, k, n)
        _attention(h, threads, 1, 12, 512, 64)          # BERT-base, seq 512
        if not h.quick:
            _attention(h, threads, 8, 12, 128, 64)      # BERT-base, batch 8 x seq 128
        _mlp(h, threads, 256, 1024, 3)                  # a 3-layer MLP 1024 wide
        _bert(h, threads, 1, 128)                       # a whole BERT-base layer
        if not h.quick:
            _bert(h, threads, 1, 512)
