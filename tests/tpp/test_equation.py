"""pytpp.tpp.equation: random trees against a float64 evaluation with a propagated error bound,
both strategies, every level and thread count; the API's checks."""
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytpp
from pytpp.tpp import equation as eq

BF16 = np.dtype(ml_dtypes.bfloat16)
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
# unit roundoff of the compute dtype; transcendental kernels are within a few ulp (docs/eltwise.md)
UNIT = {F32: 2.0 ** -24, F64: 2.0 ** -53}
ULPS_MATH = 8


class Val:
    """A node's float64 value and a first-order bound on the engine's absolute error."""

    def __init__(self, v, e):
        self.v, self.e = v, e


def _bound(ops, u):
    """The evaluation rules: float64 value of each node and its error bound (first order, one
    rounding of every node's result, ULPS_MATH for transcendental ones)."""
    def rnd(v, k=1):
        return k * u * np.abs(v)

    def un(name, x):
        v = {"tanh": np.tanh, "sigmoid": lambda t: 1 / (1 + np.exp(-t)),
             "relu": lambda t: np.maximum(t, 0), "exp": np.exp, "abs": np.abs,
             "square": np.square, "negate": np.negative}[name](x.v)
        d = {"tanh": lambda: 1 - v * v, "sigmoid": lambda: v * (1 - v), "relu": lambda: 1.0,
             "exp": lambda: v, "abs": lambda: 1.0, "square": lambda: 2 * np.abs(x.v),
             "negate": lambda: 1.0}[name]()
        k = ULPS_MATH if name in ("tanh", "sigmoid", "exp") else 1
        # tanh and sigmoid are accurate in absolute terms near their flat parts too
        floor = ULPS_MATH * u * (name in ("tanh", "sigmoid"))
        return Val(v, np.abs(d) * x.e + rnd(v, k) + floor)

    def bi(name, x, y):
        if name == "add":
            v = x.v + y.v
            return Val(v, x.e + y.e + rnd(v))
        if name == "sub":
            v = x.v - y.v
            return Val(v, x.e + y.e + rnd(v))
        if name == "mul":
            v = x.v * y.v
            return Val(v, np.abs(x.v) * y.e + np.abs(y.v) * x.e + x.e * y.e + rnd(v))
        v = x.v / y.v          # div: the generator keeps |y| >= 1
        return Val(v, (x.e + np.abs(v) * y.e) / np.abs(y.v) + rnd(v))

    return un, bi


