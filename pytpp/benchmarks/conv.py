"""Convolutions: the distinct conv layers of ResNet-50 (the 7x7/2 stem, the 1x1 and 3x3 layers
of each stage, strided ones included), float32, forward and backward by data and by weights at
N = 1 and N = 8 (--quick: a subset of the layers, N = 8 forward on its stem and 3x3 layers, no
N = 8 backward), and the ATACworks 1D dilated convolution (W = 60400, C = K = 15, S = 51, d = 8).

bfloat16 forward (the "... bf16" rows, the same layer sets): pytpp's bf16 engine through both
APIs against torch bf16 in both memory formats and pytpp float32 NHWC on the same values, % of
the measured bf16 peak; summaries of bf16 over torch bf16 and over pytpp float32.

Peers: torch.nn.functional.conv2d (oneDNN) on NCHW and on channels_last tensors, and numpy
im2col + matmul (the patch matrix by sliding_window_view, then np.matmul). pytpp runs through
both of its APIs, NHWC (its natural layout) and NCHW (transposed in and out per call); the
weight is a PackedConvWeight, as an inference loop holds it. After each group, a summary line:
the geometric mean over layers of pytpp's better format against torch's better format, and the
worst layer. GFLOP/s and % of the measured fp32 FMA peak.

A "yaconv" group times the algorithms against each other on the stride-1 3x3 layers (YaConv's
domain, thesis 002 ch. 5) at N = 1 and N = 8, NHWC: algorithm="yaconv", "brgemm" and "auto"
interleaved in one run, torch beside them; its summary gives brgemm's time over yaconv's per
layer (above 1: yaconv faster), the figures behind conv2d's "auto" rule.

A "pool" group times max_pool2d / avg_pool2d forward and backward (ResNet-50's 3x3/2 stem pool, a
2x2/2 average pool, the 7x7 global average pool) in both formats against torch in both (backward:
torch's autograd), in GB/s of the arrays read and written (% of the measured copy bandwidth).
"""
import math

import numpy as np

from pytpp import nn

# (C, H, K, R, stride, padding): ResNet-50 v1.5, input 224x224
RESNET50 = [
    (3, 224, 64, 7, 2, 3),
    (64, 56, 64, 1, 1, 0), (64, 56, 64, 3, 1, 1), (64, 56, 256, 1, 1, 0), (256, 56, 64, 1, 1, 0),
    (256, 56, 128, 1, 2, 0), (128, 56, 128, 3, 2, 1), (256, 56, 512, 1, 2, 0),
    (128, 28, 128, 3, 1, 1), (128, 28, 512, 1, 1, 0), (512, 28, 128, 1, 1, 0),
    (512, 28, 256, 1, 2, 0), (256, 28, 256, 3, 2, 1), (512, 28, 1024, 1, 2, 0),
    (256, 14, 256, 3, 1, 1), (256, 14, 1024, 1, 1, 0), (1024, 14, 256, 1, 1, 0),
    (1024, 14, 512, 1, 2, 0), (512, 14, 512, 3, 2, 1), (1024, 14, 2048, 1, 2, 0),
    (512, 7, 512, 3, 1, 1), (512, 7, 2048, 1, 1, 0), (2048, 7, 512, 1, 1, 0),
]
QUICK = [0, 2, 4, 8, 16, 20]


def _numpy_im2col(x, w, stride, pad):
    """The baseline a numpy user writes: the patch matrix, then one matmul."""
    N, C = x.shape[:2]
    K, _, R, S = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad))) if pad else x
    win = np.lib.stride_tricks.sliding_window_view(xp, (R, S), axis=(2, 3))
    win = win[:, :, ::stride, ::stride]
    P, Q = win.shape[2:4]
    cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(N * P * Q, C * R * S)
    return (cols @ w.reshape(K, C * R * S).T).reshape(N, P, Q, K)


def _label(N, C, H, K, R, stride):
    return f"conv N={N} C{C} {H}x{H} K{K} {R}x{R}/{stride}"


def _torch_forward(torch, tx, tw, stride, pad, name):
    """torch's conv2d on x and w as given (NCHW) and in channels_last: two impls."""
    F = torch.nn.functional
    txc = tx.contiguous(memory_format=torch.channels_last)
    twc = tw.contiguous(memory_format=torch.channels_last)

    def run_torch(a, b):
        with torch.no_grad():
            return F.conv2d(a, b, None, stride, pad)
    return [(f"{name} NCHW", lambda: run_torch(tx, tw)),
            (f"{name} NHWC", lambda: run_torch(txc, twc))]


