"""embedding_bag / embedding_bag_backward / embedding against numpy references and torch, at every
ISA level and on 1 and 2 threads.

Tolerances:
- Exact references. The kernels add a bag's rows per column in position order in the compute
  dtype (sum: acc + w; with per_sample_weights fma(p, w, acc); mean: the sum divided by the
  length once; max: w > acc ? w : acc), and the backward adds each gradient row's contributions
  in position order. ``seq_bags`` / ``seq_grad`` below do the same sequence of float32 (float64)
  operations in numpy, so sum, max and mean forward, and sum and max backward, are compared bit
  for bit. per_sample_weights are powers of two there (the products are exact, so the fused
  multiply-add rounds as numpy's multiply then add). A bfloat16 table is widened exactly, summed
  in float32 and rounded once to bfloat16: its result equals the float32 reference of the
  widened table rounded by ml_dtypes' ``astype`` (round to nearest even), bit for bit.
- Float64 references (general per_sample_weights, the mean backward whose scale 1/len is
  rounded): a sum of L terms in float32 is within L * eps32 * sum|terms| of the exact sum
  (Higham's recursive-sum bound), checked per element with that bound.
- torch (``torch.nn.functional.embedding_bag`` and autograd): its float32 summation order may
  differ, so the same L * eps32 * sum|terms| bound.
- 2 threads give exactly the 1-thread result: each bag is one thread's, each gradient row too,
  and the order of the additions does not depend on the split.
"""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pytpp
from pytpp.nn import _embedding as emb_module

BF16 = np.dtype(ml_dtypes.bfloat16)
EPS32 = float(np.finfo(np.float32).eps)


def bag_ends(off, n):
    return np.append(np.asarray(off[1:], np.int64), n).astype(np.int64)


def seq_bags(w, idx, off, mode, psw=None):
    """The kernels' sequence of operations in w's dtype (float32 or float64)."""
    dt = w.dtype
    out = np.zeros((len(off), w.shape[1]), dt)
    for b, (s, e) in enumerate(zip(off, bag_ends(off, len(idx)))):
        if e == s:
            continue
        rows = w[idx[s:e]]
        if mode == "max":
            acc = rows[0].copy()
            for r in rows[1:]:
                acc = np.where(r > acc, r, acc)
        else:
            acc = np.zeros(w.shape[1], dt)
            for j, r in enumerate(rows):
                acc = acc + (r if psw is None else dt.type(psw[s + j]) * r)
            if mode == "mean":
                acc = acc / dt.type(e - s)
        out[b] = acc
    return out


def winners(w, idx, off):
    """Per bag and column the position (absolute) of the first maximum, -1 for empty bags."""
    win = np.full((len(off), w.shape[1]), -1, np.int64)
    for b, (s, e) in enumerate(zip(off, bag_ends(off, len(idx)))):
        if e > s:
            win[b] = s + np.argmax(w[idx[s:e]], axis=0)    # argmax: the first maximum
    return win


def seq_grad(g, w, idx, off, mode, psw=None):
    """The dense gradient with each row's contributions added in position order."""
    dt = g.dtype
    out = np.zeros(w.shape, dt)
    if mode == "max":
        win = winners(w.astype(dt), idx, off)
        cols = np.arange(w.shape[1])
        for b in range(len(off)):
            hit = win[b] >= 0
            np.add.at(out, (idx[win[b][hit]], cols[hit]), g[b][hit])
        return out
    bag = np.repeat(np.arange(len(off)), np.diff(np.append(off, len(idx))))
    for k in range(len(idx)):
        b = bag[k]
        if mode == "mean":
            contrib = g[b] / dt.type(np.diff(np.append(off, len(idx)))[b])
        else:
            contrib = g[b] if psw is None else dt.type(psw[k]) * g[b]
        out[idx[k]] = out[idx[k]] + contrib
    return out