@st.composite
def trees(draw, m, n, ninputs, u, inputs, allow_reduce, allow_matmul):
    """(expression, Val) of a random tree of depth 1-6 over the drawn inputs."""
    un, bi = _bound(None, u)
    depth = draw(st.integers(1, 6))

    def leaf():
        if draw(st.integers(0, 9)) == 0:
            c = draw(st.sampled_from([0.5, -1.25, 2.0, 3.0]))
            return c, Val(np.full((1, 1), c), np.zeros((1, 1)))
        i = draw(st.integers(0, ninputs - 1 - 2 * bool(allow_matmul)))
        return eq.input(i), Val(inputs[i], np.zeros_like(inputs[i]))

    def node(d):
        if d == 0:
            return leaf()
        kind = draw(st.sampled_from(["unary", "binary", "binary", "ternary", "reduce",
                                     "matmul"]))
        sub = lambda: node(draw(st.integers(0, d - 1)))  # noqa: E731
        if kind == "reduce" and allow_reduce:
            x, xv = node(d - 1)
            if isinstance(x, float) or xv.v.shape[1] == 1:
                return eq.tanh(x), un("tanh", xv)
            if draw(st.booleans()):
                v = xv.v.sum(axis=1, keepdims=True)
                e = xv.e.sum(axis=1, keepdims=True) + n * u * np.abs(xv.v).sum(1, keepdims=True)
                return eq.sum(x), Val(v, e)
            idx = xv.v.argmax(axis=1)
            return eq.max(x), Val(xv.v.max(axis=1, keepdims=True),
                                  np.broadcast_to(xv.e, xv.v.shape).max(1, keepdims=True))
        if kind == "matmul" and allow_matmul:
            a, b = allow_matmul
            A, B = inputs[a].astype(np.float64), inputs[b].astype(np.float64)
            k = A.shape[1]
            v = A @ B
            return eq.input(a) @ eq.input(b), Val(v, 2 * k * u * (np.abs(A) @ np.abs(B)))
        if kind in ("unary", "reduce", "matmul"):
            name = draw(st.sampled_from(["tanh", "sigmoid", "relu", "exp", "abs", "square",
                                         "negate"]))
            x, xv = node(d - 1)
            if name == "exp":        # exp of a bounded argument: exp(tanh(x))
                x, xv = eq.tanh(x), un("tanh", xv)
            if name == "square":     # keep magnitudes moderate: square(tanh(x))
                x, xv = eq.tanh(x), un("tanh", xv)
            fn = {"negate": lambda t: -t, "abs": eq.abs, "square": eq.square}.get(
                name, getattr(eq, name, None))
            return fn(x), un(name, xv)
        if kind == "binary":
            name = draw(st.sampled_from(["add", "sub", "mul", "div"]))
            (x, xv), (y, yv) = node(d - 1), sub()
            if draw(st.booleans()):
                (x, xv), (y, yv) = (y, yv), (x, xv)
            if name == "div":        # a denominator >= 1 in magnitude: 1 + y * y
                y, yv = 1.0 + y * y, bi("add", Val(np.ones((1, 1)), np.zeros((1, 1))),
                                         bi("mul", yv, yv))
                return x / y, bi("div", xv, yv)
            if name == "mul":        # bounded factors: tanh(y)
                y, yv = eq.tanh(y), un("tanh", yv)
            op = {"add": lambda p, q: p + q, "sub": lambda p, q: p - q,
                  "mul": lambda p, q: p * q}[name]
            return op(x, y), bi(name, xv, yv)
        (x, xv), (y, yv), (z, zv) = node(d - 1), sub(), sub()
        y, yv = eq.tanh(y), un("tanh", yv)
        p = bi("mul", xv, yv)
        v = p.v + zv.v
        return eq.muladd(x, y, z), Val(v, p.e - u * np.abs(p.v) + zv.e + u * np.abs(v))

    expr, val = node(depth)
    if isinstance(expr, float):
        expr, val = eq.tanh(expr), un("tanh", val)
    return expr, val


def _input(rng, shape, dt):
    return rng.uniform(-1, 1, shape).astype(dt)


SIZES = [1, 2, 7, 17, 33, 63, 130]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
@pytest.mark.parametrize("dtype", [F32, BF16, F64])
def test_random_trees_match_float64(isa, dtype, data):
    m = data.draw(st.sampled_from(SIZES), label="m")
    n = data.draw(st.sampled_from(SIZES), label="n")
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 31), label="seed"))
    ninputs = data.draw(st.integers(1, 4), label="ninputs")
    if dtype == F64:
        in_dts = [F64] * ninputs
    else:
        in_dts = [data.draw(st.sampled_from([F32, BF16])) for _ in range(ninputs)]
    shapes = [data.draw(st.sampled_from([(m, n), (m, n), (1, n), (m, 1), (1, 1)]))
              for _ in range(ninputs)]
    arrays = [_input(rng, s, d) for s, d in zip(shapes, in_dts)]
    # an optional product of two more inputs, (m, k) @ (k, n)
    matmul = None
    if data.draw(st.booleans(), label="with matmul"):
        k = data.draw(st.sampled_from([1, 5, 16, 40]))
        mdt = F64 if dtype == F64 else F32
        arrays += [_input(rng, (m, k), mdt), _input(rng, (k, n), mdt)]
        in_dts += [mdt, mdt]
        matmul = (ninputs, ninputs + 1)
    compute = F64 if dtype == F64 else F32
    values = [a.astype(np.float64) for a in arrays]
    expr, val = data.draw(trees(m, n, len(arrays), UNIT[compute], values,
                                allow_reduce=True, allow_matmul=matmul), label="tree")
    strategy = data.draw(st.sampled_from(["auto", 1, 2, 3]), label="strategy")
    used = _used_inputs(expr)
    nin = max(used) + 1 if used else 0
    f = eq.compile(expr, shape=(m, n), dtype=dtype, input_dtypes=in_dts[:nin],
                   strategy=strategy)
    got = f(*arrays[:nin]).astype(np.float64)
    ref = np.broadcast_to(val.v, (m, n))
    err = np.broadcast_to(val.e, (m, n))
    tol = 4 * err + 1e-30
    if dtype == BF16:
        tol = tol + 2.0 ** -8 * np.abs(ref)
    bad = ~(np.abs(got - ref) <= tol)
    assert not bad.any(), (f"{expr!r}: {int(bad.sum())} of {m * n} beyond the bound; worst "
                           f"got {got[bad][:3]}, want {ref[bad][:3]}, bound {tol[bad][:3]}\n"
                           f"{f.plan()}")


