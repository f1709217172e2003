"""Normalisations, optimizer steps and embedding bags: layer_norm and rms_norm forward and backward
on rows that fit the caches, batches that do not, one row (a decoding step: the cost of a call);
batch_norm (train and eval, NCHW and NHWC) and group_norm on ResNet-50 activations (8, 256, 56,
56); SGD, AdamW and split-SGD steps on 16M parameters; embedding_bag forward and backward on
DLRM-like tables (GB/s of bytes read + written, % of the measured copy bandwidth). Every case
but the one-row layer_norm is timed cold: each call after a read of twice the last-level cache.

Peers: torch.nn.functional (forward; backward through autograd of the same graph, timed
without the forward) and the numpy composite a numpy user writes.
"""
import ml_dtypes
import numpy as np

from pytpp import nn

BF16 = np.dtype(ml_dtypes.bfloat16)
# Cases with more bytes than this are timed from a cleaned cache (Harness.time_many's `cold`):
# every implementation then starts alike, instead of one paying for the dirty lines of another.
_WARM_MAX_BYTES = 1 << 20


def _numpy_layer_norm(x, w, b, out):
    mu = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    np.subtract(x, mu, out=out)
    out *= 1.0 / np.sqrt(var + 1e-5)
    out *= w
    out += b
    return out


def _torch_tensor(torch, a):
    if a.dtype == BF16:
        return torch.from_numpy(a.view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _layer_norm(h, threads, shape, dtype):
    torch = h.torch
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    n = shape[-1]
    w, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = np.empty_like(x)
    impls = [("pytpp", lambda: nn.layer_norm(x, n, w, b, out=out))]
    if torch is not None:
        F = torch.nn.functional
        tx = _torch_tensor(torch, x)
        tw, tb = torch.from_numpy(w).to(tx.dtype), torch.from_numpy(b).to(tx.dtype)
        impls.append(("torch", lambda: F.layer_norm(tx, (n,), tw, tb)))
    if dtype == np.float32:
        # its own output: lines it leaves dirty in pytpp's `out` would be written back on
        # pytpp's time
        out_np = np.empty_like(x)
        impls.append(("numpy composite", lambda: _numpy_layer_norm(x, w, b, out_np)))
    h.compare(f"layer_norm {np.dtype(dtype).name} {shape}", threads, 2 * x.nbytes, "GB/s",
              "copy_gbs", impls, cold=x.nbytes > _WARM_MAX_BYTES)


def _layer_norm_backward(h, threads, shape):
    torch = h.torch
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    n = shape[-1]
    w = rng.standard_normal(n).astype(np.float32)
    _, mean, rstd = nn.layer_norm(x, n, w, return_stats=True)
    dx = np.empty_like(x)
    impls = [("pytpp", lambda: nn.layer_norm_backward(g, x, mean, rstd, w, out=dx))]
    if torch is not None:
        tx = torch.from_numpy(x).requires_grad_(True)
        tw = torch.from_numpy(w).requires_grad_(True)
        tb = torch.zeros(n, requires_grad=True)
        ty = torch.nn.functional.layer_norm(tx, (n,), tw, tb)
        tg = torch.from_numpy(g)
        impls.append(("torch autograd", lambda: torch.autograd.grad(ty, (tx, tw, tb), tg,
                                                                    retain_graph=True)))
    h.compare(f"layer_norm_backward float32 {shape}", threads, 3 * x.nbytes, "GB/s", "copy_gbs",
              impls, cold=True)


def _rms_norm(h, threads, shape):
    torch = h.torch
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(np.float32)
    n = shape[-1]
    w = rng.standard_normal(n).astype(np.float32)
    out = np.empty_like(x)
    impls = [("pytpp", lambda: nn.rms_norm(x, n, w, out=out))]
    if torch is not None and hasattr(torch.nn.functional, "rms_norm"):
        tx, tw = torch.from_numpy(x), torch.from_numpy(w)
        impls.append(("torch", lambda: torch.nn.functional.rms_norm(tx, (n,), tw, eps=1e-6)))
    out_np = np.empty_like(x)
    impls.append(("numpy composite", lambda: np.multiply(
        x * (1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6)), w, out=out_np)))
    h.compare(f"rms_norm float32 {shape}", threads, 2 * x.nbytes, "GB/s", "copy_gbs", impls,
              cold=True)
    g = rng.standard_normal(shape).astype(np.float32)
    _, rstd = nn.rms_norm(x, n, w, return_stats=True)
    dx = np.empty_like(x)
    impls = [("pytpp", lambda: nn.rms_norm_backward(g, x, rstd, w, out=dx))]
    if torch is not None and hasattr(torch.nn.functional, "rms_norm"):
        tx = torch.from_numpy(x).requires_grad_(True)
        tw = torch.from_numpy(w).requires_grad_(True)
        ty = torch.nn.functional.rms_norm(tx, (n,), tw, eps=1e-6)
        tg = torch.from_numpy(g)
        impls.append(("torch autograd", lambda: torch.autograd.grad(ty, (tx, tw), tg,
                                                                    retain_graph=True)))
    h.compare(f"rms_norm_backward float32 {shape}", threads, 3 * x.nbytes, "GB/s", "copy_gbs",
              impls, cold=True)