def _forward(h, threads, N, layer, summary):
    torch = h.torch
    C, H, K, R, stride, pad = layer
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, C, H, H)).astype(np.float32)
    w = (rng.standard_normal((K, C, R, R)) / math.sqrt(C * R * R)).astype(np.float32)
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    pw = nn.PackedConvWeight(w)
    P = (H + 2 * pad - R) // stride + 1
    o_nchw, o_nhwc = np.empty((N, K, P, P), np.float32), np.empty((N, P, P, K), np.float32)
    impls = [("pytpp NHWC", lambda: nn.conv2d(xh, pw, None, stride, pad, data_format="NHWC",
                                              out=o_nhwc)),
             ("pytpp NCHW", lambda: nn.conv2d(x, pw, None, stride, pad, out=o_nchw))]
    if torch is not None:
        impls += _torch_forward(torch, torch.from_numpy(x), torch.from_numpy(w), stride, pad,
                                "torch")
    if N == 1:
        impls.append(("numpy im2col", lambda: _numpy_im2col(x, w, stride, pad)))
    _ratios(h.compare(_label(N, C, H, K, R, stride), threads, 2.0 * N * K * P * P * C * R * R,
                      "GFLOP/s", "f32", impls), summary)


def _forward_bf16(h, threads, N, layer, vs_torch, vs_f32):
    """bfloat16 x and w: pytpp's bf16 engine (both APIs, bf16 out) against torch bf16 in both
    memory formats and pytpp float32 NHWC on the same values, % of the bf16 peak."""
    import ml_dtypes
    torch = h.torch
    bf = ml_dtypes.bfloat16
    C, H, K, R, stride, pad = layer
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, C, H, H)).astype(bf)
    w = (rng.standard_normal((K, C, R, R)) / math.sqrt(C * R * R)).astype(bf)
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    xh32 = xh.astype(np.float32)
    pw, pw32 = nn.PackedConvWeight(w), nn.PackedConvWeight(w.astype(np.float32))
    P = (H + 2 * pad - R) // stride + 1
    o_nchw, o_nhwc = np.empty((N, K, P, P), bf), np.empty((N, P, P, K), bf)
    o32 = np.empty((N, P, P, K), np.float32)
    impls = [("pytpp bf16 NHWC", lambda: nn.conv2d(xh, pw, None, stride, pad,
                                                   data_format="NHWC", out=o_nhwc)),
             ("pytpp bf16 NCHW", lambda: nn.conv2d(x, pw, None, stride, pad, out=o_nchw)),
             ("pytpp f32 NHWC", lambda: nn.conv2d(xh32, pw32, None, stride, pad,
                                                  data_format="NHWC", out=o32))]
    if torch is not None:
        impls += _torch_forward(torch, torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16),
                                torch.from_numpy(w.astype(np.float32)).to(torch.bfloat16),
                                stride, pad, "torch bf16")
    res = h.compare(_label(N, C, H, K, R, stride) + " bf16", threads,
                    2.0 * N * K * P * P * C * R * R, "GFLOP/s", "bf16", impls)
    t = {name: med for name, med, _ in res}
    if "pytpp bf16 NHWC" not in t:      # not selected (--match)
        return
    best = min(t["pytpp bf16 NHWC"], t["pytpp bf16 NCHW"])
    vs_f32.append(t["pytpp f32 NHWC"] / t["pytpp bf16 NHWC"])
    if "torch bf16 NCHW" in t:
        vs_torch.append((min(t["torch bf16 NCHW"], t["torch bf16 NHWC"]) / best,
                         t["torch bf16 NCHW"] / t["pytpp bf16 NCHW"]))


def _bf16_summary(h, what, vs_torch, vs_f32):
    _summary(h, what, vs_torch)
    if vs_f32:
        geo = math.exp(sum(map(math.log, vs_f32)) / len(vs_f32))
        h.out(f"-- {what}: pytpp bf16 over pytpp float32 (NHWC): geomean x{geo:.2f}, worst "
              f"layer x{min(vs_f32):.2f} ({len(vs_f32)} layers)")


YACONV_LAYERS = [2, 8, 14, 20]           # the stride-1 3x3 layers of RESNET50