def f64_bags(w, idx, off, mode, psw=None):
    """float64 result and sum |terms| per element (the error scale)."""
    w = w.astype(np.float64)
    out = np.zeros((len(off), w.shape[1]))
    mag = np.zeros_like(out)
    for b, (s, e) in enumerate(zip(off, bag_ends(off, len(idx)))):
        if e == s:
            continue
        rows = w[idx[s:e]] * (1.0 if psw is None else np.asarray(psw[s:e], np.float64)[:, None])
        if mode == "max":
            out[b] = rows.max(axis=0)
        else:
            out[b] = rows.sum(axis=0) / ((e - s) if mode == "mean" else 1)
            mag[b] = np.abs(rows).sum(axis=0) / ((e - s) if mode == "mean" else 1)
    return out, mag


def within(got, ref, mag, terms):
    bound = 2 * max(terms, 1) * EPS32 * mag + 1e-30
    err = np.abs(np.asarray(got, np.float64) - ref)
    assert (err <= bound).all(), f"max error {err.max()} beyond {bound[err > bound].min()}"


def make_bags(rng, nbags, lo, hi):
    lens = rng.integers(lo, hi + 1, nbags)
    return np.concatenate(([0], np.cumsum(lens)[:-1])).astype(np.int64), int(lens.sum())


@pytest.mark.parametrize("dim", [1, 7, 17, 33, 63, 64, 130])
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64])
def test_forward_bit_exact(isa, threads, rng, dim, mode, idx_dtype):
    w = rng.standard_normal((97, dim)).astype(np.float32)
    off, n = make_bags(rng, 40, 0, 12)       # includes empty bags
    idx = rng.integers(0, 97, n).astype(idx_dtype)
    idx[:5] = idx[5:10]                       # duplicates within and across bags
    y = pytpp.nn.embedding_bag(w, idx, off, mode)
    assert y.dtype == np.float32 and y.shape == (40, dim)
    np.testing.assert_array_equal(y, seq_bags(w, idx, off, mode))


@pytest.mark.parametrize("dim", [3, 16, 64])
def test_forward_float64_and_per_sample_weights(isa, threads, rng, dim):
    w = rng.standard_normal((50, dim))
    off, n = make_bags(rng, 30, 0, 9)
    idx = rng.integers(0, 50, n)
    for mode in ("sum", "mean", "max"):
        np.testing.assert_array_equal(pytpp.nn.embedding_bag(w, idx, off, mode),
                                      seq_bags(w, idx, off, mode))
    pow2 = 2.0 ** rng.integers(-3, 4, n) * rng.choice([-1.0, 1.0], n)
    np.testing.assert_array_equal(pytpp.nn.embedding_bag(w, idx, off, "sum", pow2),
                                  seq_bags(w, idx, off, "sum", pow2))
    w32 = w.astype(np.float32)
    np.testing.assert_array_equal(pytpp.nn.embedding_bag(w32, idx, off, "sum", pow2),
                                  seq_bags(w32, idx, off, "sum", pow2.astype(np.float32)))
    psw = rng.standard_normal(n).astype(np.float32)
    ref, mag = f64_bags(w32, idx, off, "sum", psw)
    within(pytpp.nn.embedding_bag(w32, idx, off, "sum", psw), ref, mag, 9)


@pytest.mark.parametrize("dim", [5, 64, 100])
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_bf16_table_is_float32_rounded_once(isa, threads, rng, dim, mode):
    w = rng.standard_normal((60, dim)).astype(BF16)
    off, n = make_bags(rng, 25, 0, 40)
    idx = rng.integers(0, 60, n)
    y = pytpp.nn.embedding_bag(w, idx, off, mode)
    assert y.dtype == BF16
    expect = seq_bags(w.astype(np.float32), idx, off, mode).astype(BF16)
    np.testing.assert_array_equal(y.view(np.uint16), expect.view(np.uint16))
    if mode != "mean":
        pow2 = 2.0 ** rng.integers(-2, 3, n)
        y = pytpp.nn.embedding_bag(w, idx, off, "sum", pow2)
        expect = seq_bags(w.astype(np.float32), idx, off, "sum", pow2).astype(BF16)
        np.testing.assert_array_equal(y.view(np.uint16), expect.view(np.uint16))


