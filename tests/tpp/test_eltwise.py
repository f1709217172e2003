"""Element-wise TPP handles (pytpp.tpp.unary / binary / ternary) against float64 numpy references,
at every ISA level, for odd shapes, leading dimensions > n and every broadcast flag.

Tolerances: exact IEEE ops (add, mul, sqrt, ...) are compared with the reference computed in the
same precision (bitwise equal except for FMA contraction: 1 ulp); transcendental exact forms
within the bounds published in docs/eltwise.md (enforced in test_eltwise_approx.py)."""
import ml_dtypes
import numpy as np
import pytest

import pytpp
from pytpp.tpp import binary, ternary, unary

BF16 = np.dtype(ml_dtypes.bfloat16)
SHAPES = [(1, 1), (1, 7), (7, 17), (17, 33), (3, 63), (5, 65), (2, 129)]
FLOATS = [np.float32, np.float64]


def padded(rng, m, n, ld, dtype, scale=1.0, offset=0.0):
    """An m x n matrix stored in a flat buffer with row stride ld (padding = NaN, never read)."""
    buf = np.full(max((m - 1) * ld + n, 0), np.nan, dtype=np.float64)
    for i in range(m):
        buf[i * ld:i * ld + n] = rng.standard_normal(n) * scale + offset
    return buf.astype(dtype)


def view(buf, m, n, ld):
    if m == 0 or n == 0:
        return np.zeros((m, n), buf.dtype)
    return np.lib.stride_tricks.as_strided(buf, (m, n), (ld * buf.itemsize, buf.itemsize))


def operand(rng, m, n, ld, dtype, bcast, **kw):
    """Buffer for an operand with a broadcast flag and its logical m x n value."""
    if bcast is None:
        b = padded(rng, m, n, ld, dtype, **kw)
        return b, view(b, m, n, ld).astype(np.float64)
    if bcast == "row":
        b = padded(rng, 1, n, n, dtype, **kw)
        return b, np.broadcast_to(b.astype(np.float64), (m, n))
    if bcast == "col":
        b = padded(rng, m, 1, ld, dtype, **kw)
        return b, np.broadcast_to(view(b, m, 1, ld).astype(np.float64), (m, n))
    b = padded(rng, 1, 1, 1, dtype, **kw)
    return b, np.full((m, n), float(b[0]))


UNARY_REF = {
    "identity": lambda x: x, "zero": lambda x: 0 * x, "square": lambda x: x * x,
    "increment": lambda x: x + 1, "decrement": lambda x: x - 1, "negate": lambda x: -x,
    "abs": np.abs, "sqrt": np.sqrt, "reciprocal": lambda x: 1 / x,
    "rsqrt": lambda x: 1 / np.sqrt(x), "relu": lambda x: np.maximum(x, 0),
}


@pytest.mark.parametrize("op", list(UNARY_REF))
@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_basic(isa, rng, op, dtype):
    for m, n in SHAPES:
        ld = n + 3
        positive = op in ("sqrt", "rsqrt", "reciprocal")
        x = padded(rng, m, n, ld, dtype, offset=3.0 if positive else 0.0)
        if positive:
            x = np.abs(x)
        out = np.full(m * (n + 1), -7, dtype)
        k = unary(op, m, n, dtype, ldi=ld, ldo=n + 1)
        k(x, out)
        got = view(out, m, n, n + 1)
        # the reference in the same precision: one rounding per op (rsqrt: two)
        want = UNARY_REF[op](view(x, m, n, ld).astype(dtype)).astype(dtype)
        np.testing.assert_allclose(got, want, rtol=2 * np.finfo(dtype).eps, atol=0)
        # padding between rows untouched
        if n + 1 > n and m > 1:
            assert (out.reshape(m, n + 1)[:-1, n] == -7).all()


@pytest.mark.parametrize("bcast", ["row", "col", "scalar"])
def test_unary_broadcast(isa, rng, bcast):
    m, n = 7, 33
    xb, xv = operand(rng, m, n, 5, np.float32, bcast)
    out = np.empty((m, n), np.float32)
    unary("square", m, n, np.float32, ldi=5, bcast=bcast)(xb, out)
    np.testing.assert_allclose(out, (xv.astype(np.float32) ** 2), rtol=1e-7)


