"""`python -m pytpp demo`: a short tour on built-in random data, each step against what a numpy
user writes (numpy only: the demo needs nothing beyond pytpp's own dependencies), timed in the
same run: the speedup and the largest relative difference from a float64 reference. Under a
minute on two cores."""
import time

import numpy as np


def _best(fn, reps=5):
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _rel(x, ref):
    ref = np.asarray(ref, np.float64)
    return float(np.abs(np.asarray(x, np.float64) - ref).max() / max(np.abs(ref).max(), 1e-300))


def _gelu_tanh_numpy(z):
    """GELU's tanh form, as a numpy user writes it (numpy has no erf)."""
    c = z.dtype.type(np.sqrt(2.0 / np.pi))
    return 0.5 * z * (1.0 + np.tanh(c * (z + z.dtype.type(0.044715) * z * z * z)))


def _steps(rng):
    """(title, pytpp fn, numpy fn, float64 reference fn, work unit, work per call)"""
    import pytpp
    a = rng.standard_normal((1024, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 1024)).astype(np.float32)
    c = np.empty_like(a)
    yield ("matmul float32 1024^3", lambda: pytpp.matmul(a, b, out=c), lambda: np.matmul(a, b),
           lambda: a.astype(np.float64) @ b, "GFLOP/s", 2 * 1024 ** 3)
    s1 = rng.standard_normal((20000, 23, 23))
    s2 = rng.standard_normal((20000, 23, 23))
    so = np.empty_like(s1)
    yield ("20000 small GEMMs 23^3 float64", lambda: pytpp.matmul(s1, s2, out=so),
           lambda: np.matmul(s1, s2), lambda: np.matmul(s1, s2), "GFLOP/s", 2 * 20000 * 23 ** 3)
    x = rng.standard_normal((256, 1024)).astype(np.float32)
    layers = [((rng.standard_normal((1024, 1024)) / 32).astype(np.float32),
               rng.standard_normal(1024).astype(np.float32)) for _ in range(3)]

    def mlp_pytpp():
        h = x
        for w, bias in layers:
            h = pytpp.nn.linear(h, w, bias, activation="gelu_tanh")
        return h

    def mlp_numpy(dtype=np.float32):
        h = x.astype(dtype)
        for w, bias in layers:
            h = _gelu_tanh_numpy(h @ w.T.astype(dtype) + bias.astype(dtype))
        return h
    yield ("MLP 3 x 1024, batch 256, fused GELU (tanh)", mlp_pytpp, mlp_numpy,
           lambda: mlp_numpy(np.float64), "GFLOP/s", 3 * 2 * 256 * 1024 * 1024)
    # a ResNet-50 3x3 layer (C = K = 64, 56 x 56, NHWC) against numpy's im2col + matmul
    xc = rng.standard_normal((1, 56, 56, 64)).astype(np.float32)
    wc = (rng.standard_normal((64, 64, 3, 3)) / 24).astype(np.float32)

    def conv_numpy(dtype=np.float32):
        xp = np.pad(xc.astype(dtype), ((0, 0), (1, 1), (1, 1), (0, 0)))
        cols = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(1, 2))
        cols = cols.reshape(56 * 56, 64 * 9)               # (pixels, C*R*S)
        return (cols @ wc.astype(dtype).reshape(64, 64 * 9).T).reshape(1, 56, 56, 64)
    yield ("conv2d 3x3 64 -> 64, 56 x 56 (NHWC)",
           lambda: pytpp.nn.conv2d(xc, wc, padding=1, data_format="NHWC"), conv_numpy,
           lambda: conv_numpy(np.float64), "GFLOP/s", 2 * 56 * 56 * 64 * 64 * 9)
    # int8 inference: the FFN's first layer (BERT-base) with int8 weights, dynamic activations
    xq = rng.standard_normal((128, 768)).astype(np.float32)
    wq = (rng.standard_normal((3072, 768)) / 28).astype(np.float32)
    qlayer = pytpp.quant.QuantizedLinear(wq)
    yield ("int8 linear 128 x 768 -> 3072 (vs fp32 numpy)", lambda: qlayer(xq),
           lambda: xq @ wq.T, lambda: xq.astype(np.float64) @ wq.T, "GOP/s", 2 * 128 * 768 * 3072)
    t = rng.standard_normal((4096, 1024)).astype(np.float32)
    to = np.empty_like(t)

    def ln_numpy(dtype=np.float32):
        u = t.astype(dtype)
        mu = u.mean(-1, keepdims=True)
        return (u - mu) / np.sqrt(u.var(-1, keepdims=True) + 1e-5)
    yield ("layer_norm (4096, 1024)", lambda: pytpp.nn.layer_norm(t, 1024, out=to), ln_numpy,
           lambda: ln_numpy(np.float64), "GB/s", 2 * t.nbytes)

    def softmax_numpy(dtype=np.float32):
        u = t.astype(dtype)
        e = np.exp(u - u.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    yield ("softmax rows (4096, 1024)", lambda: pytpp.nn.softmax(t, out=to), softmax_numpy,
           lambda: softmax_numpy(np.float64), "GB/s", 2 * t.nbytes)


def main():
    import pytpp
    pytpp.show_config()
    rng = np.random.default_rng(0)
    print(f"\n{'step':44s} {'pytpp':>10s} {'numpy':>12s} {'speedup':>8s} {'rate':>16s} "
          f"{'rel. diff':>9s}")
    for title, ours, theirs, ref, unit, work in _steps(rng):
        t_ours, t_theirs = _best(ours), _best(theirs)
        diff = _rel(ours(), ref())
        print(f"{title:44s} {t_ours * 1e3:8.2f}ms {t_theirs * 1e3:10.2f}ms {t_theirs / t_ours:7.2f}x "
              f"{work / t_ours / 1e9:8.1f} {unit:7s} {diff:9.1e}")
    # the one contraction engine at every ISA level this CPU runs
    a = rng.standard_normal((16, 64, 64)).astype(np.float32)
    b = rng.standard_normal((16, 64, 64)).astype(np.float32)
    out = np.empty((64, 64), np.float32)
    ref = np.einsum("bik,bkj->ij", a.astype(np.float64), b.astype(np.float64))
    for level in pytpp.available_isas():
        with pytpp.use_isa(level):
            dt = _best(lambda: pytpp.brgemm(a, b, out=out), reps=20)
            print(f"brgemm float32 16 x (64x64 @ 64x64) isa={level:6s} "
                  f"{2 * 16 * 64 ** 3 / dt / 1e9:7.1f} GFLOP/s, rel. diff {_rel(out, ref):.1e}")