def _yaconv(h, threads, N, layer, ratios):
    """yaconv vs brgemm vs auto (NHWC, packed weight, out=) and torch on one 3x3 layer."""
    torch = h.torch
    C, H, K, R, stride, pad = layer
    rng = np.random.default_rng(3)
    xh = rng.standard_normal((N, H, H, C)).astype(np.float32)
    w = (rng.standard_normal((K, C, R, R)) / math.sqrt(C * R * R)).astype(np.float32)
    pw = nn.PackedConvWeight(w)
    P = (H + 2 * pad - R) // stride + 1
    o = np.empty((N, P, P, K), np.float32)

    def run(algorithm):
        return lambda: nn.conv2d(xh, pw, None, stride, pad, data_format="NHWC", out=o,
                                 algorithm=algorithm)
    impls = [("pytpp yaconv", run("yaconv")), ("pytpp brgemm", run("brgemm")),
             ("pytpp auto", run("auto"))]
    if torch is not None:
        F = torch.nn.functional
        txc = torch.from_numpy(xh).permute(0, 3, 1, 2)       # channels_last, no copy
        twc = torch.from_numpy(w).contiguous(memory_format=torch.channels_last)

        def run_torch():
            with torch.no_grad():
                return F.conv2d(txc, twc, None, stride, pad)
        impls.append(("torch NHWC", run_torch))
    res = h.compare(_label(N, C, H, K, R, stride) + " algo", threads,
                    2.0 * N * K * P * P * C * R * R, "GFLOP/s", "f32", impls)
    if res:
        t = {name: med for name, med, _ in res}
        ratios.append((f"C{C} {H}x{H}", t["pytpp brgemm"] / t["pytpp yaconv"]))


def _yaconv_summary(h, what, ratios):
    if not ratios:
        return
    geo = math.exp(sum(math.log(r) for _, r in ratios) / len(ratios))
    per = ", ".join(f"{name} x{r:.2f}" for name, r in ratios)
    h.out(f"-- {what}: brgemm time / yaconv time (>1: yaconv faster): {per}; geomean x{geo:.2f}")


POOLS = [  # (name, op, N, C, H, kernel, stride, padding)
    ("maxpool 3x3/2 C64 112x112", "max", 1, 64, 112, 3, 2, 1),
    ("maxpool 3x3/2 C64 112x112", "max", 8, 64, 112, 3, 2, 1),
    ("avgpool 2x2/2 C256 56x56", "avg", 8, 256, 56, 2, 2, 0),
    ("avgpool 7x7 C2048 7x7", "avg", 8, 2048, 7, 7, 7, 0),
]


def _pool(h, threads, case):
    torch = h.torch
    name, op, N, C, H, k, s, p = case
    rng = np.random.default_rng(4)
    x = rng.standard_normal((N, C, H, H)).astype(np.float32)
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    f = nn.max_pool2d if op == "max" else nn.avg_pool2d
    impls = [("pytpp NHWC", lambda: f(xh, k, s, p, data_format="NHWC")),
             ("pytpp NCHW", lambda: f(x, k, s, p))]
    if op == "max":
        impls += [("pytpp NHWC +indices", lambda: f(xh, k, s, p, data_format="NHWC",
                                                    return_indices=True)),
                  ("pytpp NCHW +indices", lambda: f(x, k, s, p, return_indices=True))]
    if torch is not None:
        tf = torch.nn.functional.max_pool2d if op == "max" else torch.nn.functional.avg_pool2d
        tx = torch.from_numpy(x)
        txc = tx.contiguous(memory_format=torch.channels_last)
        impls += [("torch NCHW", lambda: tf(tx, k, s, p)), ("torch NHWC", lambda: tf(txc, k, s, p))]
        if op == "max":
            impls += [("torch NHWC +indices", lambda: tf(txc, k, s, p, return_indices=True))]
    P = (H + 2 * p - k) // s + 1
    nbytes = 4.0 * N * C * (H * H + P * P)
    h.compare(f"{name} N={N} pool", threads, nbytes, "GB/s", "copy_gbs", impls,
              flops=N * C * P * P * k * k)
    # backward: pytpp reads x again (its maximum found anew), or with the forward's indices
    # (max) scatters to them as torch's autograd does with its saved ones; bytes: x (max only),
    # grad_out and grad_x
    g = rng.standard_normal((N, C, P, P)).astype(np.float32)
    gh = np.ascontiguousarray(g.transpose(0, 2, 3, 1))
    b = nn.max_pool2d_backward if op == "max" else nn.avg_pool2d_backward
    impls = [("pytpp NHWC", lambda: b(gh, xh, k, s, p, data_format="NHWC")),
             ("pytpp NCHW", lambda: b(g, x, k, s, p))]
    if op == "max":
        ih = f(xh, k, s, p, data_format="NHWC", return_indices=True)[1]
        ic = f(x, k, s, p, return_indices=True)[1]
        impls += [("pytpp NHWC indices", lambda: b(gh, xh, k, s, p, data_format="NHWC",
                                                   indices=ih)),
                  ("pytpp NCHW indices", lambda: b(g, x, k, s, p, indices=ic))]
    if torch is not None:
        tg = torch.from_numpy(g)
        txr = torch.from_numpy(x).requires_grad_(True)
        txcr = torch.from_numpy(x).contiguous(memory_format=torch.channels_last).requires_grad_(True)
        ty, tyc = tf(txr, k, s, p), tf(txcr, k, s, p)
        tgc = tg.contiguous(memory_format=torch.channels_last)
        impls += [("torch NCHW", lambda: torch.autograd.grad(ty, txr, tg, retain_graph=True)),
                  ("torch NHWC", lambda: torch.autograd.grad(tyc, txcr, tgc, retain_graph=True))]
    nbytes = 4.0 * N * C * ((2 if op == "max" else 1) * H * H + P * P)
    h.compare(f"{name} N={N} pool backward", threads, nbytes, "GB/s", "copy_gbs", impls)