def run(h):
    h.header("Normalisations: GB/s (read + write) and % of measured copy bandwidth")
    for threads in h.threads:
        h.set_threads(threads)
        _layer_norm(h, threads, (16384, 768), np.float32)
        _layer_norm(h, threads, (4096, 1024), np.float32)
        _layer_norm(h, threads, (4096, 1024), BF16)
        _layer_norm(h, threads, (1, 4096), np.float32)   # one token: the call overhead
        _layer_norm_backward(h, threads, (16384, 768))
        _rms_norm(h, threads, (4096, 4096))
        _channel_norms(h, threads, (8, 256, 56, 56))
        _optimizers(h, threads, 16 << 20)
        _embedding_bag(h, threads)


def _channel_norms(h, threads, shape):
    torch = h.torch
    rng = np.random.default_rng(4)
    x = rng.standard_normal(shape).astype(np.float32)
    C = shape[1]
    w, b = rng.standard_normal(C).astype(np.float32), rng.standard_normal(C).astype(np.float32)
    rm, rv = np.zeros(C, np.float32), np.ones(C, np.float32)
    out = np.empty_like(x)
    xl = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    outl = np.empty_like(xl)
    F = torch.nn.functional if torch is not None else None
    tx = torch.from_numpy(x) if torch is not None else None
    txl = torch.from_numpy(xl).permute(0, 3, 1, 2) if torch is not None else None   # channels_last
    tw, tb = (torch.from_numpy(w), torch.from_numpy(b)) if torch is not None else (None, None)
    trm, trv = (torch.from_numpy(rm.copy()), torch.from_numpy(rv.copy())) if torch else (None, None)
    for training in (True, False):
        mode = "train" if training else "eval"
        for fmt, xx, oo, tt in (("NCHW", x, out, tx), ("NHWC", xl, outl, txl)):
            impls = [("pytpp", lambda: nn.batch_norm(xx, rm, rv, w, b, training, data_format=fmt,
                                                     out=oo))]
            if torch is not None:
                impls.append(("torch", lambda: F.batch_norm(tt, trm, trv, tw, tb, training)))
            h.compare(f"batch_norm {mode} {fmt} f32 {shape}", threads, 2 * x.nbytes, "GB/s",
                      "copy_gbs", impls, cold=True)
    impls = [("pytpp", lambda: nn.group_norm(x, 32, w, b, out=out))]
    if torch is not None:
        impls.append(("torch", lambda: F.group_norm(tx, 32, tw, tb)))
    h.compare(f"group_norm 32 groups f32 {shape}", threads, 2 * x.nbytes, "GB/s", "copy_gbs",
              impls, cold=True)
    g = rng.standard_normal(shape).astype(np.float32)
    _, mean, rstd = nn.batch_norm(x, None, None, w, b, True, return_stats=True)
    gx = np.empty_like(x)
    impls = [("pytpp", lambda: nn.batch_norm_backward(g, x, mean, rstd, w, out=gx))]
    if torch is not None:
        txg = torch.from_numpy(x.copy()).requires_grad_(True)
        twg, tbg = tw.clone().requires_grad_(True), tb.clone().requires_grad_(True)
        ty = F.batch_norm(txg, None, None, twg, tbg, True)
        tg = torch.from_numpy(g)
        impls.append(("torch autograd", lambda: torch.autograd.grad(ty, (txg, twg, tbg), tg,
                                                                    retain_graph=True)))
    h.compare(f"batch_norm_backward NCHW f32 {shape}", threads, 3 * x.nbytes, "GB/s", "copy_gbs",
              impls, cold=True)


