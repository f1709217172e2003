"""Optimizer steps against float64 references of torch's update rules, at every ISA level.

Tolerances: each element's update is a few float operations on values of order 1, so float32
agrees with the float64 rule within a few float32 ulps of the parameter (4 eps * max|p| per
step), float64 within 1e-14; split-SGD is exact: the float32 update fmaf(-lr, g, master) of the
reassembled master weight, bit for bit."""
import ml_dtypes
import numpy as np
import pytest

import pytpp

BF16 = np.dtype(ml_dtypes.bfloat16)


def tol(dtype, ref, steps=1):
    return 4 * steps * np.finfo(dtype).eps * max(1.0, np.abs(ref).max(initial=0.0))


def ref_sgd(p, g, buf, lr, momentum, wd):
    d = g + wd * p
    if momentum:
        buf = momentum * buf + d
        d = buf
    return p - lr * d, buf


def ref_adamw(p, g, m, v, step, lr, b1, b2, eps, wd):
    p = p * (1 - lr * wd)
    m = m + (1 - b1) * (g - m)
    v = b2 * v + (1 - b2) * g * g
    denom = np.sqrt(v) / np.sqrt(1 - b2 ** step) + eps
    return p - lr / (1 - b1 ** step) * m / denom, m, v


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [0, 1, 7, 17, 63, 100_003])
@pytest.mark.parametrize("momentum, wd", [(0.0, 0.0), (0.9, 0.0), (0.0, 0.01), (0.9, 0.01)])
def test_sgd_step(isa, threads, rng, dtype, n, momentum, wd):
    p = rng.standard_normal(n).astype(dtype)
    buf = np.zeros(n, dtype)
    rp, rb = p.astype(np.float64), buf.astype(np.float64)
    for _ in range(3):
        g = rng.standard_normal(n).astype(dtype)
        res = pytpp.nn.sgd_step(p, g, buf if momentum else None, lr=0.1, momentum=momentum,
                                weight_decay=wd)
        assert res is p
        rp, rb = ref_sgd(rp, g.astype(np.float64), rb, 0.1, momentum, wd)
    np.testing.assert_allclose(p, rp, rtol=0, atol=tol(dtype, rp, 3))
    if momentum:
        np.testing.assert_allclose(buf, rb, rtol=0, atol=tol(dtype, rb, 3))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [0, 1, 9, 33, 100_003])
def test_adamw_step(isa, threads, rng, dtype, n):
    p = rng.standard_normal(n).astype(dtype)
    m, v = np.zeros(n, dtype), np.zeros(n, dtype)
    rp, rm, rv = p.astype(np.float64), m.astype(np.float64), v.astype(np.float64)
    for step in range(1, 4):
        g = rng.standard_normal(n).astype(dtype)
        pytpp.nn.adamw_step(p, g, m, v, step=step, lr=1e-2, weight_decay=0.1)
        rp, rm, rv = ref_adamw(rp, g.astype(np.float64), rm, rv, step, 1e-2, 0.9, 0.999, 1e-8, 0.1)
    np.testing.assert_allclose(p, rp, rtol=0, atol=tol(dtype, rp, 3))
    np.testing.assert_allclose(m, rm, rtol=0, atol=tol(dtype, rm, 3))
    np.testing.assert_allclose(v, rv, rtol=0, atol=tol(dtype, rv, 3))


def test_matches_torch_optimizers(rng):
    torch = pytest.importorskip("torch")
    p = rng.standard_normal(257)
    tp = torch.tensor(p.copy(), requires_grad=True)
    opt = torch.optim.AdamW([tp], lr=3e-3, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05)
    m, v = np.zeros_like(p), np.zeros_like(p)
    for step in range(1, 6):
        g = rng.standard_normal(257)
        tp.grad = torch.tensor(g)
        opt.step()
        pytpp.nn.adamw_step(p, g, m, v, step=step, lr=3e-3, beta1=0.8, beta2=0.99, eps=1e-6,
                            weight_decay=0.05)
    np.testing.assert_allclose(p, tp.detach().numpy(), rtol=1e-13, atol=1e-13)
    q = rng.standard_normal(100)
    tq = torch.tensor(q.copy(), requires_grad=True)
    opt = torch.optim.SGD([tq], lr=0.05, momentum=0.5, weight_decay=1e-3)
    buf = np.zeros_like(q)
    for _ in range(4):
        g = rng.standard_normal(100)
        tq.grad = torch.tensor(g)
        opt.step()
        pytpp.nn.sgd_step(q, g, buf, lr=0.05, momentum=0.5, weight_decay=1e-3)
    np.testing.assert_allclose(q, tq.detach().numpy(), rtol=1e-13, atol=1e-13)