def _used_inputs(expr):
    found, stack = set(), [expr]
    while stack:
        x = stack.pop()
        if x.kind == "input":
            found.add(x.value)
        stack.extend(x.children)
    return found


@pytest.mark.parametrize("dtype", [F32, F64])
def test_paper_example_and_threads(isa, threads, dtype, rng):
    """Fig. 12: tanh(T0) + (T1 x T2) / (T3 - T4), two temporaries, on shapes that split into
    several tiles and threads."""
    t = [eq.input(i) for i in range(5)]
    expr = eq.tanh(t[0]) + (t[1] @ t[2]) / (t[3] - t[4])
    m, n, k = 200, 700, 33
    f = eq.compile(expr, shape=(m, n), dtype=dtype)
    a = [rng.uniform(-1, 1, s).astype(dtype) for s in [(m, n), (m, k), (k, n), (m, n), (m, n)]]
    a[3] += 3
    ref = np.tanh(a[0].astype(np.float64)) + (a[1].astype(np.float64) @ a[2]) / (
        a[3].astype(np.float64) - a[4])
    tol = 64 * k * np.finfo(dtype).eps
    np.testing.assert_allclose(f(*a), ref, rtol=tol, atol=tol)
    assert "temporaries 2" in f.plan()


def test_register_scores():
    a, b, c, d, e, g = (eq.input(i) for i in range(6))
    # muladd(tanh(a), b, c): children 1, 0, 0 -> max(1, 0 + 1, 0 + 2, 1) = 2 (Algorithm 3: 3)
    p = eq.compile(eq.muladd(eq.tanh(a), b, c), shape=(2, 2)).plan()
    assert "register score of the root 2" in p
    # three children of score 2 -> max(2, 3, 4) = 4 (Algorithm 3: 3); 4 temporaries
    two = [(a + b) * (c + d), (c - d) * (e + g), (a * g) / (b + c)]
    p = eq.compile(eq.muladd(*two), shape=(2, 2)).plan()
    assert "register score of the root 4" in p
    assert "temporaries 4" in p
    rng = np.random.default_rng(0)
    x = [rng.uniform(1, 2, (2, 2)).astype(np.float32) for _ in range(6)]
    f = eq.compile(eq.muladd(*two), shape=(2, 2))
    ref = ((x[0] + x[1]) * (x[2] + x[3])) * ((x[2] - x[3]) * (x[4] + x[5])) + (
        x[0] * x[5]) / (x[1] + x[2])
    np.testing.assert_allclose(f(*x), ref, rtol=1e-5)


def test_plan_prints(capsys):
    f = eq.compile(eq.tanh(eq.input(0) + eq.input(1)) * eq.input(2), shape=(4, 4))
    text = f.plan()
    assert capsys.readouterr().out.strip() == text.strip()
    assert "strategy 2" in text and "out = mul" in text