BINARY_REF = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
              "max": np.maximum, "min": np.minimum}


@pytest.mark.parametrize("op", list(BINARY_REF))
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("b0,b1", [(None, None), (None, "row"), ("col", None), ("scalar", "col"),
                                   ("row", "scalar"), ("scalar", "scalar")])
def test_binary(isa, rng, op, dtype, b0, b1):
    for m, n in SHAPES[:6]:
        x, xv = operand(rng, m, n, n + 2, dtype, b0)
        y, yv = operand(rng, m, n, n + 1, dtype, b1, offset=3.0)
        out = np.empty((m, n), dtype)
        binary(op, m, n, dtype, ld0=n + 2, ld1=n + 1, bcast0=b0, bcast1=b1)(x, y, out)
        want = BINARY_REF[op](xv.astype(dtype), yv.astype(dtype))
        np.testing.assert_allclose(out, want, rtol=np.finfo(dtype).eps, atol=0)


@pytest.mark.parametrize("dtype", FLOATS)
def test_ternary(isa, rng, dtype):
    eps = np.finfo(dtype).eps
    for m, n in SHAPES:
        for b in (None, "row", "col", "scalar"):
            x, xv = operand(rng, m, n, n, dtype, b)
            y, yv = operand(rng, m, n, n, dtype, None)
            z, zv = operand(rng, m, n, n, dtype, "row" if b is None else None)
            kw = dict(bcast0=b, bcast2="row" if b is None else None, ld0=n, ld2=n)
            out = np.empty((m, n), dtype)
            ternary("muladd", m, n, dtype, **kw)(x, y, z, out)
            want = xv * yv + zv   # one fused rounding
            np.testing.assert_allclose(out, want, rtol=eps, atol=eps * np.abs(xv * yv).max())
            ternary("nmuladd", m, n, dtype, **kw)(x, y, z, out)
            np.testing.assert_allclose(out, zv - xv * yv, rtol=eps, atol=eps * np.abs(xv * yv).max())


def test_muladd_in_place(isa, rng):
    a, b = rng.standard_normal((9, 17)), rng.standard_normal((9, 17))
    c = rng.standard_normal((9, 17))
    want = c + a * b
    ternary("muladd", 9, 17, np.float64)(a, b, c, c)
    np.testing.assert_allclose(c, want, rtol=1e-15, atol=1e-15)


@pytest.mark.parametrize("cmp,ref", [("eq", np.equal), ("ne", np.not_equal), ("lt", np.less),
                                     ("le", np.less_equal), ("gt", np.greater),
                                     ("ge", np.greater_equal)])
@pytest.mark.parametrize("dtype", FLOATS)
def test_compare_and_blend(isa, rng, cmp, ref, dtype):
    for m, n in SHAPES + [(3, 200)]:
        x = rng.integers(-2, 3, (m, n)).astype(dtype)
        y = rng.integers(-2, 3, (m, n)).astype(dtype)
        x.flat[0] = np.nan
        ldm = (n + 7) // 8
        mask = np.zeros((m, ldm), np.uint8)
        binary("compare", m, n, dtype, cmp=cmp)(x, y, mask)
        want = ref(x, y)
        np.testing.assert_array_equal(np.unpackbits(mask, axis=1, bitorder="little")[:, :n], want)
        out = np.empty((m, n), dtype)
        ternary("blend", m, n, dtype)(x, y, mask, out)
        np.testing.assert_array_equal(out, np.where(want, y, x))


def test_compare_scalar_broadcast(isa):
    x = np.arange(20, dtype=np.float32).reshape(2, 10)
    mask = np.zeros((2, 2), np.uint8)
    binary("compare", 2, 10, np.float32, bcast1="scalar", cmp="ge")(x, np.array([7.0], np.float32), mask)
    np.testing.assert_array_equal(np.unpackbits(mask, axis=1, bitorder="little")[:, :10], x >= 7)