@pytest.mark.parametrize("dim", [1, 7, 33, 64, 130])
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_backward(isa, threads, rng, dim, mode, dtype):
    rows = 41
    w = rng.standard_normal((rows, dim)).astype(dtype)
    off, n = make_bags(rng, 30, 0, 15)
    idx = rng.integers(0, rows, n).astype(np.int32)
    g = rng.standard_normal((30, dim)).astype(dtype)
    gw = pytpp.nn.embedding_bag_backward(g, w, idx, off, mode)
    assert gw.shape == w.shape and gw.dtype == w.dtype
    ref = seq_grad(g, w, idx, off, mode)
    if mode == "mean":    # scale 1/len rounded, then fused multiply-adds: a bound, not bits
        counts = np.bincount(idx, minlength=rows)[:, None]
        mag = seq_grad(np.abs(g).astype(np.float64), w, idx, off, mode)
        tol = 2 * np.maximum(counts, 1) * np.finfo(dtype).eps * mag
        assert (np.abs(gw - ref) <= tol + 1e-300).all()
    else:
        np.testing.assert_array_equal(gw, ref)
    rows_u, vals = pytpp.nn.embedding_bag_backward(g, w, idx, off, mode, sparse=True)
    np.testing.assert_array_equal(rows_u, np.unique(idx))
    np.testing.assert_array_equal(vals, gw[rows_u])


def test_backward_per_sample_weights_and_duplicates(isa, threads, rng):
    w = rng.standard_normal((8, 24)).astype(np.float32)
    idx = np.array([3, 3, 3, 1, 3, 0, 0, 7, 3, 3])          # one row many times, across bags
    off = np.array([0, 2, 2, 5, 9])
    g = rng.standard_normal((5, 24)).astype(np.float32)
    pow2 = 2.0 ** rng.integers(-3, 4, idx.size)
    gw = pytpp.nn.embedding_bag_backward(g, w, idx, off, "sum", pow2)
    np.testing.assert_array_equal(gw, seq_grad(g, w, idx, off, "sum", pow2))
    psw = rng.standard_normal(idx.size)
    gw = pytpp.nn.embedding_bag_backward(g, w, idx, off, "sum", psw)
    bag = np.repeat(np.arange(5), np.diff(np.append(off, idx.size)))
    ref = np.zeros((8, 24))
    mag = np.zeros((8, 24))
    np.add.at(ref, idx, psw[:, None] * g[bag].astype(np.float64))
    np.add.at(mag, idx, np.abs(psw[:, None] * g[bag]))
    within(gw, ref, mag, 6)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_bf16_backward_is_float32_rounded_once(isa, threads, rng, mode):
    w = rng.standard_normal((300, 64)).astype(BF16)
    off, n = make_bags(rng, 64, 0, 30)
    idx = rng.integers(0, 300, n)
    g = rng.standard_normal((64, 64)).astype(np.float32)
    gw = pytpp.nn.embedding_bag_backward(g, w, idx, off, mode)
    assert gw.dtype == BF16
    f32 = pytpp.nn.embedding_bag_backward(g, w.astype(np.float32), idx, off, mode)
    np.testing.assert_array_equal(gw.view(np.uint16), f32.astype(BF16).view(np.uint16))
    if mode != "mean":
        np.testing.assert_array_equal(f32, seq_grad(g, w.astype(np.float32), idx, off, mode))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("table", [np.float32, BF16])
def test_two_threads_equal_one(isa, rng, mode, table):
    w = rng.standard_normal((5000, 64)).astype(table)
    off, n = make_bags(rng, 300, 0, 40)
    idx = rng.integers(0, 5000, n)
    idx[::7] = 17                                      # a hot row, touched from many bags
    g = rng.standard_normal((300, 64)).astype(np.float32)
    psw = rng.standard_normal(n) if mode == "sum" else None
    res = []
    old = pytpp.get_num_threads()
    try:
        for t in (1, 2):
            pytpp.set_num_threads(t)
            res.append((pytpp.nn.embedding_bag(w, idx, off, mode, psw),
                        pytpp.nn.embedding_bag_backward(g, w, idx, off, mode, psw)))
    finally:
        pytpp.set_num_threads(old)
    for a, b in zip(res[0], res[1]):
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


