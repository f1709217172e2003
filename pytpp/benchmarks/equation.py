"""TPP matrix equations (pytpp.tpp.equation) against the same work done node by node.

- ``tanh(a + b) * c`` on 16M float32 (4096 x 4096, beyond the caches): the compiled equation
  (strategy 2, the fused kernel; and strategy 1, L1 tiles) against three separate TPP calls
  (add, tanh in place, mul) and numpy. Rates are GB/s of the compulsory traffic, reading a, b, c
  and writing the result (16 bytes per element), shown as % of the measured copy bandwidth.
  The fused kernel moves exactly that; the three calls move 32 bytes per element.
- softmax and layer_norm written as equations (run as idioms: the row kernels) and through the
  general plan (strategy 1), against pytpp's hand-written kernels (``pytpp.nn.softmax``,
  ``pytpp.nn.layer_norm``) and numpy: GB/s of reading x and writing y.
"""
import numpy as np

import pytpp
from pytpp import nn
from pytpp.tpp import equation as eq

N = 4096


def _tanh_add_mul(h, threads):
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal((N, N)).astype(np.float32) for _ in range(3))
    out = np.empty_like(a)
    tmp = np.empty_like(a)
    x, y, z = eq.input(0), eq.input(1), eq.input(2)
    expr = eq.tanh(x + y) * z
    fused = eq.compile(expr, shape=(N, N), dtype=np.float32, strategy=2)
    tiles = eq.compile(expr, shape=(N, N), dtype=np.float32, strategy=1)
    add = pytpp.tpp.binary("add", N, N, np.float32)
    tanh = pytpp.tpp.unary("tanh", N, N, np.float32)
    mul = pytpp.tpp.binary("mul", N, N, np.float32)

    def three():
        add(a, b, tmp)
        tanh(tmp, tmp)
        mul(tmp, c, out)

    def numpy():
        np.add(a, b, out=tmp)
        np.tanh(tmp, out=tmp)
        np.multiply(tmp, c, out=out)

    impls = [("pytpp equation", lambda: fused(a, b, c, out=out)),
             ("pytpp eq strat 1", lambda: tiles(a, b, c, out=out)),
             ("3 TPP calls", three), ("numpy", numpy)]
    h.compare(f"tanh(a+b)*c float32 ({N}, {N})", threads, 4 * a.nbytes, "GB/s", "copy_gbs",
              impls, flops=3 * a.size)


def _softmax(h, threads, shape):
    rng = np.random.default_rng(1)
    X = rng.standard_normal(shape).astype(np.float32)
    out = np.empty_like(X)
    x = eq.input(0)
    e = eq.exp(x - eq.max(x))       # one node, used twice: computed once
    f = eq.compile(e / eq.sum(e), shape=shape, dtype=np.float32)     # the softmax idiom
    plan = eq.compile(e / eq.sum(e), shape=shape, dtype=np.float32, strategy=1)

    def numpy():
        np.subtract(X, X.max(axis=1, keepdims=True), out=out)
        np.exp(out, out=out)
        np.divide(out, out.sum(axis=1, keepdims=True), out=out)

    impls = [("pytpp equation", lambda: f(X, out=out)),
             ("pytpp eq strat 1", lambda: plan(X, out=out)),
             ("pytpp nn.softmax", lambda: nn.softmax(X, axis=-1, out=out)),
             ("numpy", numpy)]
    h.compare(f"softmax as equation float32 {shape}", threads, 2 * X.nbytes, "GB/s", "copy_gbs",
              impls, flops=X.size)


def _layer_norm(h, threads, shape):
    rng = np.random.default_rng(2)
    X = rng.standard_normal(shape).astype(np.float32)
    n = shape[1]
    w = rng.standard_normal((1, n)).astype(np.float32)
    b = rng.standard_normal((1, n)).astype(np.float32)
    out = np.empty_like(X)
    x, g, bt = eq.input(0), eq.input(1), eq.input(2)
    xc = x - eq.sum(x) / n
    ln = eq.muladd(xc * eq.rsqrt(eq.sum(eq.square(xc)) / n + 1e-5), g, bt)
    f = eq.compile(ln, shape=shape, dtype=np.float32)       # the layer-normalisation idiom
    plan = eq.compile(ln, shape=shape, dtype=np.float32, strategy=1)
    impls = [("pytpp equation", lambda: f(X, w, b, out=out)),
             ("pytpp eq strat 1", lambda: plan(X, w, b, out=out)),
             ("pytpp nn.layer_norm", lambda: nn.layer_norm(X, n, w[0], b[0], out=out))]
    h.compare(f"layer_norm as equation float32 {shape}", threads, 2 * X.nbytes, "GB/s",
              "copy_gbs", impls, flops=X.size)


def run(h):
    h.header("TPP equations: GB/s of compulsory traffic, % of measured copy bandwidth")
    for threads in h.threads:
        h.set_threads(threads)
        _tanh_add_mul(h, threads)
        for shape in ((4096, 1024), (256, 32768)):
            _softmax(h, threads, shape)
            _layer_norm(h, threads, shape)
