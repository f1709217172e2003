"""Float64 numpy references of the convolutions and poolings (direct sums over the kernel taps),
shared by the conv tests. Layout NCHW; the callers transpose NHWC."""
import math

import numpy as np
from hypothesis import strategies as st


def to_fmt(a, fmt):
    """An NCHW array in `fmt` (NHWC: a C-contiguous transposed copy)."""
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)) if fmt == "NHWC" else a


def from_fmt(a, fmt):
    """An array in `fmt` seen as NCHW (a view)."""
    return a.transpose(0, 3, 1, 2) if fmt == "NHWC" else a


def pads_of(padding, R, S, dil, stride):
    """(top, bottom, left, right) for conv2d's padding argument."""
    dh, dw = dil
    if padding == "valid":
        return 0, 0, 0, 0
    if padding == "same":
        th, tw = dh * (R - 1), dw * (S - 1)
        return th // 2, th - th // 2, tw // 2, tw - tw // 2
    ph, pw = (padding, padding) if np.isscalar(padding) else padding
    return ph, ph, pw, pw


@st.composite
def kernel_geometry(draw, max_dil=3):
    """A hypothesis draw of a kernel (R, S), dilation, padding (int, pair, "same" or "valid"),
    stride and an input size (H, W) the padded kernel fits: the shared part of the conv tests'
    random cases."""
    R, S = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    dil = (draw(st.integers(1, max_dil)), draw(st.integers(1, 2)))
    padding = draw(st.sampled_from(["int", "pair", "same", "valid"]))
    stride = (1, 1) if padding == "same" else (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    if padding == "int":
        padding = draw(st.integers(0, 3))
    elif padding == "pair":
        padding = (draw(st.integers(0, 3)), draw(st.integers(0, 2)))
    pt, pb, pl, pr = pads_of(padding, R, S, dil, stride)
    H = draw(st.integers(max(1, dil[0] * (R - 1) + 1 - pt - pb), 17))
    W = draw(st.integers(max(1, dil[1] * (S - 1) + 1 - pl - pr), 19))
    return {"H": H, "W": W, "R": R, "S": S, "stride": stride, "padding": padding, "dil": dil}


def conv2d_ref(x, w, bias=None, stride=(1, 1), pads=(0, 0, 0, 0), dil=(1, 1), groups=1,
               absolute=False):
    """out[n, k, p, q] = sum x[n, c, p*sh + r*dh - top, q*sw + s*dw - left] w[k, c, r, s];
    absolute: the same sum of |terms| (for error bounds)."""
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    if absolute:
        x, w = np.abs(x), np.abs(w)
    N, C, H, W = x.shape
    K, cg, R, S = w.shape
    (sh, sw), (dh, dw) = stride, dil
    pt, pb, pl, pr = pads
    xp = np.zeros((N, C, H + pt + pb, W + pl + pr))
    xp[:, :, pt:pt + H, pl:pl + W] = x
    P = (H + pt + pb - dh * (R - 1) - 1) // sh + 1
    Q = (W + pl + pr - dw * (S - 1) - 1) // sw + 1
    kg = K // groups
    out = np.zeros((N, K, P, Q))
    for g in range(groups):
        xg = xp[:, g * cg:(g + 1) * cg]
        wg = w[g * kg:(g + 1) * kg]
        for r in range(R):
            for s in range(S):
                win = xg[:, :, r * dh:r * dh + (P - 1) * sh + 1:sh,
                         s * dw:s * dw + (Q - 1) * sw + 1:sw]
                out[:, g * kg:(g + 1) * kg] += np.einsum("ncpq,kc->nkpq", win, wg[:, :, r, s])
    if bias is not None:
        b = np.asarray(bias, np.float64)
        out += np.abs(b)[:, None, None] if absolute else b[:, None, None]
    return out


def activated_ref(x, w, b, stride, pads, dil, groups, act):
    """(act(conv2d_ref), the bound's sum of |terms|): relu keeps the sum, gelu scales it by its
    Lipschitz constant 1.13."""
    ref = conv2d_ref(x, w, b, stride, pads, dil, groups)
    absref = conv2d_ref(x, w, b, stride, pads, dil, groups, absolute=True)
    if act == "relu":
        ref = np.maximum(ref, 0)
    elif act == "gelu":
        ref, absref = gelu_ref(ref), 1.13 * absref
    return ref, absref


def gelu_ref(z):
    erf = np.vectorize(math.erf)
    return 0.5 * z * (1.0 + erf(z / math.sqrt(2.0)))


def conv2d_backward_ref(go, x, w, stride, pads, dil, groups, absolute=False):
    """(grad_x, grad_w, grad_bias) of conv2d_ref for the output gradient go."""
    go = np.asarray(go, np.float64)
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    if absolute:
        go, x, w = np.abs(go), np.abs(x), np.abs(w)
    N, C, H, W = x.shape
    K, cg, R, S = w.shape
    (sh, sw), (dh, dw) = stride, dil
    pt, pb, pl, pr = pads
    P, Q = go.shape[2:]
    kg = K // groups
    xp = np.zeros((N, C, H + pt + pb, W + pl + pr))
    xp[:, :, pt:pt + H, pl:pl + W] = x
    gxp = np.zeros_like(xp)
    gw = np.zeros_like(w)
    for g in range(groups):
        cs, ks = slice(g * cg, (g + 1) * cg), slice(g * kg, (g + 1) * kg)
        for r in range(R):
            for s in range(S):
                sl = (slice(None), cs, slice(r * dh, r * dh + (P - 1) * sh + 1, sh),
                      slice(s * dw, s * dw + (Q - 1) * sw + 1, sw))
                gxp[sl] += np.einsum("nkpq,kc->ncpq", go[:, ks], w[ks, :, r, s])
                gw[ks, :, r, s] = np.einsum("nkpq,ncpq->kc", go[:, ks], xp[sl])
    return gxp[:, :, pt:pt + H, pl:pl + W], gw, go.sum(axis=(0, 2, 3))