def test_against_torch(rng):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    w = rng.standard_normal((200, 48)).astype(np.float32)
    off, n = make_bags(rng, 50, 0, 30)
    idx = rng.integers(0, 200, n)
    g = rng.standard_normal((50, 48)).astype(np.float32)
    psw = rng.standard_normal(n).astype(np.float32)
    for mode, p in (("sum", None), ("mean", None), ("max", None), ("sum", psw)):
        tw = torch.tensor(w, requires_grad=True)
        ty = F.embedding_bag(torch.tensor(idx), tw, torch.tensor(off), mode=mode,
                             per_sample_weights=None if p is None else torch.tensor(p))
        ty.backward(torch.tensor(g))
        y = pytpp.nn.embedding_bag(w, idx, off, mode, p)
        gw = pytpp.nn.embedding_bag_backward(g, w, idx, off, mode, p)
        ref, mag = f64_bags(w, idx, off, mode, p)
        within(ty.detach().numpy(), ref, mag, 30)
        within(y, ref, mag, 30)
        if mode == "max":
            np.testing.assert_array_equal(y, ty.detach().numpy())
            np.testing.assert_array_equal(gw, tw.grad.numpy())
        else:
            np.testing.assert_allclose(gw, tw.grad.numpy(), rtol=0, atol=1e-5 * np.abs(g).max()
                                       * max(np.bincount(idx).max(), 1))
    # plain gather
    tix = rng.integers(0, 200, (3, 5))
    np.testing.assert_array_equal(pytpp.nn.embedding(w, tix),
                                  F.embedding(torch.tensor(tix), torch.tensor(w)).numpy())


def test_max_ties_and_nan_follow_torch(isa):
    w = np.array([[1.0, 5.0], [1.0, 5.0], [np.nan, 0.0], [2.0, np.nan]], np.float32)
    idx = np.array([0, 1, 2, 0, 3, 1])
    off = np.array([0, 2, 4])
    y = pytpp.nn.embedding_bag(w, idx, off, "max")
    # bag 0: ties, the first wins; a NaN in a bag's first row stays (bag 1 column 0, bag 2
    # column 1), a NaN after it is passed over (bag 0 has none; bag 1 column 1: 0 then 5)
    np.testing.assert_array_equal(y, [[1.0, 5.0], [np.nan, 5.0], [2.0, np.nan]])
    g = np.array([[1.0, 2.0], [10.0, 20.0], [100.0, 200.0]], np.float32)
    gw = pytpp.nn.embedding_bag_backward(g, w, idx, off, "max")
    np.testing.assert_array_equal(gw, [[1.0, 22.0], [0.0, 0.0], [10.0, 0.0], [100.0, 200.0]])
    torch = pytest.importorskip("torch")
    tw = torch.tensor(w, requires_grad=True)
    ty = torch.nn.functional.embedding_bag(torch.tensor(idx), tw, torch.tensor(off), mode="max")
    ty.backward(torch.tensor(g))
    np.testing.assert_array_equal(y, ty.detach().numpy())
    np.testing.assert_array_equal(gw, tw.grad.numpy())


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 40), dim=st.integers(1, 40), lens=st.lists(st.integers(0, 9),
       max_size=12), mode=st.sampled_from(["sum", "mean", "max"]), i64=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_random_shapes(rows, dim, lens, mode, i64, seed):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((rows, dim)).astype(np.float32)
    off = np.concatenate(([0], np.cumsum(lens)[:-1])).astype(np.int64)[:len(lens)]
    idx = rng.integers(0, rows, int(sum(lens))).astype(np.int64 if i64 else np.int32)
    np.testing.assert_array_equal(pytpp.nn.embedding_bag(w, idx, off, mode),
                                  seq_bags(w, idx, off, mode))
    g = rng.standard_normal((len(lens), dim)).astype(np.float32)
    if mode != "mean":
        np.testing.assert_array_equal(pytpp.nn.embedding_bag_backward(g, w, idx, off, mode),
                                      seq_grad(g, w, idx, off, mode))