def _summary(h, what, summary):
    if not summary:
        return
    best = [s[0] for s in summary]
    nchw = [s[1] for s in summary]
    geo = math.exp(sum(map(math.log, best)) / len(best))
    geo_nchw = math.exp(sum(map(math.log, nchw)) / len(nchw))
    h.out(f"-- {what}: pytpp (better format) over torch (better format): geomean x{geo:.2f}, "
          f"worst layer x{min(best):.2f}; NCHW API over torch NCHW: geomean x{geo_nchw:.2f}, "
          f"worst x{min(nchw):.2f} ({len(best)} layers)")


def _ratios(res, summary):
    """pytpp's better format over torch's better format, and NCHW over NCHW, from one compare."""
    t = {name: med for name, med, _ in res}
    if "torch NCHW" in t:
        summary.append((min(t["torch NCHW"], t["torch NHWC"]) / min(t["pytpp NHWC"],
                                                                    t["pytpp NCHW"]),
                        t["torch NCHW"] / t["pytpp NCHW"]))


def _backward(h, threads, N, layer, data_summary, weight_summary):
    torch = h.torch
    C, H, K, R, stride, pad = layer
    rng = np.random.default_rng(1)
    x = rng.standard_normal((N, C, H, H)).astype(np.float32)
    w = (rng.standard_normal((K, C, R, R)) / math.sqrt(C * R * R)).astype(np.float32)
    P = (H + 2 * pad - R) // stride + 1
    go = rng.standard_normal((N, K, P, P)).astype(np.float32)
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    goh = np.ascontiguousarray(go.transpose(0, 2, 3, 1))
    flops = 2.0 * N * K * P * P * C * R * R
    label = _label(N, C, H, K, R, stride)
    tx = tw = tgo = None
    if torch is not None:
        tx = torch.from_numpy(x).contiguous(memory_format=torch.channels_last)
        tw = torch.from_numpy(w).contiguous(memory_format=torch.channels_last)
        tgo = torch.from_numpy(go).contiguous(memory_format=torch.channels_last)
        txn, twn, tgon = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(go)

        def torch_bd(a, b, g):
            return torch.ops.aten.convolution_backward(
                g, a, b, None, (stride, stride), (pad, pad), (1, 1), False, (0, 0), 1,
                (True, False, False))

        def torch_bw(a, b, g):
            return torch.ops.aten.convolution_backward(
                g, a, b, [K], (stride, stride), (pad, pad), (1, 1), False, (0, 0), 1,
                (False, True, True))
    impls = [("pytpp NHWC", lambda: nn.conv2d_backward_data(goh, w, xh.shape, stride, pad,
                                                            data_format="NHWC")),
             ("pytpp NCHW", lambda: nn.conv2d_backward_data(go, w, x.shape, stride, pad))]
    if torch is not None:
        impls += [("torch NCHW", lambda: torch_bd(txn, twn, tgon)),
                  ("torch NHWC", lambda: torch_bd(tx, tw, tgo))]
    _ratios(h.compare(label + " bwd-data", threads, flops, "GFLOP/s", "f32", impls),
            data_summary)
    impls = [("pytpp NHWC", lambda: nn.conv2d_backward_weight(goh, xh, w.shape, stride, pad,
                                                              data_format="NHWC")),
             ("pytpp NCHW", lambda: nn.conv2d_backward_weight(go, x, w.shape, stride, pad))]
    if torch is not None:
        impls += [("torch NCHW", lambda: torch_bw(txn, twn, tgon)),
                  ("torch NHWC", lambda: torch_bw(tx, tw, tgo))]
    _ratios(h.compare(label + " bwd-weight", threads, flops, "GFLOP/s", "f32", impls),
            weight_summary)


