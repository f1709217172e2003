"""scaled_dot_product_attention and multi_head_attention against float64 references (torch's
where installed) at every ISA level.

Tolerances: outputs are convex combinations of v's rows with weights from exp of scores of
E-term dot products: float32 agrees with float64 within 2e-5 of max|v| (the dot products'
~E * eps relative error, times the softmax's sensitivity to score shifts of order 1, times
|v|); float64 within 1e-12."""
import functools
import subprocess
import sys
import types

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pytpp

TOL = {np.float32: 2e-5, np.float64: 1e-12}


@pytest.fixture(params=[1, 2], ids=["tiles", "full_rows"])
def path(request, monkeypatch):
    """Both loop structures of the forward (attention.h): keys in tiles with the online softmax,
    and full score rows; the automatic choice takes full rows up to S = 16384, so the tiles would
    otherwise go untested."""
    from pytpp.nn import _attention as front
    glue = front._attention
    monkeypatch.setattr(front, "_attention", types.SimpleNamespace(
        sdpa_forward=functools.partial(glue.sdpa_forward, path=request.param),
        sdpa_backward=glue.sdpa_backward))
    return request.param


def ref_probs(q, k, mask=None, causal=False, scale=None):
    """float64 attention probabilities softmax(q k^T * scale + mask)"""
    q, k = q.astype(np.float64), k.astype(np.float64)
    s = (q @ np.swapaxes(k, -1, -2)) * (1 / np.sqrt(q.shape[-1]) if scale is None else scale)
    L, S = s.shape[-2:]
    if causal:
        s = np.where(np.tril(np.ones((L, S), bool)), s, -np.inf)
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    # torch's safe softmax: a row whose every score is -inf has probabilities 0
    m = s.max(-1, keepdims=True)
    p = np.exp(s - np.where(m == -np.inf, 0.0, m))
    den = p.sum(-1, keepdims=True)
    return p / np.where(den == 0, 1.0, den)


def ref_sdpa(q, k, v, mask=None, causal=False, scale=None):
    return ref_probs(q, k, mask, causal, scale) @ v.astype(np.float64)


def close(y, ref, dtype, v):
    np.testing.assert_allclose(y, ref, rtol=0, atol=TOL[dtype] * max(1.0, np.abs(v).max()))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("L, S, E, Ev", [(1, 1, 32, 32), (7, 9, 64, 80), (129, 129, 64, 64),
                                         (200, 70, 80, 32), (3, 300, 128, 16)])
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa(isa, threads, path, rng, dtype, L, S, E, Ev, causal):
    q = rng.standard_normal((2, 3, L, E)).astype(dtype)
    k = rng.standard_normal((2, 3, S, E)).astype(dtype)
    v = rng.standard_normal((2, 3, S, Ev)).astype(dtype)
    y = pytpp.nn.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert y.shape == (2, 3, L, Ev) and y.dtype == dtype
    close(y, ref_sdpa(q, k, v, causal=causal), dtype, v)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("scale", [0.125, -0.3])