def test_zero_sizes(isa):
    w = np.ones((5, 3), np.float32)
    assert pytpp.nn.embedding_bag(w, [], []).shape == (0, 3)
    np.testing.assert_array_equal(pytpp.nn.embedding_bag(w, np.zeros(0, np.int64), [0, 0, 0],
                                                         "max"), np.zeros((3, 3)))
    assert pytpp.nn.embedding_bag(np.ones((5, 0)), [1, 2], [0]).shape == (1, 0)
    assert pytpp.nn.embedding_bag(np.ones((0, 4)), [], [0]).tolist() == [[0.0] * 4]
    np.testing.assert_array_equal(pytpp.nn.embedding_bag_backward(np.ones((2, 3)), w, [], [0, 0]),
                                  np.zeros((5, 3)))
    assert pytpp.nn.embedding_bag_backward(np.ones((0, 3)), w, [], []).shape == (5, 3)
    rows, vals = pytpp.nn.embedding_bag_backward(np.ones((1, 3)), w, [], [0], sparse=True)
    assert rows.shape == (0,) and vals.shape == (0, 3)
    assert pytpp.nn.embedding(w, np.zeros((2, 0), np.int64)).shape == (2, 0, 3)


def test_2d_indices_without_offsets_and_strided_table(isa, rng):
    w = rng.standard_normal((30, 20)).astype(np.float32)
    idx = rng.integers(0, 30, (6, 4))
    flat_off = np.arange(0, 24, 4)
    np.testing.assert_array_equal(pytpp.nn.embedding_bag(w, idx, None, "mean"),
                                  pytpp.nn.embedding_bag(w, idx.ravel(), flat_off, "mean"))
    big = rng.standard_normal((30, 50)).astype(np.float32)
    view = big[:, 5:25]                                # row stride 50, unit columns: no copy
    np.testing.assert_array_equal(pytpp.nn.embedding_bag(view, idx, None),
                                  seq_bags(view.copy(), idx.ravel(), flat_off, "sum"))
    np.testing.assert_array_equal(pytpp.nn.embedding_bag(big[:, ::2], idx, None, "max"),
                                  seq_bags(big[:, ::2].copy(), idx.ravel(), flat_off, "max"))
    h = w.astype(np.float16)
    y = pytpp.nn.embedding_bag(h, idx, None)
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, seq_bags(h.astype(np.float32), idx.ravel(), flat_off,
                                              "sum").astype(np.float16))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16, np.int16, np.uint8])
def test_embedding_is_take(isa, threads, rng, dtype):
    w = (rng.standard_normal((100, 37)) * 50).astype(dtype)
    for idx in (rng.integers(0, 100, 5000), rng.integers(0, 100, (7, 3)).astype(np.int32),
                np.int64(4)):
        out = pytpp.nn.embedding(w, idx)
        assert out.dtype == w.dtype
        np.testing.assert_array_equal(out.view(np.uint8), w[idx].view(np.uint8))
    np.testing.assert_array_equal(pytpp.nn.embedding(w[::-2, 1:], [0, 3]), w[::-2, 1:][[0, 3]])


