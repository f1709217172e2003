"""Quantized inference: the quantize / dequantize maps, exact 8-bit GEMM (u8 x s8, s8 x s8,
u8 x u8) and quantized (dynamic) linear layers against torch (quantize_per_tensor /
quantize_per_channel, _int_mm, the dynamically quantized Linear), onnxruntime when installed
(QuantizeLinear / DequantizeLinear, MatMulInteger, the dynamically quantized linear graph
DynamicQuantizeLinear + MatMulInteger + dequantize), numpy and pytpp's float32 kernels (ref)."""
import numpy as np

import pytpp

# BERT-base FFN: (tokens, in, out) both ways
FFN = ((1, 768, 3072), (32, 768, 3072), (128, 768, 3072), (512, 768, 3072), (128, 3072, 768))


def _onnx_matmul_integer(a_signed=False, b_signed=True):
    """An onnxruntime session running MatMulInteger(A u8 or s8, B s8 or u8, a_zero_point) ->
    int32, or None."""
    try:
        import onnx  # noqa: F401
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return None
    a_type = TensorProto.INT8 if a_signed else TensorProto.UINT8
    node = helper.make_node("MatMulInteger", ["A", "B", "za"], ["Y"])
    graph = helper.make_graph(
        [node], "mmi",
        [helper.make_tensor_value_info("A", a_type, ["m", "k"]),
         helper.make_tensor_value_info("B", TensorProto.INT8 if b_signed else TensorProto.UINT8,
                                       ["k", "n"]),
         helper.make_tensor_value_info("za", a_type, [])],
        [helper.make_tensor_value_info("Y", TensorProto.INT32, ["m", "n"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = pytpp.get_num_threads()
    return ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])


def _onnx_dynamic_linear(w, scale, bias):
    """An onnxruntime session of the dynamically quantized linear layer onnxruntime's
    quantize_dynamic makes of a MatMul (DynamicQuantizeLinear, MatMulInteger on int8 weights with
    per-output-channel scales as constants, the dequantizing Mul, the bias Add; the session's
    graph optimisations fuse what they can), or None."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return None
    wq = np.clip(np.rint(w / scale[:, None]), -128, 127).astype(np.int8).T.copy()   # (k, n)
    inits = [numpy_helper.from_array(wq, "Wq"),
             numpy_helper.from_array(np.zeros(wq.shape[1], np.int8), "wz"),
             numpy_helper.from_array(scale.astype(np.float32), "ws"),
             numpy_helper.from_array(bias.astype(np.float32), "bias")]
    nodes = [helper.make_node("DynamicQuantizeLinear", ["X"], ["xq", "xs", "xz"]),
             helper.make_node("MatMulInteger", ["xq", "Wq", "xz", "wz"], ["acc"]),
             helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["xs", "ws"], ["s"]),
             helper.make_node("Mul", ["accf", "s"], ["yf"]),
             helper.make_node("Add", ["yf", "bias"], ["Y"])]
    graph = helper.make_graph(
        nodes, "dynamic_linear",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["m", wq.shape[0]])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["m", wq.shape[1]])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = pytpp.get_num_threads()
    return ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])


def _onnx_qdq(quantize, per_channel_n=None):
    """An onnxruntime session of QuantizeLinear (float32 X -> uint8) or DequantizeLinear (uint8
    X -> float32) with the parameters as inputs (per channel along axis 1 when per_channel_n),
    or None."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return None
    op = "QuantizeLinear" if quantize else "DequantizeLinear"
    in_t, out_t = ((TensorProto.FLOAT, TensorProto.UINT8) if quantize
                   else (TensorProto.UINT8, TensorProto.FLOAT))
    pshape = [] if per_channel_n is None else [per_channel_n]
    attrs = {} if per_channel_n is None else {"axis": 1}
    graph = helper.make_graph(
        [helper.make_node(op, ["X", "s", "z"], ["Y"], **attrs)], "qdq",
        [helper.make_tensor_value_info("X", in_t, ["m", "n"]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, pshape),
         helper.make_tensor_value_info("z", TensorProto.UINT8, pshape)],
        [helper.make_tensor_value_info("Y", out_t, ["m", "n"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = pytpp.get_num_threads()
    return ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])


def _maps(h, m, n, threads, per_channel):
    """quantize float32 -> uint8 and dequantize back, per tensor or per column; bytes read and
    written per call as the work (memory-bound maps)."""
    how = "per channel" if per_channel else "per tensor"
    rng = np.random.default_rng(0)
    x = rng.standard_normal((m, n)).astype(np.float32)
    s = rng.uniform(0.01, 0.05, n) if per_channel else 0.03
    z = rng.integers(100, 156, n) if per_channel else 128
    axis = 1 if per_channel else None
    q = pytpp.quant.quantize(x, s, z, axis=axis)
    qo, yo = np.empty_like(q), np.empty((m, n), np.float32)
    kq = pytpp.tpp.unary("quantize", m, n, np.float32, channel_axis=axis)
    kd = pytpp.tpp.unary("dequantize", m, n, np.uint8, channel_axis=axis)
    s32 = np.asarray(s, np.float32)
    torch = h.torch
    cases = (("quantize", lambda: pytpp.quant.quantize(x, s, z, axis=axis),
              lambda: kq(x, s, z, qo),
              lambda: np.clip(np.rint(x / s32) + z, 0, 255).astype(np.uint8)),
             ("dequantize", lambda: pytpp.quant.dequantize(q, s, z, axis=axis),
              lambda: kd(q, s, z, yo),
              lambda: (q.astype(np.int32) - z).astype(np.float32) * s32))
    for name, pytpp_fn, handle, numpy_fn in cases:
        case = f"{name} {how} {m}x{n}"
        if not h.wants(case):
            continue
        impls = [("pytpp quant", pytpp_fn), ("pytpp TPP handle", handle), ("numpy", numpy_fn)]
        if torch is not None:
            tx = torch.from_numpy(x)
            if per_channel:
                ts, tz = torch.from_numpy(s), torch.from_numpy(z.astype(np.int64))
                tquant = (lambda: torch.quantize_per_channel(tx, ts, tz, 1, torch.quint8))
            else:
                tquant = (lambda: torch.quantize_per_tensor(tx, s, z, torch.quint8))
            impls.append(("torch", tquant if name == "quantize" else tquant().dequantize))
        sess = _onnx_qdq(name == "quantize", n if per_channel else None)
        if sess is not None:
            feeds = {"X": x if name == "quantize" else q, "s": s32,
                     "z": np.asarray(z, np.uint8)}
            impls.append(("onnxruntime", lambda sess=sess, feeds=feeds: sess.run(None, feeds)))
        h.compare(case, threads, x.nbytes + q.nbytes, "GB/s", "copy_gbs", impls, flops=x.size)


def _exactness(y, a, b, a_zero_point):
    """A label for a peer's int32 product: " (inexact)" when it differs from the exact one, else
    "". onnxruntime's MatMulInteger on AVX2 sums u8 x s8 pairs in saturating int16
    (vpmaddubsw) for full-range u8, and then runs above the exact int8 peak."""
    rows = slice(0, min(a.shape[0], 64))
    ref = (a[rows].astype(np.int64) - a_zero_point) @ b.astype(np.int64)
    return "" if np.array_equal(np.asarray(y)[rows], ref) else " (inexact)"


def _layer_data(m, k, n, seed):
    """(w, bias, x, QuantizedLinear(w, bias)) of a Gaussian layer (out n, in k) and m rows."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((n, k)) * 0.05).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    x = rng.standard_normal((m, k)).astype(np.float32)
    return w, bias, x, pytpp.quant.QuantizedLinear(w, bias)


def _torch_quantized(torch, cls, w, scale, bias):
    """(engine, module): torch's quantized Linear `cls` (static or dynamic) on its best engine
    here, with w quantized per output channel at `scale` (pytpp's own weight scales)."""
    engines = torch.backends.quantized.supported_engines
    engine = "x86" if "x86" in engines else engines[-1]
    torch.backends.quantized.engine = engine
    n, k = w.shape
    module = cls(k, n, dtype=torch.qint8)
    qw = torch.quantize_per_channel(torch.from_numpy(w), torch.from_numpy(scale.copy()),
                                    torch.zeros(n, dtype=torch.long), 0, torch.qint8)
    module.set_weight_bias(qw, torch.from_numpy(bias))
    return engine, module


def _onnx_static_linear(w, scale, x_scale, x_zp, y_scale, y_zp):
    """An onnxruntime session of a statically quantized linear layer: QLinearMatMul on uint8 x
    (given scale and zero point) and int8 weights with per-output-channel scales, uint8 out; or
    None."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return None
    wq = np.clip(np.rint(w / scale[:, None]), -128, 127).astype(np.int8).T.copy()   # (k, n)
    inits = [numpy_helper.from_array(wq, "Wq"),
             numpy_helper.from_array(np.array(x_scale, np.float32), "xs"),
             numpy_helper.from_array(np.array(x_zp, np.uint8), "xz"),
             numpy_helper.from_array(scale.astype(np.float32), "ws"),
             numpy_helper.from_array(np.zeros(wq.shape[1], np.int8), "wz"),
             numpy_helper.from_array(np.array(y_scale, np.float32), "ys"),
             numpy_helper.from_array(np.array(y_zp, np.uint8), "yz")]
    node = helper.make_node("QLinearMatMul", ["X", "xs", "xz", "Wq", "ws", "wz", "ys", "yz"],
                            ["Y"])
    graph = helper.make_graph(
        [node], "static_linear",
        [helper.make_tensor_value_info("X", TensorProto.UINT8, ["m", wq.shape[0]])],
        [helper.make_tensor_value_info("Y", TensorProto.UINT8, ["m", wq.shape[1]])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = pytpp.get_num_threads()
    try:
        return ort.InferenceSession(model.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
    except Exception:   # an onnxruntime without per-channel QLinearMatMul
        return None


def _linear_static(h, m, k, n, threads):
    """The layer on an activation already quantized (static quantization: uint8 x with its
    scale and zero point), against torch's statically quantized Linear and QLinearMatMul."""
    case = f"quantized linear static {m}x{k}x{n}"
    if not h.wants(case):
        return
    w, bias, x, layer = _layer_data(m, k, n, seed=2)
    # 7-bit activations where the layer's kernels take them (reduce_range), as torch's x86 does
    qmax = 127 if layer._seven_bit() else 255
    lo, hi = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    x_scale = (hi - lo) / qmax
    x_zp = int(round(-lo / x_scale))
    q = np.clip(np.rint(x / x_scale) + x_zp, 0, qmax).astype(np.uint8)
    y = np.empty((m, n), np.float32)
    impls = [("pytpp QuantizedLin", lambda: layer.forward(q, x_scale, x_zp, out=y))]
    torch = h.torch
    if torch is not None:
        try:
            from torch.ao.nn.quantized import Linear as QLinear
            engine, ql = _torch_quantized(torch, QLinear, w, layer.weight_scale, bias)
            ql.scale, ql.zero_point = 0.05, 128
            qx = torch.quantize_per_tensor(torch.from_numpy(x), x_scale, x_zp, torch.quint8)
            impls.append((f"torch static ({engine})", lambda: ql(qx)))
        except Exception:   # a torch build without the quantized engines
            pass
    sess = _onnx_static_linear(w, layer.weight_scale, x_scale, x_zp, 0.05, 128)
    if sess is not None:
        feeds = {"X": q}
        impls.append(("onnxruntime QLMM", lambda: sess.run(None, feeds)))
    kind = "int8_7bit" if layer._seven_bit() else "int8"
    h.compare(case, threads, 2.0 * m * k * n, "GOP/s", kind, impls,
              nbytes=q.nbytes + w.nbytes // 4 + m * n * 4)


def _gemm(h, m, k, n, threads):
    case = f"matmul_int8 u8s8 {m}x{k}x{n}"
    if not h.wants(case):
        return
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (m, k)).astype(np.uint8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    c = np.empty((m, n), np.int32)
    af, bf, cf = a.astype(np.float32), b.astype(np.float32), np.empty((m, n), np.float32)
    impls = [("pytpp matmul_int8", lambda: pytpp.quant.matmul_int8(a, b, a_zero_point=3, out=c)),
             ("pytpp fp32 (ref)", lambda: pytpp.matmul(af, bf, out=cf))]
    if m * k * n <= 2 ** 28:
        a32, b32 = a.astype(np.int32), b.astype(np.int32)
        impls.append(("numpy int32", lambda: np.matmul(a32, b32, out=c)))
    torch = h.torch
    if torch is not None and m > 16 and k % 8 == 0 and n % 8 == 0:
        ta = torch.from_numpy((a.astype(np.int16) - 128).astype(np.int8))
        tb, tc = torch.from_numpy(b), torch.from_numpy(c)
        impls.append(("torch._int_mm", lambda: torch._int_mm(ta, tb, out=tc)))
    sess = _onnx_matmul_integer()
    if sess is not None:
        feeds = {"A": a, "B": b, "za": np.array(3, np.uint8)}
        impls.append((f"onnxruntime MMI{_exactness(sess.run(None, feeds)[0], a, b, 3)}",
                      lambda: sess.run(None, feeds)))
    # cold: every call starts with its operands in memory (no peer inherits another's cache:
    # torch would otherwise run on the arrays pytpp's call just read)
    h.compare(case, threads, 2.0 * m * k * n, "GOP/s", "int8", impls,
              nbytes=a.nbytes + b.nbytes + c.nbytes, cold=True)


def _gemm_types(h, m, k, n, threads, adt, bdt):
    """The other type pairs: s8 x s8, the operand types of torch._int_mm (symmetric
    quantization of both sides), and u8 x u8 (onnxruntime's MatMulInteger takes both)."""
    name = {np.dtype(np.int8): "s8", np.dtype(np.uint8): "u8"}
    case = f"matmul_int8 {name[np.dtype(adt)]}{name[np.dtype(bdt)]} {m}x{k}x{n}"
    if not h.wants(case):
        return
    rng = np.random.default_rng(0)
    a = rng.integers(np.iinfo(adt).min, np.iinfo(adt).max + 1, (m, k)).astype(adt)
    b = rng.integers(np.iinfo(bdt).min, np.iinfo(bdt).max + 1, (k, n)).astype(bdt)
    c = np.empty((m, n), np.int32)
    impls = [("pytpp matmul_int8", lambda: pytpp.quant.matmul_int8(a, b, out=c))]
    torch = h.torch
    if torch is not None and adt == bdt == np.int8 and m > 16 and k % 8 == 0 and n % 8 == 0:
        ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c)
        impls.append(("torch._int_mm", lambda: torch._int_mm(ta, tb, out=tc)))
    sess = _onnx_matmul_integer(a_signed=adt == np.int8, b_signed=bdt == np.int8)
    if sess is not None:
        feeds = {"A": a, "B": b, "za": np.array(0, adt)}
        try:
            label = f"onnxruntime MMI{_exactness(sess.run(None, feeds)[0], a, b, 0)}"
            impls.append((label, lambda: sess.run(None, feeds)))
        except Exception:   # an onnxruntime without the s8 x s8 kernel
            pass
    # cold: every call starts with its operands in memory (no peer inherits another's cache:
    # torch would otherwise run on the arrays pytpp's call just read)
    h.compare(case, threads, 2.0 * m * k * n, "GOP/s", "int8", impls,
              nbytes=a.nbytes + b.nbytes + c.nbytes, cold=True)


def _linear(h, m, k, n, threads):
    case = f"quantized linear {m}x{k}x{n}"
    if not h.wants(case):
        return
    w, bias, x, layer = _layer_data(m, k, n, seed=1)
    out = np.empty((m, n), np.float32)
    y = np.empty((m, n), np.float32)
    impls = [("pytpp QuantizedLin", lambda: layer(x, out=y)),
             ("pytpp fp32 (ref)", lambda: pytpp.nn.linear(x, w, bias, out=out))]
    torch = h.torch
    if torch is not None:
        try:
            from torch.ao.nn.quantized.dynamic import Linear as DynLinear
            engine, dl = _torch_quantized(torch, DynLinear, w, layer.weight_scale, bias)
            tx = torch.from_numpy(x)
            impls.append((f"torch dyn ({engine})", lambda: dl(tx)))
        except Exception:   # a torch build without the quantized engines
            pass
        tw, tb, tx = torch.from_numpy(w), torch.from_numpy(bias), torch.from_numpy(x)
        impls.append(("torch fp32 linear", lambda: torch.nn.functional.linear(tx, tw, tb)))
    sess = _onnx_dynamic_linear(w, layer.weight_scale, bias)
    if sess is not None:
        feeds = {"X": x}
        impls.append(("onnxruntime dyn", lambda: sess.run(None, feeds)))
    # the layer's kernels: 7-bit activations on AVX2 (reduce_range), whose peak is higher
    kind = "int8_7bit" if layer._seven_bit() else "int8"
    h.compare(case, threads, 2.0 * m * k * n, "GOP/s", kind, impls,
              nbytes=x.nbytes + w.nbytes // 4 + out.nbytes)


def run(h):
    h.header("Quantized inference: 8-bit x 8-bit -> int32 GEMM, quantized linear "
             "(BERT-base FFN)")
    for threads in h.threads:
        h.set_threads(threads)
        for per_channel in (False, True):
            _maps(h, 2048, 2048, threads, per_channel)
        _gemm(h, 1024, 1024, 1024, threads)
        _gemm_types(h, 1024, 1024, 1024, threads, np.int8, np.int8)
        _gemm_types(h, 1024, 1024, 1024, threads, np.uint8, np.uint8)
        for m, k, n in FFN:
            if h.quick and m > 128:
                continue
            _gemm(h, m, k, n, threads)
            _gemm_types(h, m, k, n, threads, np.int8, np.int8)
            if m in (32, 128):
                _gemm_types(h, m, k, n, threads, np.uint8, np.uint8)
            _linear(h, m, k, n, threads)
            _linear_static(h, m, k, n, threads)