def _optimizers(h, threads, n):
    torch = h.torch
    rng = np.random.default_rng(3)
    p = rng.standard_normal(n).astype(np.float32)
    g = rng.standard_normal(n).astype(np.float32) * np.float32(1e-3)
    buf, m, v = np.zeros(n, np.float32), np.zeros(n, np.float32), np.zeros(n, np.float32)
    impls = [("pytpp", lambda: nn.sgd_step(p, g, buf, lr=1e-3, momentum=0.9, weight_decay=1e-4))]
    if torch is not None:
        tp = torch.from_numpy(p.copy())
        tp.grad = torch.from_numpy(g)
        opt = torch.optim.SGD([tp], lr=1e-3, momentum=0.9, weight_decay=1e-4)
        impls.append(("torch SGD", opt.step))
    h.compare(f"sgd_step momentum float32 n={n}", threads, 20 * n, "GB/s", "copy_gbs", impls,
              cold=True)
    steps = iter(range(1, 1 << 30))
    impls = [("pytpp", lambda: nn.adamw_step(p, g, m, v, step=next(steps)))]
    if torch is not None:
        tp = torch.from_numpy(p.copy())
        tp.grad = torch.from_numpy(g)
        opt_a = torch.optim.AdamW([tp], lr=1e-3)
        impls.append(("torch AdamW", opt_a.step))
        if "fused" in torch.optim.AdamW.__init__.__code__.co_varnames:
            tq = torch.from_numpy(p.copy())
            tq.grad = torch.from_numpy(g)
            try:
                opt_f = torch.optim.AdamW([tq], lr=1e-3, fused=True)
                opt_f.step()
                impls.append(("torch AdamW fused", opt_f.step))
            except (RuntimeError, ValueError):
                pass
    h.compare(f"adamw_step float32 n={n}", threads, 28 * n, "GB/s", "copy_gbs", impls, cold=True)
    bits = p.view(np.uint32)
    hi = (bits >> 16).astype(np.uint16).view(BF16)
    lo = (bits & 0xFFFF).astype(np.uint16)
    impls = [("pytpp", lambda: nn.split_sgd_step(hi, lo, g, lr=1e-3))]
    if torch is not None:
        th = torch.from_numpy(hi.view(np.uint16).astype(np.int32))
        tl = torch.from_numpy(lo.astype(np.int32))
        tg = torch.from_numpy(g)
        h16, l16 = torch.from_numpy(hi.view(np.int16)), torch.from_numpy(lo.view(np.int16))

        def torch_split():   # the same update composed of torch ops on int32 views
            master = ((h16.to(torch.int32) & 0xFFFF) << 16 | (l16.to(torch.int32) & 0xFFFF))
            w = master.view(torch.float32).sub_(tg, alpha=1e-3).view(torch.int32)
            h16.copy_((w >> 16).to(torch.int16))
            l16.copy_((w & 0xFFFF).to(torch.int16))
        del th, tl
        impls.append(("torch composite", torch_split))

    def numpy_split():
        master = ((hi.view(np.uint16).astype(np.uint32) << 16) | lo).view(np.float32)
        master -= np.float32(1e-3) * g
        w = master.view(np.uint32)
        hi.view(np.uint16)[...] = w >> 16
        lo[...] = w & 0xFFFF
    impls.append(("numpy composite", numpy_split))
    h.compare(f"split_sgd_step n={n}", threads, 12 * n, "GB/s", "copy_gbs", impls, cold=True)