def _bad_calls():
    w = np.ones((10, 4), np.float32)
    g = np.ones((2, 4), np.float32)
    eb, bw, em = (pytpp.nn.embedding_bag, pytpp.nn.embedding_bag_backward, pytpp.nn.embedding)
    F, B = "pytpp.nn.embedding_bag", "pytpp.nn.embedding_bag_backward"
    return [
        (lambda: eb(w, [1, 10], [0, 1]), ValueError, rf"{F}: indices\[1\] = 10 is out of range"),
        (lambda: eb(w, [1, -1], [0, 1]), ValueError, rf"{F}: indices\[1\] = -1 is out of range"),
        (lambda: eb(w, [1, 2, 3], [0, 2, 1]), ValueError, "offsets must be non-decreasing"),
        (lambda: eb(w, [1, 2, 3], [1, 2]), ValueError, r"offsets\[0\] must be 0"),
        (lambda: eb(w, [1, 2, 3], [0, 4]), ValueError, r"offsets\[-1\] = 4 is beyond len"),
        (lambda: eb(w, [1, 2], [[0, 1]]), ValueError, "offsets must be 1-D"),
        (lambda: eb(w, [1.0, 2.0], [0]), TypeError, f"{F}: indices has dtype float64"),
        (lambda: eb(w, [True], [0]), TypeError, "indices has dtype bool"),
        (lambda: eb(w, [1, 2], [0.0]), TypeError, "offsets has dtype float64"),
        (lambda: eb(w.ravel(), [1], [0]), ValueError, f"{F}: weight must be 2-D"),
        (lambda: eb(w[None], [1], [0]), ValueError, "weight must be 2-D"),
        (lambda: eb(w.astype(np.int32), [1], [0]), TypeError, "weight has dtype int32"),
        (lambda: eb(w, [1, 2], [0], "mean", [1.0, 2.0]), ValueError,
         "per_sample_weights is only supported with mode='sum'"),
        (lambda: eb(w, [1, 2], [0], "sum", [1.0]), ValueError, "per_sample_weights has shape"),
        (lambda: eb(w, [1, 2], [0], "median"), ValueError, "mode must be"),
        (lambda: eb(w, [[1, 2]], [0]), ValueError, "indices must be 1-D with offsets"),
        (lambda: eb(w, [1, 2], None), ValueError, "offsets=None takes 2-D indices"),
        (lambda: bw(g[:1], w, [1, 2], [0, 1]), ValueError, f"{B}: grad_out has shape"),
        (lambda: bw(g, w, [1, 20], [0, 1]), ValueError, f"{B}: indices\\[1\\] = 20"),
        (lambda: bw(g, w, [1, 2], [0, 3]), ValueError, r"offsets\[-1\] = 3"),
        (lambda: bw(g, w.ravel(), [1, 2], [0, 1]), ValueError, "weight must be 2-D"),
        (lambda: bw(g, w, [1, 2], [0, 1], "max", [1.0, 1.0]), ValueError, "per_sample_weights"),
        (lambda: em(w, [3, 11]), ValueError, r"pytpp.nn.embedding: indices\[1\] = 11"),
        (lambda: em(w, [[0, -2]]), ValueError, r"indices\[\(0, 1\)\] = -2"),
        (lambda: em(w.ravel(), [0]), ValueError, "pytpp.nn.embedding: weight must be 2-D"),
        (lambda: em(np.array([[None]]), [0]), TypeError, "weight has dtype object"),
    ]


@pytest.mark.parametrize("call, exc, match", _bad_calls())
def test_bad_input_raises_before_any_kernel(monkeypatch, call, exc, match):
    def boom(*args):
        raise AssertionError("a kernel ran before the arguments were checked")
    for name in ("forward", "backward", "backward_rows", "gather"):
        monkeypatch.setattr(emb_module._embedding, name, boom)
    with pytest.raises(exc, match=match):
        call()


def test_out(isa, rng):
    w = rng.standard_normal((50, 16)).astype(np.float32)
    off, n = make_bags(rng, 9, 0, 6)
    idx = rng.integers(0, 50, n)
    y = np.full((9, 16), np.nan, np.float32)
    assert pytpp.nn.embedding_bag(w, idx, off, out=y) is y
    np.testing.assert_array_equal(y, seq_bags(w, idx, off, "sum"))
    wb = w.astype(BF16)
    y32 = np.empty((9, 16), np.float32)            # a bf16 table's unrounded sums
    pytpp.nn.embedding_bag(wb, idx, off, "max", out=y32)
    np.testing.assert_array_equal(y32, seq_bags(wb.astype(np.float32), idx, off, "max"))
    g = rng.standard_normal((9, 16)).astype(np.float32)
    gw = np.full((50, 16), np.nan, np.float32)
    assert pytpp.nn.embedding_bag_backward(g, w, idx, off, out=gw) is gw
    np.testing.assert_array_equal(gw, seq_grad(g, w, idx, off, "sum"))
    gb = np.full((50, 16), np.nan, BF16)
    pytpp.nn.embedding_bag_backward(g, wb, idx, off, out=gb)
    np.testing.assert_array_equal(gb.view(np.uint16), gw.astype(BF16).view(np.uint16))
    with pytest.raises(ValueError, match="out shares memory with weight"):
        pytpp.nn.embedding_bag_backward(g, w, idx, off, "max", out=w)
    with pytest.raises(TypeError, match="out has dtype float64"):
        pytpp.nn.embedding_bag(w, idx, off, out=np.empty((9, 16)))
    with pytest.raises(ValueError, match="out has shape"):
        pytpp.nn.embedding_bag_backward(g, w, idx, off, out=gw[:3])
    with pytest.raises(ValueError, match="C-contiguous"):
        pytpp.nn.embedding_bag(w, idx, off, out=np.empty((16, 9), np.float32).T)
