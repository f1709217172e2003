"""A user's script calling every public function of pytpp, with the types a user would write:
`mypy --strict` must accept it (tests/typing/test_mypy.py). It also runs."""
from typing import Any

import ml_dtypes
import numpy as np
from numpy.typing import NDArray

import pytpp
from pytpp.linalg import PackedMatrix

Array = NDArray[Any]

x: Array = np.linspace(-2.0, 2.0, 24).reshape(4, 6)
w: Array = np.ones((6, 3))

# configuration
levels: tuple[str, ...] = pytpp.available_isas()
level: str = pytpp.get_isa()
pytpp.set_isa(level)
with pytpp.use_isa(levels[0]) as active:
    inside: str = active
threads: int = pytpp.get_num_threads()
pytpp.set_num_threads(threads)
include: str = pytpp.get_include()
pytpp.show_config()
version: str = pytpp.__version__

# contractions
c: Array = pytpp.matmul(x, w)
c = pytpp.matmul(x, w, out=np.empty((4, 3)), dtype=np.float64)
c = pytpp.matmul(x.astype(ml_dtypes.bfloat16), w.astype(ml_dtypes.bfloat16))
packed: PackedMatrix = pytpp.linalg.pack(w)
packed = pytpp.linalg.PackedMatrix(w, dtype=np.float64)
c = pytpp.matmul(x, packed)
c = pytpp.linalg.matmul(x, packed)
shape: tuple[int, int] = packed.shape
wt: Array = packed.T
s: Array = pytpp.brgemm(np.ones((2, 4, 6)), np.ones((2, 6, 3)), beta=0.0)
s = pytpp.linalg.brgemm(np.ones((2, 4, 6)), np.ones((2, 6, 3)), np.zeros((4, 3)))
stack: Array = pytpp.linalg.batched_matmul(np.ones((5, 2, 3)), np.ones((5, 3, 2)),
                                           np.empty((5, 2, 2)))
blocks: Array = pytpp.linalg.matmul_stack(np.ones((3, 2, 2)), np.ones((3, 2, 2)),
                                          np.zeros((2, 2, 2)), [0, 1, 2], [2, 1, 0], [0, 1, 1],
                                          alpha=0.5)

# neural-network functions
y: Array = pytpp.nn.relu(x)
y = pytpp.nn.exp(x, approx=True)
y = pytpp.nn.tanh(x, approx="minimax")
y = pytpp.nn.sigmoid(x, out=np.empty_like(x))
y = pytpp.nn.gelu(x, "tanh", approx=False)
y = pytpp.nn.softmax(x, axis=-1)
y = pytpp.nn.softmax(x, axis=(0, 1))
y = pytpp.nn.softmax(x, dim=0)
g: Array = np.ones_like(x)
y = pytpp.nn.relu_backward(g, x)
y = pytpp.nn.exp_backward(g, y)
y = pytpp.nn.tanh_backward(g, y)
y = pytpp.nn.sigmoid_backward(g, y)
y = pytpp.nn.gelu_backward(g, x, "none")
y = pytpp.nn.softmax_backward(g, pytpp.nn.softmax(x), axis=-1)
y = pytpp.nn.dropout(x, 0.25, seed=np.random.default_rng(0))
kept, mask = pytpp.nn.dropout(x, 0.25, seed=7, return_mask=True)
both: Array | tuple[Array, Array] = pytpp.nn.dropout(x, 0.25, return_mask=bool(levels))
y = pytpp.nn.dropout_backward(g, mask, 0.25)
y = pytpp.nn.layer_norm(x, x.shape[-1], np.ones(x.shape[-1]), None, 1e-5)
y, mu, rs = pytpp.nn.layer_norm(x, x.shape[-1:], return_stats=True)
gx, gw, gb = pytpp.nn.layer_norm_backward(g, x, mu, rs)
y, rs = pytpp.nn.rms_norm(x, x.shape[-1], eps=1e-6, return_stats=True)
gx, gw_rms = pytpp.nn.rms_norm_backward(g, x, rs, out=np.empty_like(x))
x4: Array = np.ones((2, 4, 3, 3))
y = pytpp.nn.group_norm(x4, 2, np.ones(4), np.zeros(4))
y, mu, rs = pytpp.nn.group_norm(x4, 2, return_stats=True)
gx, gw, gb = pytpp.nn.group_norm_backward(x4, x4, 2, mu, rs)
running: Array = np.zeros(4)
y = pytpp.nn.batch_norm(x4, running, np.ones(4), training=True, momentum=0.1)
y, mu, rs = pytpp.nn.batch_norm(x4, None, None, training=True, data_format="NCHW",
                                return_stats=True)
