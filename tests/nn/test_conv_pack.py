"""The convolution weight pack (frame/conv_pack.c) against its layout written out in numpy, at
every ISA level, for each kind of view it is given: the forward weight, the backward by data's
flipped and channel-swapped view (stride 1: unit tap steps; strided: tap subsets), and views no
fast path takes (negative or odd strides). The pack only moves elements: results are exact."""
import numpy as np
import pytest

from pytpp._core import _conv


def packed_reference(w5, nr, bk):
    """[g][kb][j][r][s][c][col] = w5[g, kb*bk + j*nr + col, c, r, s], zero past K/groups."""
    G, kg, cg, R, S = w5.shape
    kgp = -(-kg // bk) * bk
    full = np.zeros((G, kgp, cg, R, S), w5.dtype)
    full[:, :kg] = w5
    # (G, panels, nr, cg, R, S) -> (G, panels, R, S, cg, nr)
    return full.reshape(G, kgp // nr, nr, cg, R, S).transpose(0, 1, 4, 5, 3, 2).ravel()


def pack(w5):
    G, kg, cg, R, S = w5.shape
    nr, bk = _conv.blocking(kg, w5.dtype == np.float64)
    out = np.full(_conv.packed_elems(G * kg, cg, R, S, G, nr, bk), np.nan, w5.dtype)
    _conv.pack_weight(w5, nr, bk, out)
    return out, nr, bk


def forward_view(rng, G, kg, cg, R, S, dtype):
    return rng.standard_normal((G, kg, cg, R, S)).astype(dtype)


def swapped_view(rng, G, kg, cg, R, S, dtype, step=1):
    """What conv2d_backward_data packs: w[g, k, c, r, s] read as (g, c, k, r', s'), the taps
    flipped and, at a stride, every step-th one."""
    w = rng.standard_normal((G, cg, kg, R, S)).astype(dtype)
    return w[:, :, :, ::-step][:, :, :, :, ::-step].transpose(0, 2, 1, 3, 4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("G, kg, cg, R, S", [
    (1, 64, 64, 3, 3), (1, 512, 32, 3, 3), (1, 17, 7, 3, 3), (1, 33, 5, 1, 1), (2, 24, 9, 3, 1),
    (1, 1, 1, 1, 1), (1, 7, 3, 7, 7), (1, 100, 70, 1, 3), (3, 16, 16, 2, 2)])
@pytest.mark.parametrize("view", ["forward", "swapped", "swapped-step2", "negative-k", "odd"])
def test_pack_matches_layout(isa, rng, dtype, G, kg, cg, R, S, view):
    if view == "forward":
        w5 = forward_view(rng, G, kg, cg, R, S, dtype)
    elif view == "swapped":
        w5 = swapped_view(rng, G, kg, cg, R, S, dtype)
    elif view == "swapped-step2":
        w5 = swapped_view(rng, G, kg, cg, 2 * R - 1, 2 * S - 1, dtype, step=2)
    elif view == "negative-k":
        w5 = forward_view(rng, G, kg, cg, R, S, dtype)[:, ::-1]
    else:   # every axis strided: no fast path applies
        w5 = forward_view(rng, G, 2 * kg, 2 * cg, R, 2 * S, dtype)[:, ::2, ::2, :, ::2]
    out, nr, bk = pack(w5)
    np.testing.assert_array_equal(out, packed_reference(w5, nr, bk))


def test_pack_depthwise(isa, rng):
    w = rng.standard_normal((12, 1, 3, 3)).astype(np.float32)
    w5 = w.reshape(12, 1, 1, 3, 3)
    out, _, _ = pack(w5)
    np.testing.assert_array_equal(out, w[:, 0].transpose(1, 2, 0).ravel())


def test_pack_threads(threads, rng):
    """Weights of a million elements and more pack on every thread: the same layout."""
    w5 = forward_view(rng, 1, 256, 256, 4, 4, np.float32)
    out, nr, bk = pack(w5)
    np.testing.assert_array_equal(out, packed_reference(w5, nr, bk))
    sw = swapped_view(rng, 1, 256, 256, 4, 4, np.float32)
    out, nr, bk = pack(sw)
    np.testing.assert_array_equal(out, packed_reference(sw, nr, bk))