def split(master):
    bits = master.view(np.uint32)
    return (bits >> 16).astype(np.uint16).view(BF16), (bits & 0xFFFF).astype(np.uint16)


def join(hi, lo):
    return ((hi.view(np.uint16).astype(np.uint32) << 16) | lo).view(np.float32)


@pytest.mark.parametrize("n", [1, 7, 31, 100_003])
@pytest.mark.parametrize("grad_bf16", [False, True])
def test_split_sgd_is_the_float32_update(isa, threads, rng, n, grad_bf16):
    master = rng.standard_normal(n).astype(np.float32)
    hi, lo = split(master)
    g = rng.standard_normal(n).astype(BF16 if grad_bf16 else np.float32)
    res = pytpp.nn.split_sgd_step(hi, lo, g, lr=0.01)
    assert res is hi
    # float32 fmaf(-lr, g, master): the product is exact in long double (80-bit x87 on this
    # platform), the sum rounds once there and once to float32 (no tie in these data)
    ld = np.longdouble
    expect = (master.astype(ld) - ld(np.float32(0.01)) * g.astype(np.float32).astype(ld)
              ).astype(np.float32)
    np.testing.assert_array_equal(join(hi, lo), expect)


def test_split_sgd_keeps_what_bfloat16_alone_loses():
    """Tiny updates vanish in a bfloat16 weight; the split master weight accumulates them."""
    master = np.ones(16, np.float32)
    hi, lo = split(master)
    plain = np.ones(16, BF16)
    g = np.full(16, 1e-3, np.float32)
    for _ in range(100):
        pytpp.nn.split_sgd_step(hi, lo, g, lr=1e-2)
        plain = (plain.astype(np.float32) - 1e-2 * g).astype(BF16)
    assert (plain == 1).all()
    np.testing.assert_allclose(join(hi, lo), 1 - 1e-3, rtol=1e-5)


@pytest.mark.parametrize("call, exc, match", [
    (lambda p, g, b: pytpp.nn.sgd_step(p, g, lr=0.1, momentum=0.9), ValueError, "momentum_buffer"),
    (lambda p, g, b: pytpp.nn.sgd_step(p, g[:3], lr=0.1), ValueError, "grad has shape"),
    (lambda p, g, b: pytpp.nn.sgd_step(p, g, b[:3], lr=0.1, momentum=0.5), ValueError,
     "momentum_buffer has shape"),
    (lambda p, g, b: pytpp.nn.sgd_step(p, g, lr=-1.0), ValueError, "lr"),
    (lambda p, g, b: pytpp.nn.sgd_step(p, g, lr=float("nan")), ValueError, "lr"),
    (lambda p, g, b: pytpp.nn.sgd_step(p[::2], g[::2], lr=0.1), ValueError, "C-contiguous"),
    (lambda p, g, b: pytpp.nn.sgd_step(p.astype(np.int32), g, lr=0.1), TypeError, "dtype int32"),
    (lambda p, g, b: pytpp.nn.sgd_step(p, g, p, lr=0.1, momentum=0.5), ValueError, "share memory"),
    (lambda p, g, b: pytpp.nn.adamw_step(p, g, b, b.copy(), step=0), ValueError, "step"),
    (lambda p, g, b: pytpp.nn.adamw_step(p, g, b, b.copy(), step=1, beta1=1.0), ValueError,
     "beta1"),
    (lambda p, g, b: pytpp.nn.adamw_step(p, g, b.astype(np.float32), b, step=1), TypeError,
     "exp_avg has dtype"),
    (lambda p, g, b: pytpp.nn.split_sgd_step(p, b, g, lr=0.1), TypeError, "param_hi"),
])
def test_bad_input_raises_and_writes_nothing(call, exc, match):
    p = np.arange(8.0)
    g = np.ones(8)
    b = np.full(8, 2.0)
    before = (p.copy(), b.copy())
    with pytest.raises(exc, match=match):
        call(p, g, b)
    np.testing.assert_array_equal(p, before[0])
    np.testing.assert_array_equal(b, before[1])


def test_read_only_param():
    p = np.zeros(4)
    p.setflags(write=False)
    with pytest.raises(ValueError, match="pytpp.nn.sgd_step: param is read-only"):
        pytpp.nn.sgd_step(p, np.ones(4), lr=0.1)