gx, gw, gb = pytpp.nn.batch_norm_backward(x4, x4, mu, rs, np.ones(4))
lin: Array = pytpp.nn.linear(np.ones((3, 4)), np.ones((5, 4)), np.zeros(5), activation="gelu",
                             residual=np.ones((3, 5)))
gx, gw_lin, gb_lin = pytpp.nn.linear_backward(np.ones((3, 5)), np.ones((3, 4)), np.ones((5, 4)),
                                              activation="relu", pre_activation=lin)
packed_layer = pytpp.nn.PackedLinear(np.ones((5, 4)), np.zeros(5))
lin = packed_layer(np.ones((3, 4)), activation="tanh")
qkv: Array = np.ones((2, 3, 5, 8))
att: Array = pytpp.nn.scaled_dot_product_attention(qkv, qkv, qkv, is_causal=True)
att = pytpp.nn.scaled_dot_product_attention(qkv, qkv, qkv, np.ones((5, 5), bool), scale=0.5)
dq, dk, dv = pytpp.nn.scaled_dot_product_attention_backward(qkv, qkv, qkv, qkv, is_causal=True)
att = pytpp.nn.multi_head_attention(np.ones((2, 5, 8)), np.ones((24, 8)), np.eye(8), 2)
params: Array = np.zeros(8, np.float32)
params = pytpp.nn.sgd_step(params, np.ones(8, np.float32), np.zeros(8, np.float32), lr=0.1,
                           momentum=0.9, weight_decay=1e-4)
params = pytpp.nn.adamw_step(params, np.ones(8, np.float32), np.zeros(8, np.float32),
                             np.zeros(8, np.float32), step=1, lr=1e-3)
halves: Array = pytpp.nn.split_sgd_step(np.zeros(8, np.uint16), np.zeros(8, np.uint16),
                                        np.ones(8, np.float32), lr=0.1)
table: Array = np.ones((10, 4), np.float32)
pooled: Array = pytpp.nn.embedding_bag(table, [1, 2, 2], [0, 1], "mean")
pooled = pytpp.nn.embedding_bag(table, np.array([[1, 2]]), None, per_sample_weights=[[0.5, 2.0]],
                                out=np.empty((1, 4), np.float32))
table_grad: Array = pytpp.nn.embedding_bag_backward(np.ones((2, 4)), table, [1, 2, 2], [0, 1])
touched, row_grads = pytpp.nn.embedding_bag_backward(np.ones((2, 4)), table, [1, 2, 2], [0, 1],
                                                     "max", sparse=True)
rows_of: Array = pytpp.nn.embedding(table, np.array([[0, 9]], np.int32))

# the TPP layer: kernel handles
bk: pytpp.tpp.BrgemmKernel = pytpp.tpp.brgemm(4, 3, 6, beta=0.0)
out: Array = bk(np.ones((2, 4, 6)), np.ones((2, 6, 3)), np.empty((4, 3)), 2)
descriptor: dict[str, Any] = bk.descriptor
gk: pytpp.tpp.GemmKernel = pytpp.tpp.gemm(2, 2, 2, dtype=np.float64, beta=0.0)
out = gk(np.ones((2, 2)), np.eye(2), np.empty((2, 2)))
out = gk.stack(np.ones((3, 2, 2)), np.ones((3, 2, 2)), np.empty((3, 2, 2)), 3)
isa: str = gk.isa
uk: pytpp.tpp.EltwiseKernel | pytpp.tpp.TransformKernel = pytpp.tpp.unary("relu", 4, 6,
                                                                          np.float64)
res: Any = uk(x, np.empty_like(x))
qk: pytpp.tpp.QuantKernel = pytpp.tpp.unary("quantize", 4, 6, np.float64, out_dtype=np.int8)
q8: Array = qk(x, 0.5, 0, np.empty((4, 6), np.int8))
ek = pytpp.tpp.binary("add", 4, 6, np.float64)
res = ek(x, x, np.empty_like(x))
tk: pytpp.tpp.EltwiseKernel = pytpp.tpp.ternary("muladd", 4, 6, np.float64)
res = tk(x, x, x, np.empty_like(x))
choices: tuple[bool | str, ...] = pytpp.tpp.approx_choices("tanh")
pytpp.tpp.clear_cache()
