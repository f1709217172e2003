"""mlp / mlp_backward against a float64 torch reference; bert_layer against torch's
TransformerEncoderLayer with the same weights."""
import numpy as np
import pytest

import pytpp

torch = pytest.importorskip("torch")


def _layers(rng, widths, acts, dtype=np.float32):
    out = []
    for (i, o), act in zip(zip(widths, widths[1:]), acts):
        w = (rng.standard_normal((o, i)) / np.sqrt(i)).astype(dtype)
        b = rng.standard_normal(o).astype(dtype) if act != "tanh" else None
        out.append((w, b, act))
    return out


def _torch_mlp(x, layers):
    t = torch.from_numpy(x.astype(np.float64)).requires_grad_(True)
    h = t
    for w, b, act in layers:
        h = torch.nn.functional.linear(h, torch.from_numpy(w.astype(np.float64)),
                                       None if b is None else torch.from_numpy(b.astype(np.float64)))
        if act == "gelu":
            h = torch.nn.functional.gelu(h)
        elif act == "gelu_tanh":
            h = torch.nn.functional.gelu(h, approximate="tanh")
        elif act is not None:
            h = getattr(torch, act)(h)
    return t, h


@pytest.mark.parametrize("rows", [1, 7, 33, 4100])
def test_mlp_forward_and_backward(isa, rng, rows):
    layers = _layers(rng, [17, 40, 33, 9], ["gelu", "tanh", None])
    x = rng.standard_normal((rows, 17)).astype(np.float32)
    t, h = _torch_mlp(x, layers)
    want = h.detach().numpy()
    tol = 1e-5 * (1 + np.abs(want).max())
    np.testing.assert_allclose(pytpp.nn.mlp(x, layers), want, atol=tol)
    y, pre = pytpp.nn.mlp(x, layers, return_activations=True)
    np.testing.assert_allclose(y, want, atol=tol)
    g = rng.standard_normal(y.shape).astype(np.float32)
    gx, grads = pytpp.nn.mlp_backward(g, x, layers, pre)
    h.backward(torch.from_numpy(g.astype(np.float64)))
    np.testing.assert_allclose(gx, t.grad.numpy(), atol=1e-4 * (1 + np.abs(t.grad.numpy()).max()))
    assert [gw.shape for gw, _ in grads] == [w.shape for w, _, _ in layers]


def test_mlp_leading_dims_and_errors(rng):
    layers = _layers(rng, [8, 6, 3], ["relu", "sigmoid"])
    x = rng.standard_normal((2, 3, 8))
    assert pytpp.nn.mlp(x, layers).shape == (2, 3, 3)
    with pytest.raises(ValueError, match="layers\\[1\\]"):
        pytpp.nn.mlp(x, [layers[0], (np.ones((3, 7)), None, None)])
    with pytest.raises(ValueError, match="activation"):
        pytpp.nn.mlp(x, [(layers[0][0], None, "swish")])
    with pytest.raises(TypeError):
        pytpp.nn.mlp(x, [])


@pytest.mark.parametrize("rows", [1, 7, 33, 4100])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_packed_mlp_equals_mlp(isa, rng, rows, dtype, monkeypatch):
    """Weights packed once; the walk in blocks of rows (made short here: 4100 rows run 257
    blocks of 16) against the float64 reference and mlp itself."""
    from pytpp.nn import _mlp
    monkeypatch.setattr(_mlp, "_BLOCK_BYTES", 4 * 40 * 16)
    layers = _layers(rng, [17, 40, 33, 9], ["gelu", "relu", None], dtype)
    x = rng.standard_normal((rows, 17)).astype(dtype)
    pm = pytpp.nn.PackedMLP(layers)
    got = pm(x)
    assert got.dtype == dtype and got.shape == (rows, 9)
    want = _torch_mlp(x, layers)[1].detach().numpy()
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(got, want, atol=40 * eps * (1 + np.abs(want).max()))
    np.testing.assert_allclose(got, pytpp.nn.mlp(x, layers), atol=8 * eps * (1 + np.abs(want).max()))


def test_packed_mlp_copies_leading_dims_and_errors(rng):
    layers = _layers(rng, [8, 6, 3], ["relu", "sigmoid"])
    pm = pytpp.nn.PackedMLP(layers)
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    before = pm(x)
    layers[0][0][...] = 0.0                 # packed copies: the caller's weights may change
    np.testing.assert_array_equal(pm(x), before)
    assert pm(x).shape == (2, 3, 3) and pm(x[0, :0]).shape == (0, 3)
    with pytest.raises(ValueError, match="PackedMLP: x has shape"):
        pm(np.ones((2, 7), np.float32))
    with pytest.raises(ValueError, match="layers\\[1\\]"):
        pytpp.nn.PackedMLP([layers[0], (np.ones((3, 7)), None, None)])
    with pytest.raises(TypeError):
        pytpp.nn.PackedMLP([])
    with pytest.raises(TypeError):
        pytpp.nn.PackedMLP([np.ones((3, 3))])


def _torch_layer(w, D, H, F, eps):
    layer = torch.nn.TransformerEncoderLayer(D, H, F, dropout=0.0, activation="gelu",
                                             batch_first=True, layer_norm_eps=eps)
    names = {"self_attn.in_proj_weight": "w_qkv", "self_attn.in_proj_bias": "b_qkv",
             "self_attn.out_proj.weight": "w_out", "self_attn.out_proj.bias": "b_out",
             "linear1.weight": "w_ff1", "linear1.bias": "b_ff1", "linear2.weight": "w_ff2",
             "linear2.bias": "b_ff2", "norm1.weight": "ln1_weight", "norm1.bias": "ln1_bias",
             "norm2.weight": "ln2_weight", "norm2.bias": "ln2_bias"}
    layer.load_state_dict({k: torch.from_numpy(w[v]) for k, v in names.items()})
    return layer.eval()


@pytest.mark.parametrize("L", [1, 7, 33])
def test_bert_layer_equals_torch(isa, rng, L):
    D, H, F = 64, 4, 96
    w = pytpp.nn.bert_layer_weights(D, F, seed=3)
    x = rng.standard_normal((2, L, D)).astype(np.float32)
    mask = rng.random((L, L)) > 0.3
    np.fill_diagonal(mask, True)
    layer = _torch_layer(w, D, H, F, 1e-12)
    with torch.no_grad():
        want = layer(torch.from_numpy(x)).numpy()
        want_m = layer(torch.from_numpy(x), src_mask=torch.from_numpy(~mask)).numpy()
    np.testing.assert_allclose(pytpp.nn.bert_layer(x, w, H), want, atol=2e-5)
    np.testing.assert_allclose(pytpp.nn.bert_layer(x, w, H, attn_mask=mask), want_m, atol=2e-5)


def test_bert_layer_dropout_and_errors(rng):
    w = pytpp.nn.bert_layer_weights(32, 64)
    x = rng.standard_normal((1, 5, 32)).astype(np.float32)
    a = pytpp.nn.bert_layer(x, w, 2, dropout_p=0.1, seed=7)
    np.testing.assert_array_equal(a, pytpp.nn.bert_layer(x, w, 2, dropout_p=0.1, seed=7))
    assert not np.array_equal(a, pytpp.nn.bert_layer(x, w, 2))
    with pytest.raises(ValueError, match="num_heads"):
        pytpp.nn.bert_layer(x, w, 3)
    with pytest.raises(ValueError, match="weights lack"):
        pytpp.nn.bert_layer(x, {"w_qkv": w["w_qkv"]}, 2)
    with pytest.raises(ValueError):
        pytpp.nn.bert_layer(x[0], w, 2)
