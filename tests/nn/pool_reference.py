"""Pooling references shared by the pooling tests: windows, the tap-by-tap forward, the
float64 backward by loops with torch's rules, special-value data and exact comparison."""
import numpy as np
from hypothesis import strategies as st


def windows(H, W, k, s, p):
    P = (H + 2 * p[0] - k[0]) // s[0] + 1
    Q = (W + 2 * p[1] - k[1]) // s[1] + 1
    for i in range(P):
        for j in range(Q):
            h0, w0 = i * s[0] - p[0], j * s[1] - p[1]
            yield i, j, [(h, w) for h in range(h0, h0 + k[0]) for w in range(w0, w0 + k[1])
                         if 0 <= h < H and 0 <= w < W]


@st.composite
def pool_case(draw):
    k = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    p = (draw(st.integers(0, k[0] // 2)), draw(st.integers(0, k[1] // 2)))
    H = draw(st.integers(max(1, k[0] - 2 * p[0]), 11))
    W = draw(st.integers(max(1, k[1] - 2 * p[1]), 12))
    return (draw(st.integers(1, 2)), draw(st.integers(1, 3)), H, W), k, s, p


def taps_ref(x, k, s, p, op):
    """The numpy tap-by-tap pooling the C kernels replaced (their exact semantics): max starts
    from the first tap (padding -inf) and takes a later tap when strictly greater or when it is
    NaN and the max is not; average sums the taps in (r, s) order from the first (padding +0.0)
    then multiplies by 1 / (kh * kw) rounded in the element type."""
    N, C, H, W = x.shape
    fill = -np.inf if op == "max" else 0.0
    xp = np.full((N, C, H + 2 * p[0], W + 2 * p[1]), fill, x.dtype)
    xp[:, :, p[0]:p[0] + H, p[1]:p[1] + W] = x
    P = (H + 2 * p[0] - k[0]) // s[0] + 1
    Q = (W + 2 * p[1] - k[1]) // s[1] + 1

    def tap(t):
        r, c = t // k[1], t % k[1]
        return xp[:, :, r:r + (P - 1) * s[0] + 1:s[0], c:c + (Q - 1) * s[1] + 1:s[1]]
    acc = tap(0).copy()
    with np.errstate(invalid="ignore"):
        for t in range(1, k[0] * k[1]):
            v = tap(t)
            if op == "max":
                np.copyto(acc, v, where=(v > acc) | (np.isnan(v) & ~np.isnan(acc)))
            else:
                acc += v
        if op == "avg":
            acc *= x.dtype.type(1.0) / x.dtype.type(k[0] * k[1])
    return acc


def with_special_values(rng, shape, dtype, cuts):
    """Standard normal values with special ones: cuts [(f, value), ...] with increasing f put
    `value` at the elements whose uniform draw lies between the previous f and this one."""
    x = rng.standard_normal(shape).astype(dtype)
    m = rng.random(shape)
    lo = 0.0
    for hi, value in cuts:
        x[(m >= lo) & (m < hi)] = value
        lo = hi
    return x


def same_values(a, b):
    """Equal element by element, NaN where NaN (payloads aside) and zeros of the same sign."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return bool(((np.isnan(a) & np.isnan(b)) | ((a == b) & (np.signbit(a) == np.signbit(b)))).all())


def backward_ref(g, x, k, s, p, op):
    """Pooling gradients by loops in float64 with torch's rules: average gives g / (kh * kw) to
    every element of the window inside the image; max gives g to the window's first element
    inside the image, replaced by each later one that is greater or NaN (so the last NaN)."""
    N, C, H, W = x.shape
    gx = np.zeros(x.shape)
    for i, j, cells in windows(H, W, k, s, p):
        for n in range(N):
            for c in range(C):
                gv = float(g[n, c, i, j])
                if op == "avg":
                    for h, w in cells:
                        gx[n, c, h, w] += gv / (k[0] * k[1])
                    continue
                at, best = None, None
                for h, w in cells:
                    v = float(x[n, c, h, w])
                    if at is None or v > best or np.isnan(v):
                        at, best = (h, w), v
                gx[n, c, at[0], at[1]] += gv
    return gx
