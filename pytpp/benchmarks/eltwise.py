"""Element-wise TPPs on large arrays: activations, softmax rows, transpose.

Rates are GB/s of bytes read + written per call, shown as % of the measured copy bandwidth
(`python -m pytpp info`: the better of ordinary and streaming stores between two 256 MiB
buffers, also read + write). All implementations write into preallocated outputs. On the
roofline (`bench --plot`) each case counts one operation per element: these are pure bandwidth
cases, drawn at 1 / (bytes per element) operations per byte, on or under the memory line.
"""
import ml_dtypes
import numpy as np

import pytpp
from pytpp import nn
from pytpp.benchmarks._harness import optional_import

BF16 = np.dtype(ml_dtypes.bfloat16)


def _peers_unary(h, name, x, out):
    """(label, fn) pairs of numpy / scipy / torch for activation `name` on x (float32 or
    float64: numpy, scipy and torch; bfloat16: torch)."""
    impls = []
    sp = optional_import("scipy.special")
    torch = h.torch
    if x.dtype in (np.float32, np.float64):
        if name == "exp":
            impls.append(("numpy exp", lambda: np.exp(x, out=out)))
        elif name == "tanh":
            impls.append(("numpy tanh", lambda: np.tanh(x, out=out)))
        elif name == "sigmoid" and sp is not None:
            import scipy.special as sps
            impls.append(("scipy expit", lambda: sps.expit(x, out=out)))
        elif name == "gelu" and sp is not None:
            import scipy.special as sps
            c = x.dtype.type(1 / np.sqrt(2))
            impls.append(("scipy erf gelu", lambda: np.multiply(
                np.multiply(x, 0.5, out=out), 1 + sps.erf(x * c), out=out)))
        elif name == "gelu_tanh":
            k = x.dtype.type(np.sqrt(2 / np.pi))
            impls.append(("numpy tanh gelu", lambda: np.multiply(
                x * 0.5, 1 + np.tanh(k * (x + 0.044715 * x ** 3)), out=out)))
        elif name == "relu":
            impls.append(("numpy maximum", lambda: np.maximum(x, 0, out=out)))
    if torch is not None:
        tx = torch.from_numpy(x.view(np.uint16) if x.dtype == BF16 else x)
        to = torch.from_numpy(out.view(np.uint16) if x.dtype == BF16 else out)
        if x.dtype == BF16:
            tx, to = tx.view(torch.bfloat16), to.view(torch.bfloat16)
        F = torch.nn.functional
        fns = {"exp": lambda: torch.exp(tx, out=to), "tanh": lambda: torch.tanh(tx, out=to),
               "sigmoid": lambda: torch.sigmoid(tx, out=to),
               "gelu": lambda: to.copy_(F.gelu(tx)),
               "gelu_tanh": lambda: to.copy_(F.gelu(tx, approximate="tanh")),
               "relu": lambda: torch.clamp_min(tx, 0, out=to)}
        impls.append((f"torch {name}", fns[name]))
    return impls


ACTIVATIONS = ("exp", "tanh", "sigmoid", "gelu", "gelu_tanh", "relu")


def _activations(h, threads, n):
    rng = np.random.default_rng(0)
    for dtype in (np.float32, BF16, np.float64):
        dname = np.dtype(dtype).name
        if not any(h.wants(f"{name} {dname} n={n}") for name in ACTIVATIONS):
            continue
        x = rng.standard_normal(n).astype(dtype)
        out = np.empty_like(x)
        nbytes = 2 * x.nbytes
        cases = [("exp", lambda: nn.exp(x, approx=True, out=out), "approx"),
                 ("exp", lambda: nn.exp(x, out=out), "exact"),
                 ("tanh", lambda: nn.tanh(x, out=out), "exact"),
                 ("tanh", lambda: nn.tanh(x, approx=True, out=out), "pade"),
                 ("tanh", lambda: nn.tanh(x, approx="minimax", out=out), "minimax"),
                 ("sigmoid", lambda: nn.sigmoid(x, approx=True, out=out), "approx"),
                 ("sigmoid", lambda: nn.sigmoid(x, approx="pade", out=out), "pade"),
                 ("sigmoid", lambda: nn.sigmoid(x, out=out), "exact"),
                 ("gelu", lambda: nn.gelu(x, approx=True, out=out), "minimax"),
                 ("gelu", lambda: nn.gelu(x, out=out), "exact erf"),
                 ("gelu_tanh", lambda: nn.gelu(x, "tanh", approx=True, out=out), "pade"),
                 ("gelu_tanh", lambda: nn.gelu(x, "tanh", out=out), "exact"),
                 ("relu", lambda: nn.relu(x, out=out), "")]
        if dtype == np.float64:     # approximations are float32's (float64 runs the exact op)
            cases = [c for c in cases if c[2] in ("exact", "exact erf", "")]
        done_peers = set()
        for name, fn, label in cases:
            impls = [(f"pytpp {label}".strip(), fn)]
            if name not in done_peers:
                impls += _peers_unary(h, name, x, out)
                done_peers.add(name)
            h.compare(f"{name} {dname} n={n}", threads, nbytes, "GB/s", "copy_gbs", impls,
                      flops=x.size)


def _softmax(h, threads):
    case = "softmax float32 (4096, 1024) axis=-1"
    if not h.wants(case):
        return
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4096, 1024)).astype(np.float32)
    out = np.empty_like(x)
    impls = [("pytpp exact", lambda: nn.softmax(x, out=out)),
             ("pytpp approx", lambda: nn.softmax(x, approx=True, out=out))]
    sp = optional_import("scipy.special")
    if sp is not None:
        import scipy.special as sps
        impls.append(("scipy softmax", lambda: sps.softmax(x, axis=-1)))
    if h.torch is not None:
        torch = h.torch
        tx, to = torch.from_numpy(x), torch.from_numpy(out)
        impls.append(("torch softmax", lambda: torch.softmax(tx, -1, out=to)
                      if hasattr(torch, "softmax") else None))
    h.compare(case, threads, 2 * x.nbytes, "GB/s", "copy_gbs", impls, flops=x.size)


def _transpose(h, threads, n):
    rng = np.random.default_rng(2)
    for dtype in (np.float32, BF16):
        case = f"transpose {np.dtype(dtype).name} {n}x{n}"
        if not h.wants(case):
            continue
        x = rng.standard_normal((n, n)).astype(dtype)
        out = np.empty_like(x)
        k = pytpp.tpp.unary("transpose", n, n, dtype)
        impls = [("pytpp transpose", lambda: k(x, out)),
                 ("numpy copyto(x.T)", lambda: np.copyto(out, x.T)),
                 ("numpy copy (ref)", lambda: np.copyto(out, x))]
        if h.torch is not None and dtype == np.float32:
            torch = h.torch
            tx, to = torch.from_numpy(x), torch.from_numpy(out)
            impls.append(("torch t().copy", lambda: to.copy_(tx.t())))
        h.compare(case, threads, 2 * x.nbytes, "GB/s", "copy_gbs", impls, flops=x.size)


def run(h):
    h.header("Element-wise TPPs: GB/s (read + write) and % of measured copy bandwidth")
    # The reference sizes, also with --quick (which only takes fewer repetitions): 16M elements
    # (64 MiB in + 64 MiB out for float32) and 4096^2 are well beyond L3; smaller arrays partly
    # stay in cache and would be compared with a memory-bandwidth probe they do not hit.
    n = 16 << 20
    tn = 4096
    for threads in h.threads:
        h.set_threads(threads)
        _activations(h, threads, n)
        _softmax(h, threads)
        _transpose(h, threads, tn)