# ---- bfloat16 ---------------------------------------------------------------------------------
def rne_bf16_bits(f32):
    """Reference float32 -> bfloat16 bits, round to nearest even, NaN -> quiet NaN."""
    b = f32.view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f32)
    r[nan] = ((b[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def test_bf16_exhaustive_conversions(isa):
    """Every bfloat16 value -> float32 (exact) -> bfloat16 (identity), and every float32 in the
    rounding neighbourhood of each bf16 (+0, +0x7FFF, +0x8000, +0x8001, +0xFFFF ulps) -> bf16
    correctly rounded to nearest even."""
    allb = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    xb = allb.view(BF16)
    f = np.empty(65536, np.float32)
    unary("identity", 1, 65536, BF16, out_dtype=np.float32)(xb, f)
    np.testing.assert_array_equal(f.view(np.uint32), allb.astype(np.uint32) << 16)
    back = np.empty(65536, BF16)
    unary("identity", 1, 65536, np.float32, out_dtype=BF16)(f, back)
    nan = np.isnan(f)
    np.testing.assert_array_equal(back.view(np.uint16)[~nan], allb[~nan])
    assert np.isnan(back.astype(np.float32)[nan]).all()
    # rounding cases
    offs = np.array([0, 0x7FFF, 0x8000, 0x8001, 0xFFFF], np.uint32)
    bits = ((allb.astype(np.uint32) << 16)[:, None] + offs[None, :]).reshape(-1)
    src = bits.view(np.float32)
    out = np.empty(src.size, BF16)
    unary("identity", 1, src.size, np.float32, out_dtype=BF16)(src, out)
    np.testing.assert_array_equal(out.view(np.uint16), rne_bf16_bits(src))
    # agrees with ml_dtypes' own rounding where both are defined (non-NaN)
    ok = ~np.isnan(src)
    np.testing.assert_array_equal(out.view(np.uint16)[ok], src[ok].astype(BF16).view(np.uint16))


def test_bf16_compute(isa, rng):
    """bf16 in and out, float32 compute: the result is the float32 result rounded once."""
    m, n = 17, 1100   # more than one conversion chunk per row
    x = rng.standard_normal((m, n)).astype(BF16)
    y = rng.standard_normal((m, n)).astype(BF16)
    out = np.empty((m, n), BF16)
    binary("mul", m, n, BF16, bcast1=None)(x, y, out)
    want = (x.astype(np.float32) * y.astype(np.float32)).astype(BF16)
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))
    # mixed: bf16 x float32 -> float64 out, float64 compute
    y32 = rng.standard_normal((m, n)).astype(np.float32)
    o64 = np.empty((m, n))
    binary("add", m, n, BF16, dtype1=np.float32, out_dtype=np.float64)(x, y32, o64)
    np.testing.assert_array_equal(o64, x.astype(np.float64) + y32.astype(np.float64))


_FUSED_BF16 = [("square", False), ("increment", False), ("decrement", False), ("negate", False),
               ("abs", False), ("sqrt", False), ("reciprocal", False), ("rsqrt", False),
               ("relu", False), ("exp", False), ("exp", True), ("tanh", False), ("tanh", "pade"),
               ("tanh", "minimax"), ("sigmoid", False), ("sigmoid", True), ("sigmoid", "pade"),
               ("gelu", False),
               ("gelu", "minimax"), ("gelu_tanh", False), ("gelu_tanh", "pade")]


@pytest.mark.parametrize("op,approx", _FUSED_BF16)
def test_bf16_fused_unary_exhaustive(isa, op, approx):
    """bf16 -> bf16 unary ops run fused (widen, compute, round in registers). Over every one of
    the 65536 bf16 inputs the bits equal float32 compute followed by one round to nearest even
    (the unfused path: bf16 -> float32 output, then float32 -> bf16); NaN stays NaN."""
    allb = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(BF16)
    f = np.empty(65536, np.float32)
    unary(op, 1, 65536, BF16, out_dtype=np.float32, approx=approx)(allb, f)
    want = rne_bf16_bits(f)
    got = np.empty(65536, BF16)
    unary(op, 1, 65536, BF16, approx=approx)(allb, got)
    # NaN results compare as NaN: which operand's NaN (sign, payload) an add propagates is the
    # compiler's instruction order, not part of the contract
    nan = np.isnan(f)
    np.testing.assert_array_equal(got.view(np.uint16)[~nan], want[~nan])
    assert np.isnan(got.astype(np.float32)[nan]).all()
    # odd row lengths (vector tails) and a leading dimension > n
    for m, n in [(3, 1), (2, 7), (5, 17), (3, 33), (2, 63)]:
        ld = n + 5
        x = allb[1000:1000 + (m - 1) * ld + n]
        o = np.full(m * ld, np.nan, BF16)
        unary(op, m, n, BF16, ldi=ld, ldo=ld, approx=approx)(x, o)
        o = o.reshape(m, ld)
        f = np.empty((m, n), np.float32)
        unary(op, m, n, BF16, ldi=ld, out_dtype=np.float32, approx=approx)(x, f)
        nan = np.isnan(f)
        np.testing.assert_array_equal(o[:, :n].view(np.uint16)[~nan],
                                      rne_bf16_bits(f.ravel()).reshape(m, n)[~nan])
        assert np.isnan(o[:, :n].astype(np.float32)[nan]).all()
        assert np.isnan(o[:, n:].astype(np.float32)).all()   # padding untouched


def test_dtype_conversions(isa, rng):
    x = rng.standard_normal((5, 33))
    o32 = np.empty((5, 33), np.float32)
    unary("identity", 5, 33, np.float64, out_dtype=np.float32)(x, o32)
    np.testing.assert_array_equal(o32, x.astype(np.float32))
    o64 = np.empty((5, 33))
    unary("identity", 5, 33, np.float32, out_dtype=np.float64)(o32, o64)
    np.testing.assert_array_equal(o64, o32.astype(np.float64))


# ---- dropout, rand ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16])
def test_dropout_reproducible_and_inverse(isa, threads, dtype):
    m, n, p = 33, 1031, 0.3
    x = np.random.default_rng(1).standard_normal((m, n)).astype(dtype)
    ldm = (n + 7) // 8
    k = unary("dropout", m, n, dtype, p=p, seed=42)
    y1, mask1 = k.call_with_mask(x, np.empty((m, n), dtype), np.zeros((m, ldm), np.uint8))
    y2, mask2 = k.call_with_mask(x, np.empty((m, n), dtype), np.zeros((m, ldm), np.uint8))
    np.testing.assert_array_equal(mask1, mask2)
    np.testing.assert_array_equal(y1.view(np.uint8), y2.view(np.uint8))
    keep = np.unpackbits(mask1, axis=1, bitorder="little")[:, :n].astype(bool)
    assert abs(keep.mean() - (1 - p)) < 0.01
    want = np.where(keep, x.astype(np.float64) / (1 - p), 0)
    tol = 1e-2 if dtype == BF16 else 1e-6
    np.testing.assert_allclose(y1.astype(np.float64), want, rtol=tol)
    # dropout_inv with the same mask zeroes the same units
    g = np.ones((m, n), dtype)
    gi = unary("dropout_inv", m, n, dtype, p=p)(g, mask1, np.empty((m, n), dtype))
    np.testing.assert_allclose(gi.astype(np.float64), np.where(keep, 1 / (1 - p), 0), rtol=tol)
    # other seed: other mask
    _, mask3 = k.call_with_mask(x, np.empty((m, n), dtype), np.zeros((m, ldm), np.uint8), seed=43)
    assert (mask3 != mask1).any()


def test_dropout_same_on_every_isa():
    x = np.ones((7, 300), np.float32)
    masks = []
    for level in pytpp.available_isas():
        with pytpp.use_isa(level):
            _, mk = unary("dropout", 7, 300, np.float32, p=0.5, seed=5).call_with_mask(
                x, np.empty_like(x), np.zeros((7, 38), np.uint8))
            masks.append(mk)
    for mk in masks[1:]:
        np.testing.assert_array_equal(mk, masks[0])


def test_rand(isa):
    out = np.empty((64, 1000), np.float32)
    unary("rand", 64, 1000, np.float32, seed=3)(out)
    assert 0 <= out.min() and out.max() < 1
    assert abs(out.mean() - 0.5) < 0.01 and abs(out.var() - 1 / 12) < 0.01


# ---- errors ---------------------------------------------------------------------------------------
def test_errors():
    with pytest.raises(ValueError, match="unknown op"):
        unary("frobnicate", 2, 2)
    with pytest.raises(TypeError, match="complex128"):
        unary("relu", 2, 2, np.complex128)
    with pytest.raises(ValueError, match="ldi=1 is smaller"):
        unary("relu", 2, 2, ldi=1)
    with pytest.raises(ValueError, match="bcast"):
        unary("relu", 2, 2, bcast="diagonal")
    with pytest.raises(ValueError, match="no approximation"):
        unary("relu", 2, 2, approx=True)
    with pytest.raises(ValueError, match="p must be"):
        unary("dropout", 2, 2, p=1.0)
    k = unary("relu", 2, 3, np.float32)
    with pytest.raises(TypeError, match="x has dtype float64"):
        k(np.zeros((2, 3)), np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="out has 5 elements"):
        k(np.zeros((2, 3), np.float32), np.zeros(5, np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        k(np.zeros((3, 2), np.float32).T, np.zeros((2, 3), np.float32))
    with pytest.raises(TypeError, match="takes 2 arrays"):
        k(np.zeros((2, 3), np.float32))
    with pytest.raises(TypeError, match="x must be a numpy.ndarray, got list"):
        k([[0.0] * 3] * 2, np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="out has non-native byte order"):
        k(np.zeros((2, 3), np.float32), np.zeros((2, 3), ">f4"))
    ro = np.zeros((2, 3), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        k(np.zeros((2, 3), np.float32), ro)
    # binary and ternary handles: each operand named, out untouched
    x = np.ones((2, 3), np.float32)
    out = np.full((2, 3), 7, np.float32)
    kb = binary("add", 2, 3, np.float32)
    kt = ternary("muladd", 2, 3, np.float32)
    for call, match, err in [
            (lambda: kb(x, np.zeros((2, 3)), out), "y has dtype float64", TypeError),
            (lambda: kb(x, np.zeros(5, np.float32), out), "y has 5 elements", ValueError),
            (lambda: kb(x.T, x, out), "C-contiguous", ValueError),
            (lambda: kb(x, x), "takes 3 arrays", TypeError),
            (lambda: kb(x, x, ro), "read-only", ValueError),
            (lambda: kb([[1.0] * 3] * 2, x, out), "x must be a numpy.ndarray", TypeError),
            (lambda: kt(x, x, np.zeros((2, 3)), out), "z has dtype float64", TypeError),
            (lambda: kt(x, x, x, np.zeros(4, np.float32)), "out has 4 elements", ValueError),
            (lambda: kt(x, x, out), "takes 4 arrays", TypeError)]:
        with pytest.raises(err, match=match):
            call()
    assert (out == 7).all()
    np.testing.assert_array_equal(kb(x, x, out), 2 * x)
    np.testing.assert_array_equal(kt(x, x, x, out), 2 * x)


def test_cache_and_repr():
    k = unary("exp", 4, 5, np.float32, approx=True)
    assert k is unary("exp", 4, 5, "float32", approx=True)
    assert k is not unary("exp", 4, 5, np.float32)
    assert "exp" in repr(k) and k.isa == pytpp.get_isa()


def test_zero_size(isa):
    out = np.empty((0, 5), np.float32)
    unary("exp", 0, 5, np.float32)(np.empty((0, 5), np.float32), out)
    binary("add", 3, 0, np.float32)(np.empty(0, np.float32), np.empty(0, np.float32),
                                    np.empty(0, np.float32))


def test_f64_to_bf16_correctly_rounded(isa, rng):
    """float64 -> bfloat16 in one rounding (no double rounding through float32, which
    ml_dtypes' astype does). Reference: round-to-nearest-even on the float64 bits to the 7
    mantissa bits of bfloat16 (normal range)."""
    b = rng.integers(0x0080, 0x7F00, 4000).astype(np.uint32) << 16
    base = b.view(np.float32).astype(np.float64)
    ulp = np.abs(base) * 2.0 ** -7
    # just above / below the half-way points: float32 would round onto the tie
    x = np.concatenate([base + ulp * (0.5 + 2.0 ** -30), base + ulp * (0.5 - 2.0 ** -30), base])
    out = np.empty(x.size, BF16)
    unary("identity", 1, x.size, np.float64, out_dtype=BF16)(x, out)
    bits = x.view(np.uint64)
    r = (bits + np.uint64((1 << 44) - 1) + ((bits >> np.uint64(45)) & np.uint64(1))) >> np.uint64(45)
    want = (r << np.uint64(45)).view(np.float64).astype(BF16)   # exact: 7 mantissa bits
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))