def test_shared_subexpression_computed_once(rng):
    x = eq.input(0)
    xm = x - eq.max(x)
    e = eq.exp(xm)
    f = eq.compile(e / eq.sum(e), shape=(3, 50), dtype=np.float64)
    plan = f.plan()
    assert plan.count("= exp(") == 1 and plan.count("= max(") == 1
    X = rng.standard_normal((3, 50))
    ref = np.exp(X - X.max(1, keepdims=True))
    np.testing.assert_allclose(f(X), ref / ref.sum(1, keepdims=True), rtol=1e-13)


def test_sum_of_squares_fused_only_when_safe(rng):
    x = eq.input(0)
    X = rng.standard_normal((5, 40))
    f = eq.compile(eq.sum(eq.square(x - 1.0)) * x, shape=(5, 40), dtype=np.float64)
    assert "sum_of_squares" in f.plan() and "square(" not in f.plan().split("\n", 1)[1]
    np.testing.assert_allclose(f(X), ((X - 1) ** 2).sum(1, keepdims=True) * X, rtol=1e-13)
    sq = eq.square(x)          # the squares are needed again: not fused
    g = eq.compile(eq.sum(sq) + sq, shape=(5, 40), dtype=np.float64)
    assert "sum_of_squares" not in g.plan()
    np.testing.assert_allclose(g(X), (X ** 2).sum(1, keepdims=True) + X ** 2, rtol=1e-13)


def test_same_expression_same_callable():
    x = eq.relu(eq.input(0)) * 2.0
    f = eq.compile(x, shape=(3, 4), dtype=np.float32)
    assert eq.compile(x, shape=(3, 4), dtype="float32") is f
    assert eq.compile(x, shape=(3, 5), dtype=np.float32) is not f
    assert eq.compile(x, shape=(3, 4), dtype=BF16) is not f


def test_argument_checks():
    x = eq.input(0) + eq.input(1)
    with pytest.raises(ValueError, match="input"):
        eq.input(-1)
    with pytest.raises(ValueError, match="shape"):
        eq.compile(x, shape=(-1, 3))
    with pytest.raises(TypeError, match="dtype"):
        eq.compile(x, shape=(2, 3), dtype=np.complex64)
    with pytest.raises(TypeError):
        eq.compile("x", shape=(2, 3))
    f = eq.compile(x, shape=(2, 3), dtype=np.float32)
    a = np.ones((2, 3), np.float32)
    out = np.full((2, 3), 7, np.float32)
    with pytest.raises(ValueError, match="2 inputs"):
        f(a, out=out)
    with pytest.raises(ValueError, match="2 inputs"):
        f(a, a, a, out=out)
    with pytest.raises(ValueError, match="shape"):
        f(a, np.ones((3, 3), np.float32), out=out)
    with pytest.raises(TypeError, match="dtype"):
        f(a, np.ones((2, 3)), out=out)
    with pytest.raises(TypeError, match="dtype"):
        f(a, a, out=np.empty((2, 3)))
    with pytest.raises(ValueError, match="shape"):
        f(a, a, out=np.empty((3, 2), np.float32))
    assert (out == 7).all()
    with pytest.raises(ValueError, match="inputs"):
        eq.input(0) @ (eq.input(1) + 1.0)
    with pytest.raises(TypeError):
        eq.input(0) + "a"


def test_out_aliasing_an_input(rng):
    a, b = eq.input(0), eq.input(1)
    f = eq.compile(eq.tanh(a) * b + eq.sum(a), shape=(50, 300), dtype=np.float64)
    x = rng.standard_normal((50, 300))
    y = rng.standard_normal((50, 300))
    ref = np.tanh(x) * y + x.sum(1, keepdims=True)
    np.testing.assert_allclose(f(x, y, out=x), ref, rtol=1e-12, atol=1e-12)
    # a partial overlap (shifted view) is copied first
    buf = rng.standard_normal((51, 300))
    x2, out2 = buf[1:], buf[:-1]
    ref2 = np.tanh(x2) * y + x2.sum(1, keepdims=True)
    np.testing.assert_allclose(f(x2, y, out=out2), ref2, rtol=1e-12, atol=1e-12)
    # the product's operand as out: copied (a product reads whole rows of it)
    w = rng.standard_normal((300, 300))
    g = eq.compile(a @ b + 1.0, shape=(50, 300), dtype=np.float64)
    ref3 = x @ w + 1.0
    np.testing.assert_allclose(g(x, w, out=x), ref3, rtol=1e-12, atol=1e-10)