def test_far_from_the_score_bound(isa, path, rng, dtype, scale):
    """The full-row softmax shifts the scores by the bound |scale| |q_i| max_j |k_j| instead of
    the row maximum; keys of large norm at right angles to the queries make that bound exceed the
    largest score by ~800, where every exp(s - bound) underflows (float64 too): those rows are
    redone from their maximum. Half the queries are long (loose bound), half short (bound close).
    """
    L, S, E = 20, 40, 16
    q = rng.standard_normal((L, E))
    q[: L // 2, 0] = 40.0
    q[: L // 2, 1] = 0.0
    k = rng.standard_normal((S, E))
    k[0] = 0.0
    k[0, 1] = 800.0 / (40.0 * abs(scale))     # orthogonal to the long queries
    q, k = q.astype(dtype), k.astype(dtype)
    v = rng.standard_normal((S, 8)).astype(dtype)
    y = pytpp.nn.scaled_dot_product_attention(q, k, v, scale=scale)
    assert np.isfinite(y).all()
    close(y, ref_sdpa(q, k, v, scale=scale), dtype, v)


def test_masks_and_broadcast(isa, path, rng):
    q = rng.standard_normal((2, 4, 17, 32))
    k = rng.standard_normal((1, 4, 23, 32))            # batch dim broadcasts
    v = rng.standard_normal((2, 1, 23, 8))
    bmask = rng.random((17, 23)) > 0.4
    bmask[3] = False                                     # a query with every key masked: 0
    y = pytpp.nn.scaled_dot_product_attention(q, k, v, bmask)
    ref = ref_sdpa(q, k, v, bmask)
    assert (y[..., 3, :] == 0).all() and (ref[..., 3, :] == 0).all()
    close(y, ref, np.float64, v)
    fm = np.where(bmask, 0.0, -np.inf)                  # the same mask, additive
    close(pytpp.nn.scaled_dot_product_attention(q, k, v, fm), ref, np.float64, v)
    fmask = rng.standard_normal((2, 1, 17, 1))          # additive, broadcast over keys
    close(pytpp.nn.scaled_dot_product_attention(q, k, v, fmask, scale=0.3),
          ref_sdpa(q, k, v, fmask, scale=0.3), np.float64, v)


def test_matches_torch(rng):
    torch = pytest.importorskip("torch")
    q, k, v = (rng.standard_normal((2, 3, 33, 64)) for _ in range(3))
    tq, tk, tv = map(torch.tensor, (q, k, v))
    F = torch.nn.functional
    for causal in (False, True):
        np.testing.assert_allclose(pytpp.nn.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                   F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal),
                                   atol=1e-12)
    mha = torch.nn.MultiheadAttention(64, 4, bias=False, batch_first=True).double()
    x = rng.standard_normal((2, 19, 64))
    yt, _ = mha(*(torch.tensor(x),) * 3, need_weights=False)
    y = pytpp.nn.multi_head_attention(x, mha.in_proj_weight.detach().numpy(),
                                      mha.out_proj.weight.detach().numpy(), 4)
    np.testing.assert_allclose(y, yt.detach().numpy(), atol=1e-12)


@pytest.mark.parametrize("L, S", [(1, 1), (7, 9), (129, 200), (300, 33)])
@pytest.mark.parametrize("masking", ["none", "causal", "bool", "float"])
def test_backward_matches_torch(rng, L, S, masking):
    torch = pytest.importorskip("torch")
    q, k = rng.standard_normal((2, 3, L, 16)), rng.standard_normal((2, 3, S, 16))
    v, g = rng.standard_normal((2, 3, S, 8)), rng.standard_normal((2, 3, L, 8))
    mask = {"bool": rng.random((L, S)) > 0.3, "float": rng.standard_normal((2, 1, L, S))}.get(masking)
    if masking == "bool":
        mask[L // 2] = False                # a query with every key masked: zeros, no gradient
    causal = masking == "causal"
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    ty = torch.nn.functional.scaled_dot_product_attention(
        tq, tk, tv, attn_mask=None if mask is None else torch.tensor(mask), is_causal=causal)
    ty.backward(torch.tensor(g))
    y = pytpp.nn.scaled_dot_product_attention(q, k, v, mask, is_causal=causal)
    np.testing.assert_allclose(y, ty.detach().numpy(), atol=1e-10)
    grads = pytpp.nn.scaled_dot_product_attention_backward(g, q, k, v, mask, is_causal=causal)
    for ours, theirs in zip(grads, (tq.grad, tk.grad, tv.grad)):
        np.testing.assert_allclose(ours, theirs.numpy(), atol=1e-10)


def test_backward_float32_and_broadcast(isa, rng):
    q = rng.standard_normal((2, 3, 17, 8)).astype(np.float32)
    k = rng.standard_normal((1, 3, 11, 8)).astype(np.float32)
    v = rng.standard_normal((2, 1, 11, 4)).astype(np.float32)
    g = rng.standard_normal((2, 3, 17, 4)).astype(np.float32)
    gq, gk, gv = pytpp.nn.scaled_dot_product_attention_backward(g, q, k, v)
    assert gq.shape == q.shape and gk.shape == k.shape and gv.shape == v.shape
    assert gq.dtype == np.float32
    r = pytpp.nn.scaled_dot_product_attention_backward(*(a.astype(np.float64) for a in (g, q, k, v)))
    for ours, ref in zip((gq, gk, gv), r):
        np.testing.assert_allclose(ours, ref, atol=1e-4 * max(1.0, np.abs(ref).max()))


@settings(max_examples=25, deadline=None)
@given(L=st.integers(1, 80), S=st.integers(1, 150), E=st.integers(1, 40),
       seed=st.integers(0, 2**32 - 1))
def test_hypothesis_shapes(L, S, E, seed):
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((L, E)), rng.standard_normal((S, E))
    v = rng.standard_normal((S, 3))
    close(pytpp.nn.scaled_dot_product_attention(q, k, v), ref_sdpa(q, k, v), np.float64, v)


@pytest.mark.parametrize("n, path, limit", [(4096, 0, 24), (8192, 1, 64), (8192, 2, 64)])
def test_memory_does_not_grow_with_L_squared(n, path, limit):
    """L = S = 4096 and 8192: an (L, S) float32 score matrix would take 64 and 256 MiB; the
    forward's peak RSS grows by its output (1/2 and 1 MiB) and per-thread buffers: packed K and V
    (full rows, 2 x S x 32 floats: 1 MiB at 4096) or K^T and the tiles (path 1)."""
    code = f"""
import functools, resource, types, numpy as np, pytpp
from pytpp.nn import _attention as front
if {path}:
    front._attention = types.SimpleNamespace(
        sdpa_forward=functools.partial(front._attention.sdpa_forward, path={path}))
rng = np.random.default_rng(0)
q, k, v = (rng.standard_normal((1, {n}, 32)).astype(np.float32) for _ in range(3))
pytpp.nn.scaled_dot_product_attention(q[:, :64], k[:, :64], v[:, :64])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
y = pytpp.nn.scaled_dot_product_attention(q, k, v)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((after - before) // 1024)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(r.stdout.split()[-1]) < limit, r.stdout


@pytest.mark.parametrize("call, exc, match", [
    (lambda q: pytpp.nn.scaled_dot_product_attention(q, q[..., :3], q), ValueError, "E ="),
    (lambda q: pytpp.nn.scaled_dot_product_attention(q, q, q[:, :2]), ValueError, "keys"),
    (lambda q: pytpp.nn.scaled_dot_product_attention(q, q.astype(np.float32), q), TypeError,
     "one dtype"),
    (lambda q: pytpp.nn.scaled_dot_product_attention(q, q, q, np.ones((2, 2), bool)), ValueError,
     "broadcast"),
    (lambda q: pytpp.nn.scaled_dot_product_attention(q, q, q, dropout_p=1.0), ValueError,
     "dropout"),
    (lambda q: pytpp.nn.multi_head_attention(q, np.ones((12, 4)), np.eye(4), 3), ValueError,
     "num_heads"),
    (lambda q: pytpp.nn.multi_head_attention(q, np.ones((8, 4)), np.eye(4), 2), ValueError,
     "w_qkv"),
])
def test_bad_input(call, exc, match):
    q = np.ones((2, 5, 4))
    with pytest.raises(exc, match=match):
        call(q)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal", [False, True])
def test_fused_dropout_is_dropout_of_the_probabilities(isa, path, rng, dtype, causal):
    B, H, L, S, E = 2, 2, 37, 130 if not causal else 37, 16
    q = rng.standard_normal((B, H, L, E)).astype(dtype)
    k = rng.standard_normal((B, H, S, E)).astype(dtype)
    v = rng.standard_normal((B, H, S, E)).astype(dtype)
    p, seed = 0.3, 2024
    o = pytpp.nn.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=p, seed=seed)
    sc = np.einsum("bhle,bhse->bhls", q.astype(np.float64), k) / np.sqrt(E)
    if causal:
        sc[..., np.arange(S)[None, :] > np.arange(L)[:, None]] = -np.inf
    probs = np.exp(sc - sc.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    # the mask pytpp.nn.dropout draws for the (B, H, L, S) matrix with the same seed
    keep = pytpp.nn.dropout(np.ones(probs.shape, dtype), p, seed=seed)
    want = np.einsum("bhls,bhse->bhle", probs * keep, v)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(o, want, atol=tol * (1 + np.abs(want).max()))
    np.testing.assert_array_equal(
        o, pytpp.nn.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=p,
                                                 seed=seed))
    assert not np.array_equal(
        o, pytpp.nn.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=p,
                                                 seed=seed + 1))
    # backward with the same seed: the gradient of the same dropped product
    g = rng.standard_normal(o.shape).astype(dtype)
    gq, gk, gv = pytpp.nn.scaled_dot_product_attention_backward(g, q, k, v, is_causal=causal,
                                                                dropout_p=p, seed=seed)
    pd = probs * keep
    dv = np.einsum("bhls,bhle->bhse", pd, g)
    dp = np.einsum("bhle,bhse->bhls", g, v) * keep
    ds = probs * (dp - (dp * probs).sum(-1, keepdims=True)) / np.sqrt(E)
    dq = np.einsum("bhls,bhse->bhle", ds, k)
    dk = np.einsum("bhls,bhle->bhse", ds, q)
    for got, ref in ((gq, dq), (gk, dk), (gv, dv)):
        np.testing.assert_allclose(got, ref, atol=10 * tol * (1 + np.abs(ref).max()))


def test_dropout_p_is_checked():
    q = np.ones((2, 4), np.float32)
    for p in (1.0, -0.1, 2.0):
        with pytest.raises(ValueError, match="dropout_p"):
            pytpp.nn.scaled_dot_product_attention(q, q, q, dropout_p=p)


# ---- the backward's two implementations: the C engine (attention.h's pytpp_sdpa_backward, the
# default) and the numpy blocks (the reference)

@pytest.fixture(params=["c", "numpy"])
def bwd_path(request, monkeypatch):
    from pytpp.nn import _attention as front
    monkeypatch.setattr(front, "_BWD_PATH", request.param)
    return request.param


def ref_backward(g, q, k, v, mask=None, causal=False, keep=None):
    """float64 gradients of softmax(q k^T / sqrt(E) + mask) (times keep) @ v"""
    p = ref_probs(q, k, mask, causal)
    g, q, k, v = (a.astype(np.float64) for a in (g, q, k, v))
    keep = 1.0 if keep is None else keep
    dv = np.swapaxes(p * keep, -1, -2) @ g
    dp = g @ np.swapaxes(v, -1, -2) * keep
    ds = p * (dp - (dp * p).sum(-1, keepdims=True)) / np.sqrt(q.shape[-1])
    return ds @ k, np.swapaxes(ds, -1, -2) @ q, dv


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("L, S, E, Ev", [(1, 1, 32, 32), (7, 7, 64, 80), (129, 7, 80, 32),
                                         (7, 129, 32, 64), (129, 129, 64, 64), (40, 70, 5, 3)])
@pytest.mark.parametrize("masking", ["none", "causal", "bool", "float", "dropout"])
def test_backward_odd_shapes(isa, threads, bwd_path, rng, dtype, L, S, E, Ev, masking):
    """Tolerances: float64 1e-11 of the largest gradient; float32 2e-4 of it plus the largest
    itself (the scores' ~E eps relative error, through sums of S and L terms of dS, P)."""
    B = 3
    q, k = rng.standard_normal((B, L, E)).astype(dtype), rng.standard_normal((B, S, E)).astype(dtype)
    v, g = rng.standard_normal((B, S, Ev)).astype(dtype), rng.standard_normal((B, L, Ev)).astype(dtype)
    mask, keep, kw = None, None, {}
    if masking == "bool":
        mask = rng.random((L, S)) > 0.3
        mask[L // 2] = False                # a query with every key masked: no gradient
    elif masking == "float":
        mask = rng.standard_normal((B, L, S)).astype(dtype)
    elif masking == "dropout":
        kw = {"dropout_p": 0.25, "seed": 77}
        keep = pytpp.nn.dropout(np.ones((B, L, S)), 0.25, seed=77)
    got = pytpp.nn.scaled_dot_product_attention_backward(
        g, q, k, v, mask, is_causal=masking == "causal", **kw)
    want = ref_backward(g, q, k, v, mask, masking == "causal", keep)
    tol = 2e-4 if dtype == np.float32 else 1e-11
    for a, b in zip(got, want):
        assert a.dtype == dtype
        np.testing.assert_allclose(a, b, rtol=0, atol=tol * (1 + np.abs(b).max()))
    if masking == "bool":
        assert not np.any(got[0][:, L // 2])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal", [False, True])
def test_backward_dropout_is_the_forwards(isa, rng, dtype, causal):
    """The output is linear in v: sum(dO * o(v)) = sum(dV * v) exactly when the backward drops
    the elements the forward dropped (a mask drawn elsewhere would leave a gap of order 1)."""
    q, k = rng.standard_normal((2, 33, 16)).astype(dtype), rng.standard_normal((2, 33, 16)).astype(dtype)
    v, g = rng.standard_normal((2, 33, 8)).astype(dtype), rng.standard_normal((2, 33, 8)).astype(dtype)
    o = pytpp.nn.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=0.4, seed=9)
    _, _, dv = pytpp.nn.scaled_dot_product_attention_backward(g, q, k, v, is_causal=causal,
                                                              dropout_p=0.4, seed=9)
    lhs, rhs = np.sum(g.astype(np.float64) * o), np.sum(dv.astype(np.float64) * v)
    assert abs(lhs - rhs) <= (1e-4 if dtype == np.float32 else 1e-11) * np.abs(g).sum()


@pytest.mark.parametrize("B", [1, 3, 4])
@pytest.mark.parametrize("kw", [{"dropout_p": 0.1, "seed": 4}, {"is_causal": True},
                                {"attn_mask": np.arange(300)[:, None] % 7 != np.arange(300) % 5}])
def test_backward_threads_agree(isa, rng, B, kw):
    """Threads take whole batch entries (B = 4 on 2 threads: bitwise the one-thread result) or
    query blocks of every entry with dK and dV summed from per-thread partials (B = 1, 3, long
    enough for a block each: the same sums in another order, float32 rounding apart)."""
    q, k, v, g = (rng.standard_normal((B, 300, 40)).astype(np.float32) for _ in range(4))
    old = pytpp.get_num_threads()
    try:
        runs = []
        for n in (1, 2):
            pytpp.set_num_threads(n)
            runs.append(pytpp.nn.scaled_dot_product_attention_backward(g, q, k, v, **kw))
    finally:
        pytpp.set_num_threads(old)
    for a, b in zip(*runs):
        if B == 4:
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-5 * np.abs(b).max())


def test_backward_memory_does_not_grow_with_L_squared():
    """L = S = 8192: (L, S) float32 blocks would take 256 MiB each; the backward's peak RSS grows
    by its three outputs (1 MiB each) and per thread the packed operands of one entry (5 x 1 MiB),
    one query block's P and dS (2 x 64 x S floats: 4 MiB) and partial dK, dV (2 MiB)."""
    code = """
import resource, numpy as np, pytpp
rng = np.random.default_rng(0)
q, k, v, g = (rng.standard_normal((1, 8192, 32)).astype(np.float32) for _ in range(4))
pytpp.nn.scaled_dot_product_attention_backward(g[:, :64], q[:, :64], k[:, :64], v[:, :64])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
r = pytpp.nn.scaled_dot_product_attention_backward(g, q, k, v, is_causal=True)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((after - before) // 1024)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(r.stdout.split()[-1]) < 64, r.stdout