def _embedding_bag(h, threads, rows=1_000_000, dim=64, bags=2048):
    """DLRM-like tables (TPP paper 5.2.2): rows x dim, float32 and bfloat16, `bags` bags of 32-100
    random rows (mode sum). Bytes: the rows gathered, the indices and the output (forward); the
    gradient written, the indices and grad_out (backward, dense)."""
    names = {dt: (f"embedding_bag sum {np.dtype(dt).name} ({rows}, {dim}) {bags} bags",
                  f"embedding_bag_backward sum {np.dtype(dt).name} ({rows}, {dim}) {bags} bags")
             for dt in (np.float32, BF16)}
    if not any(h.wants(c) for pair in names.values() for c in pair):
        return                                  # (the tables take 384 MB)
    torch = h.torch
    rng = np.random.default_rng(4)
    lens = rng.integers(32, 101, bags)
    offsets = np.concatenate(([0], np.cumsum(lens)[:-1])).astype(np.int64)
    n = int(lens.sum())
    indices = rng.integers(0, rows, n)
    bag_of = np.repeat(np.arange(bags), lens)
    g = rng.standard_normal((bags, dim)).astype(np.float32)
    for dt, (fwd_case, bwd_case) in names.items():
        if not (h.wants(fwd_case) or h.wants(bwd_case)):
            continue
        w = rng.standard_normal((rows, dim), dtype=np.float32).astype(dt, copy=False)
        esz = w.itemsize
        y = np.empty((bags, dim), dt)
        impls = [("pytpp", lambda: nn.embedding_bag(w, indices, offsets, out=y))]
        if torch is not None:
            F = torch.nn.functional
            tw = _torch_tensor(torch, w)
            ti, to = torch.from_numpy(indices), torch.from_numpy(offsets)
            impls.append(("torch", lambda: F.embedding_bag(ti, tw, to, mode="sum")))
        if dt == np.float32:
            # into buffers made once, as the other composites here: no 35 MB temporary made
            # and freed in the timed loop (freed memory slows the next call on these VMs)
            rows_buf, y_np = np.empty((n, dim), dt), np.empty((bags, dim), dt)
            impls.append(("numpy composite", lambda: np.add.reduceat(
                np.take(w, indices, axis=0, out=rows_buf), offsets, axis=0, out=y_np)))
        h.compare(fwd_case, threads, n * (dim * esz + 8) + bags * dim * esz, "GB/s", "copy_gbs",
                  impls, cold=True)
        gw = nn.embedding_bag_backward(g, w, indices, offsets)
        impls = [("pytpp", lambda: nn.embedding_bag_backward(g, w, indices, offsets)),
                 ("pytpp out=", lambda: nn.embedding_bag_backward(g, w, indices, offsets, out=gw))]
        if torch is not None:
            twg = _torch_tensor(torch, w).requires_grad_(True)
            ty = F.embedding_bag(ti, twg, to, mode="sum")
            tg = torch.from_numpy(g).to(twg.dtype)
            impls.append(("torch autograd", lambda: torch.autograd.grad(ty, twg, tg,
                                                                        retain_graph=True)))
        if dt == np.float32:
            def numpy_backward():
                out = np.zeros((rows, dim), np.float32)
                np.add.at(out, indices, g[bag_of])
                return out
            impls.append(("numpy composite", numpy_backward))
        h.compare(bwd_case, threads, rows * dim * esz + n * 8 + bags * dim * 4, "GB/s", "copy_gbs",
                  impls, cold=True)
        del w, gw