def test_dense_calls_alias_and_fall_back(rng):
    """Calls whose operands are all dense (m, n) arrays are checked and run in C: an input at
    the output's address but of another element size is copied first (not run in place), a
    read-only or subclassed out and equal-but-distinct dtypes take the general path, a single
    row runs like the others."""
    a, b = eq.input(0), eq.input(1)
    m, n = 6, 40
    f = eq.compile(eq.tanh(a) * b - a, shape=(m, n), dtype=np.float32, input_dtypes=(BF16, F32))
    buf = np.zeros(m * n * 4, np.uint8)
    out = buf.view(np.float32).reshape(m, n)
    x = buf[:m * n * 2].view(BF16).reshape(m, n)          # the same first byte as out
    x[...] = rng.standard_normal((m, n)).astype(BF16)
    y = rng.standard_normal((m, n)).astype(np.float32)
    x64 = x.astype(np.float64)
    ref = np.tanh(x64) * y - x64
    assert f(x, y, out=out) is out
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)

    g = eq.compile(eq.sigmoid(a) + b, shape=(1, n), dtype=np.float32)
    u, v = (rng.standard_normal((1, n)).astype(np.float32) for _ in range(2))
    want = 1 / (1 + np.exp(-u.astype(np.float64))) + v
    np.testing.assert_allclose(g(u, v), want, rtol=1e-6, atol=1e-6)
    ro = np.zeros((1, n), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        g(u, v, out=ro)
    meta = np.dtype(np.float32, metadata={"unit": "m"})    # equal to float32, another object
    um = u.astype(meta)
    np.testing.assert_array_equal(g(um, v), g(u, v))
    sub = np.zeros((1, n), np.float32).view(np.matrix)
    assert g(u, v, out=sub) is sub
    np.testing.assert_array_equal(np.asarray(sub), g(u, v))


def test_layouts_and_empty(rng):
    a, b = eq.input(0), eq.input(1)
    f = eq.compile(eq.sigmoid(a) - b, shape=(33, 17), dtype=np.float32)
    x = np.asfortranarray(rng.standard_normal((33, 17)).astype(np.float32))
    y = rng.standard_normal((66, 34)).astype(np.float32)[::2, ::2]
    out = np.zeros((33, 34), np.float32)[:, ::2]
    ref = 1 / (1 + np.exp(-x.astype(np.float64))) - y
    np.testing.assert_allclose(f(x, y, out=out), ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    e = eq.compile(eq.sigmoid(a) - b, shape=(0, 5))
    assert e(np.ones((0, 5), np.float32), np.ones((0, 5), np.float32)).shape == (0, 5)


def test_broadcasts_and_constants(isa, rng):
    a, b, c = eq.input(0), eq.input(1), eq.input(2)
    f = eq.compile(2.0 * a - b / 4.0 + eq.relu(c), shape=(9, 70), dtype=np.float32)
    x = rng.standard_normal((9, 70)).astype(np.float32)
    row = rng.standard_normal((1, 70)).astype(np.float32)
    col = rng.standard_normal((9, 1)).astype(np.float32)
    np.testing.assert_allclose(f(x, row, col), 2 * x - row / 4 + np.maximum(col, 0), rtol=1e-6)
    np.testing.assert_allclose(f(col, x, row[0]), 2 * col - x / 4 + np.maximum(row, 0),
                               rtol=1e-6)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_softmax_and_layer_norm_as_equations(isa, dtype, rng):
    x = eq.input(0)
    xm = x - eq.max(x)
    softmax = eq.exp(xm) / eq.sum(eq.exp(xm))
    n = 300
    X = rng.standard_normal((40, n)).astype(dtype)
    f = eq.compile(softmax, shape=(40, n), dtype=dtype)
    X64 = X.astype(np.float64)
    ref = np.exp(X64 - X64.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    tol = 2.0 ** -7 if dtype == BF16 else 1e-5
    np.testing.assert_allclose(f(X).astype(np.float64), ref, rtol=tol, atol=1e-7)
    g, bta = eq.input(1), eq.input(2)
    mean = eq.sum(x) / n
    var = eq.sum(eq.square(x - eq.sum(x) / n)) / n
    ln = (x - mean) * eq.rsqrt(var + 1e-5) * g + bta
    h = eq.compile(ln, shape=(40, n), dtype=dtype)
    G = rng.standard_normal((1, n)).astype(dtype)
    B = rng.standard_normal((1, n)).astype(dtype)
    mu = X64.mean(1, keepdims=True)
    ref = (X64 - mu) / np.sqrt(X64.var(1, keepdims=True) + 1e-5) * G.astype(np.float64) + B
    tol = 2.0 ** -6 if dtype == BF16 else 1e-4
    np.testing.assert_allclose(h(X, G, B).astype(np.float64), ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("strategy", [1, 3])
def test_hybrid_runs_equal_strategy_one(isa, threads, strategy, rng):
    """Reductions between element-wise runs: strategy 3 fuses the runs and must give the bits of
    strategy 1 (the same kernels' op expressions, the same order per element)."""
    x, g, b = eq.input(0), eq.input(1), eq.input(2)
    n = 77
    xc = x - eq.sum(x) / n
    expr = eq.muladd(xc * eq.rsqrt(eq.sum(eq.square(xc)) / n + 1e-5), g, b) - eq.tanh(xc) * 2.0
    shape = (45, n)
    X = rng.standard_normal(shape).astype(np.float32)
    G = rng.standard_normal((1, n)).astype(np.float32)
    B = rng.standard_normal((45, 1)).astype(np.float32)
    f = eq.compile(expr, shape=shape, strategy=strategy)
    assert f"strategy {strategy}" in f.plan()
    got = f(X, G, B)
    X64 = X.astype(np.float64)
    xc64 = X64 - X64.mean(1, keepdims=True)
    ref = xc64 / np.sqrt((xc64 ** 2).mean(1, keepdims=True) + 1e-5) * G + B - np.tanh(xc64) * 2
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5)
    one = eq.compile(expr, shape=shape, strategy=1)(X, G, B)
    np.testing.assert_allclose(got, one, rtol=1e-6, atol=1e-6)


def test_strategy_two_equals_strategy_one(isa, threads, rng):
    a, b, c = (eq.input(i) for i in range(3))
    expr = eq.tanh(a + b) * c - eq.sigmoid(eq.muladd(a, c, b))
    shape = (37, 1001)
    x = [rng.standard_normal(shape).astype(np.float32) for _ in range(3)]
    one = eq.compile(expr, shape=shape, strategy=1)(*x)
    two = eq.compile(expr, shape=shape, strategy=2)(*x)
    np.testing.assert_array_equal(one, two)


def test_large_flat_streaming(rng):
    """An output beyond the streaming threshold (16 MiB): the fused kernel's streaming path."""
    a, b, c = (eq.input(i) for i in range(3))
    n = 1 << 22
    x = [rng.standard_normal((1, n)).astype(np.float32) for _ in range(3)]
    got = eq.compile(eq.tanh(a + b) * c, shape=(1, n))(*x)
    ref = np.tanh(x[0].astype(np.float64) + x[1]) * x[2]
    assert math.isclose(float(np.abs(got - ref).max()), 0.0, abs_tol=1e-5)


@pytest.mark.parametrize("form", ["one input", "in place", "misaligned rows"])
def test_streaming_root_stores(rng, form):
    """The root's chunks go straight to an output beyond the streaming threshold: with one input
    stream (the prefetched case), written over its own input, and rows that start off a vector
    boundary (plain stores there)."""
    a, b = eq.input(0), eq.input(1)
    if form == "misaligned rows":
        m, n = 1024, 4097
        base = rng.standard_normal((m, n + 1)).astype(np.float32)
        x = [rng.standard_normal((m, n)).astype(np.float32) for _ in range(2)]
        out, first = base[:, 1:], base[:, 0].copy()
        got = eq.compile(eq.tanh(a) * b, shape=(m, n))(*x, out=out)
        assert got is out
        ref = np.tanh(x[0].astype(np.float64)) * x[1]
        np.testing.assert_array_equal(base[:, 0], first)   # the column before untouched
    else:
        n = 1 << 22
        x = [rng.standard_normal((1, n)).astype(np.float32)]
        ref = np.tanh(x[0].astype(np.float64))
        f = eq.compile(eq.tanh(a), shape=(1, n))
        got = f(x[0], out=x[0]) if form == "in place" else f(x[0])
        if form == "in place":
            assert got is x[0]
    assert math.isclose(float(np.abs(got - ref).max()), 0.0, abs_tol=1e-6)


def _offset_view(rng, shape, dtype, offset, pad=0):
    """A (rows, n) view whose data starts `offset` elements past a 64-byte line (rows `pad`
    elements apart beyond n), inside a base with a guard element before and after each row."""
    rows, n = shape
    ld = n + pad + 2
    base = rng.random(rows * ld + 64, dtype=dtype) + dtype.type(0.5)   # no zeros
    s = (-(base.ctypes.data // base.itemsize)) % (64 // base.itemsize) + offset
    rows_view = base[s:s + rows * ld].reshape(rows, ld)
    return base, rows_view[:, 1:n + 1]


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("shape, pad", [((1, 1 << 22), 0), ((3, (1 << 21) + 5), 7)])
def test_long_streamed_rows_start_on_any_element(isa, threads, dtype, shape, pad, rng):
    """Long rows beyond the streaming threshold begin with a short chunk up to the output's
    first vector boundary, then stream; output and inputs at different element offsets within a
    line (the loads of some stay misaligned), one flat row and strided rows: the same bits as
    strategy 1, nothing written outside the view."""
    a, b, c = (eq.input(i) for i in range(3))
    expr = eq.tanh(a + b) * c
    n_line = 64 // np.dtype(dtype).itemsize
    for out_off, in_offs in [(0, (0, 0, 0)), (3, (3, 3, 3)), (n_line - 1, (0, 5, n_line - 1))]:
        x = [_offset_view(rng, shape, dtype, k, pad)[1] for k in in_offs]
        for v in x:
            v -= dtype.type(1)        # in place: the views keep their offsets
        base, out = _offset_view(rng, shape, dtype, out_off, pad)
        guard = base.copy()
        got = eq.compile(expr, shape=shape, dtype=dtype, strategy=2)(*x, out=out)
        want = eq.compile(expr, shape=shape, dtype=dtype, strategy=1)(*x)
        assert got is out
        np.testing.assert_array_equal(out, want)
        out[...] = 0                  # the view's elements; the rest of base is nonzero
        keep = base != 0
        assert keep.sum() == base.size - out.size
        np.testing.assert_array_equal(base[keep], guard[keep])


def _ln_forms(x, g, b, n):
    xc = x - eq.sum(x) / n
    inv = eq.rsqrt(eq.sum(eq.square(xc)) / n + 1e-5)
    xc2 = x - eq.sum(x) * (1.0 / n)           # written twice, the mean as a product
    inv2 = eq.rsqrt(1e-5 + eq.sum(eq.square(x - eq.sum(x) * (1.0 / n))) * (1.0 / n))
    return {"muladd": (eq.muladd(xc * inv, g, b), True, True),
            "mul add": (xc2 * inv2 * g + b, True, True),
            "scaled": (g * (inv * xc), True, False),
            "plain": (xc * inv, False, False)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, ml_dtypes.bfloat16])
@pytest.mark.parametrize("shape", [(1, 7), (7, 33), (33, 1000), (5, 2049)])
def test_idioms_run_the_row_kernels(rng, dtype, shape):
    """softmax and layer_norm trees run the hand-written row kernels under "auto" (bit for bit
    their results) and agree with the node-by-node plan within its tolerance."""
    m, n = shape
    X = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    w = rng.standard_normal((1, n)).astype(dtype)
    b = rng.standard_normal((1, n)).astype(dtype)
    tol = 1e-2 if dtype == ml_dtypes.bfloat16 else 1e-5 if dtype == np.float32 else 1e-12
    x, g, bt = eq.input(0), eq.input(1), eq.input(2)
    e = eq.exp(x - eq.max(x))
    f = eq.compile(e / eq.sum(e), shape=shape, dtype=dtype)
    assert f._idiom == ("softmax", (0,))
    got = f(X)
    np.testing.assert_array_equal(got, pytpp.nn.softmax(X, axis=-1))
    general = eq.compile(e / eq.sum(e), shape=shape, dtype=dtype, strategy=1)(X)
    np.testing.assert_allclose(got.astype(np.float64), general.astype(np.float64), atol=tol)
    for name, (expr, has_g, has_b) in _ln_forms(x, g, bt, n).items():
        f = eq.compile(expr, shape=shape, dtype=dtype)
        assert f._idiom is not None and f._idiom[0] == "layer_norm", name
        args = (X, w, b)[:1 + has_g + has_b]
        got = f(*args)
        ref = pytpp.nn.layer_norm(X, n, w[0] if has_g else None, b[0] if has_b else None)
        np.testing.assert_array_equal(got, ref, err_msg=name)
        general = eq.compile(expr, shape=shape, dtype=dtype, strategy=1)(*args)
        np.testing.assert_allclose(got.astype(np.float64), general.astype(np.float64),
                                   atol=tol * 10, err_msg=name)


def test_idioms_not_taken(rng):
    """Trees that only look like an idiom, and calls whose operands the kernel does not take,
    run the general plan (and still compute the tree)."""
    m, n = 9, 40
    X = rng.standard_normal((m, n)).astype(np.float32)
    Y = rng.standard_normal((m, n)).astype(np.float32)
    x, y = eq.input(0), eq.input(1)
    wrong = {"another input's max": eq.exp(x - eq.max(y)) / eq.sum(eq.exp(x - eq.max(y))),
             "another sum": eq.exp(x - eq.max(x)) / eq.sum(eq.exp(y - eq.max(x))),
             "mean over n + 1": (x - eq.sum(x) / (n + 1)) * eq.rsqrt(
                 eq.sum(eq.square(x - eq.sum(x) / (n + 1))) / (n + 1) + 1e-5)}
    ref = {"another input's max": np.exp(X - Y.max(1, keepdims=True)) /
           np.exp(X - Y.max(1, keepdims=True)).sum(1, keepdims=True),
           "another sum": np.exp(X - X.max(1, keepdims=True)) /
           np.exp(Y - X.max(1, keepdims=True)).sum(1, keepdims=True)}
    xc = X - X.sum(1, keepdims=True) / (n + 1)
    ref["mean over n + 1"] = xc / np.sqrt((xc * xc).sum(1, keepdims=True) / (n + 1) + 1e-5)
    for name, expr in wrong.items():
        f = eq.compile(expr, shape=(m, n))
        assert f._idiom is None, name
        np.testing.assert_allclose(f(X, Y) if "another" in name else f(X), ref[name],
                                   rtol=1e-5, atol=1e-6, err_msg=name)
    # the softmax idiom with its output over its input, and with x broadcast: the general plan
    e = eq.exp(x - eq.max(x))
    f = eq.compile(e / eq.sum(e), shape=(m, n))
    want = pytpp.nn.softmax(X, axis=-1)
    Z = X.copy()
    np.testing.assert_allclose(f(Z, out=Z), want, rtol=1e-6, atol=1e-7)
    row = X[:1]
    np.testing.assert_allclose(f(row), np.broadcast_to(pytpp.nn.softmax(row, axis=-1), (m, n)),
                               rtol=1e-6, atol=1e-7)
    assert "idiom: softmax" in f.plan()
    # an explicit strategy never takes the idiom
    assert eq.compile(e / eq.sum(e), shape=(m, n), strategy=1)._idiom is None