def _atacworks(h, threads, N=1, W=60400, C=15, S=51, d=8):
    torch = h.torch
    rng = np.random.default_rng(2)
    x = rng.standard_normal((N, C, W)).astype(np.float32)
    w = (rng.standard_normal((C, C, S)) / math.sqrt(C * S)).astype(np.float32)
    b = rng.standard_normal(C).astype(np.float32)
    out = np.empty((N, C, W), np.float32)
    impls = [("pytpp", lambda: nn.conv1d(x, w, b, padding="same", dilation=d,
                                         activation="relu", out=out))]
    if torch is not None:
        F = torch.nn.functional
        tx, tw, tb = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)

        def run_torch():
            with torch.no_grad():
                return torch.relu(F.conv1d(tx, tw, tb, 1, "same", d))
        impls.append(("torch", run_torch))
    flops = 2.0 * N * C * W * C * S
    h.compare(f"conv1d N={N} C=K={C} W={W} S={S} d={d} +relu", threads, flops, "GFLOP/s", "f32",
              impls)
    go = rng.standard_normal((N, C, W)).astype(np.float32)
    impls = [("pytpp bwd-data", lambda: nn.conv1d_backward_data(go, w, x.shape, 1, "same", d)),
             ("pytpp bwd-weight", lambda: nn.conv1d_backward_weight(go, x, w.shape, 1, "same",
                                                                    d))]
    if torch is not None:
        txr = torch.from_numpy(x).requires_grad_(True)
        twr = torch.from_numpy(w).requires_grad_(True)
        ty = torch.nn.functional.conv1d(txr, twr, None, 1, "same", d)
        tgo = torch.from_numpy(go)
        impls.append(("torch autograd (both)",
                      lambda: torch.autograd.grad(ty, (txr, twr), tgo, retain_graph=True)))
    h.compare(f"conv1d backward C=K={C} W={W} S={S} d={d}", threads, flops, "GFLOP/s", "f32",
              impls)


def run(h):
    h.header("Convolutions (float32, bfloat16 forward): ResNet-50 layers, forward and backward; "
             "ATACworks conv1d")
    import warnings
    warnings.filterwarnings("ignore", message="Using padding='same'")
    layers = [RESNET50[i] for i in QUICK] if h.quick else RESNET50
    n8 = [l for l in layers if l[3] != 1] if h.quick else layers    # quick: stem and 3x3
    for threads in h.threads:
        h.set_threads(threads)
        summary = []
        for layer in layers:
            _forward(h, threads, 1, layer, summary)
        _summary(h, f"forward N=1, {threads} thread(s)", summary)
        summary = []
        for layer in n8:
            _forward(h, threads, 8, layer, summary)
        _summary(h, f"forward N=8, {threads} thread(s)", summary)
        for N, group in ((1, layers), (8, n8)):
            vs_torch, vs_f32 = [], []
            for layer in group:
                _forward_bf16(h, threads, N, layer, vs_torch, vs_f32)
            _bf16_summary(h, f"bf16 forward N={N}, {threads} thread(s)", vs_torch, vs_f32)
        for N in (1,) if h.quick else (1, 8):
            ratios = []
            for i in YACONV_LAYERS:
                _yaconv(h, threads, N, RESNET50[i], ratios)
            _yaconv_summary(h, f"yaconv N={N}, {threads} thread(s)", ratios)
        for case in POOLS[:2] if h.quick else POOLS:
            _pool(h, threads, case)
        for N, group in ((1, layers), (8, [] if h.quick else layers)):
            data, weight = [], []
            for layer in group:
                _backward(h, threads, N, layer, data, weight)
            _summary(h, f"backward by data N={N}, {threads} thread(s)", data)
            _summary(h, f"backward by weights N={N}, {threads} thread(s)", weight)
        _atacworks(h, threads)
