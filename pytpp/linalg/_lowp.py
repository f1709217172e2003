"""8-bit integer and bfloat16 products of pytpp.matmul / pytpp.brgemm on the low-precision
BRGEMM handles, and the VNNI layout they read B in."""
from __future__ import annotations

import math

import numpy as np

from pytpp import _validate
from pytpp._typing import Array, ArrayLike
from pytpp.tpp import _lowp
from pytpp._core import _runtime
from pytpp.tpp import _cache
from pytpp.tpp._gemm import brgemm as _brgemm


def _brgemm_handle(m, n, k, dtype, b_dtype=None, out_dtype=None, beta=0.0):
    """pytpp.tpp.brgemm's handle for these numpy dtypes, found in the handle cache under a key
    that costs no dtype checks (they took 20 of the 24 us of a small 8-bit pytpp.matmul)."""
    key = ("linalg-lowp", m, n, k, dtype, b_dtype, out_dtype, beta,
           _runtime.active_isa_index())
    h = _cache.lookup(key)
    if h is None:
        h = _cache.store(key, _brgemm(m, n, k, dtype=dtype, b_dtype=b_dtype,
                                      out_dtype=out_dtype, beta=beta))
    return h

INT8 = (np.dtype(np.int8), np.dtype(np.uint8))
I32 = np.dtype(np.int32)
# the largest |a| * |b| of two 8-bit values: int32 sums of fewer terms than 2**31 / this are exact
_MAX_PRODUCT = 128 * 255


def vnni_pack(b: ArrayLike) -> Array:
    """B in VNNI layout: (..., k, n) -> C-contiguous (..., ceil(k/v), n, v).

    Element ``(p, j)`` of each matrix moves to ``[p // v, j, p % v]``: the v consecutive k values a
    dot-product instruction reads together (``vdpbf16ps``: v = 2 for 16-bit types,
    ``vpdpbusd``: v = 4 for 8-bit types). k is zero-padded to a multiple of v. The handles of
    :func:`pytpp.tpp.brgemm` with ``b_vnni=True`` read this layout.

    Parameters
    ----------
    b : array_like, shape (..., k, n)
        Any dtype with 1- or 2-byte elements (int8, uint8, bfloat16, float16 ...).

    Returns
    -------
    ndarray, shape (..., ceil(k/v), n, v)

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> b = np.arange(6, dtype=np.int8).reshape(3, 2)
    >>> pytpp.linalg.vnni_pack(b)[0]
    array([[0, 2, 4, 0],
           [1, 3, 5, 0]], dtype=int8)
    """
    fn = "pytpp.linalg.vnni_pack"
    b = _validate.asarray(b)
    if b.ndim < 2:
        raise ValueError(f"{fn}: b must have at least 2 dimensions (..., k, n), got shape {b.shape}")
    if b.dtype.itemsize not in (1, 2) or b.dtype.kind not in "iufV":
        raise TypeError(f"{fn}: b has dtype {b.dtype}; expected an 8- or 16-bit type")
    v = 2 if b.dtype.itemsize == 2 else 4
    k, n = b.shape[-2:]
    kq = -(-k // v)
    padded = np.zeros(b.shape[:-2] + (kq * v, n), b.dtype)
    padded[..., :k, :] = b
    out = padded.reshape(b.shape[:-2] + (kq, v, n)).swapaxes(-1, -2)
    return np.ascontiguousarray(out)


def is_int8_pair(a, b) -> bool:
    return a.dtype in INT8 and b.dtype in INT8


def exact_in_int32(k_total: int) -> bool:
    return k_total * _MAX_PRODUCT < 2 ** 31


def sum_products_i32(a4, b4, lead_size, m, n, out=None) -> np.ndarray:
    """(L, m, n) int32: sum over blocks of a4[l, i] @ b4[l, i], a4 (L, nb, m, k) and
    b4 (L, nb, k, n) 8-bit of any strides; exact modulo 2**32. `out`: an int32 (L, m, n) array
    to write them into (else a new one)."""
    nb, k = a4.shape[1], a4.shape[3]
    if out is None:
        out = np.empty((lead_size, m, n), I32)
    h = _brgemm_handle(m, n, k, dtype=a4.dtype, b_dtype=b4.dtype, beta=0.0)
    for l in range(lead_size):
        h(a4[l], b4[l], out[l], nb)
    return out


def bf16_products(a4, b4, lead_size, m, n, out_dtype) -> np.ndarray:
    """(L, m, n) float32 (or bfloat16): the bf16 kernels' sums of a4[l, i] @ b4[l, i]."""
    nb, k = a4.shape[1], a4.shape[3]
    out = np.empty((lead_size, m, n), out_dtype)
    h = _brgemm_handle(m, n, k, dtype=_validate.BF16, out_dtype=out_dtype, beta=0.0)
    for l in range(lead_size):
        h(a4[l], b4[l], out[l], nb)
    return out


def int_result(s32, result, k_total, recompute):
    """The int32 sums as `result` (an integer dtype): narrower types wrap as numpy's arithmetic
    does (exact: wrapping commutes with sums and products); wider ones need sums that fit int32,
    else `recompute()` gives them exactly in int64."""
    if result.itemsize <= 4:
        return s32.astype(result, casting="unsafe", copy=False)
    if exact_in_int32(k_total):
        return s32.astype(result)
    return recompute().astype(result, casting="unsafe")


def as_4d(x, lead):
    if x.ndim == 3 and not lead:
        return x[np.newaxis]
    return np.broadcast_to(x, lead + x.shape[-3:]).reshape((math.prod(lead),) + x.shape[-3:])
