"""Exact 8-bit matrix products with zero points: the int32 kernels, zero points folded in by
row- and column-sum compensation (the operands are never widened)."""
from __future__ import annotations

import numpy as np

from pytpp import _validate

from pytpp._core import _runtime
from pytpp._typing import Array, ArrayLike
from pytpp.tpp import _lowp
from pytpp.tpp._lowp import product_8bit as _product

_FN = "pytpp.quant.matmul_int8"
_Q = (np.dtype(np.uint8), np.dtype(np.int8))
I32 = np.dtype(np.int32)
_RANGE = {np.dtype(np.uint8): (0, 255), np.dtype(np.int8): (-128, 127)}


def _operand(x, name):
    if not isinstance(x, np.ndarray):
        x = _validate.asarray(x)
    if x.dtype not in _Q:
        raise TypeError(f"{_FN}: {name} has dtype {x.dtype}; expected uint8 or int8")
    if x.ndim != 2:
        raise ValueError(f"{_FN}: {name} must be 2-D, got shape {x.shape}")
    return x


def _zero_point(zp, dt, length, name):
    """A zero point as int64: a scalar, or 1-D of `length` (per row of a / column of b)."""
    lo, hi = _RANGE[dt]
    if type(zp) is int or (isinstance(zp, np.integer) and not isinstance(zp, np.bool_)):
        if not lo <= zp <= hi:     # the common case, without array passes
            raise ValueError(f"{_FN}: {name} must lie in [{lo}, {hi}] for {dt}")
        return np.int64(zp)
    z = np.asarray(zp)
    if z.dtype.kind not in "iu" or z.dtype == bool:
        raise TypeError(f"{_FN}: {name} must be an integer (or 1-D integers), got {zp!r}")
    if np.any(z < lo) or np.any(z > hi):
        raise ValueError(f"{_FN}: {name} must lie in [{lo}, {hi}] for {dt}")
    if z.ndim > 1 or (z.ndim == 1 and z.shape[0] != length):
        raise ValueError(f"{_FN}: {name} has shape {z.shape}; expected a scalar or ({length},)")
    return z.astype(np.int64)


def _colsums(b):
    """b's column sums by the 8-bit small-m kernel on a row of ones (one pass over b, 2.5x
    numpy's int16 slab sums at 768 x 3072), as int64 values of the int32 sums modulo 2**32: all
    that the int32 result needs."""
    k, n = b.shape
    sums = np.empty((1, n), I32)
    _product(np.ones((1, k), np.uint8), b, sums, None, False)
    return sums[0].astype(np.int64)


def _nonzero(z):
    return bool(z) if z.ndim == 0 else bool(z.any())


def _sums(x, axis):
    """Sums of an 8-bit array along `axis` (int64), in int16 partial sums over slabs short
    enough not to overflow (256 int8 or 128 uint8 values): 4x faster than numpy's int64 sum."""
    step = 256 if x.dtype == np.int8 else 128
    n = x.shape[axis]
    total = np.zeros(x.shape[1 - axis], np.int64)
    for i in range(0, n, step):
        part = x[i:i + step] if axis == 0 else x[:, i:i + step]
        total += part.sum(axis=axis, dtype=np.int16)
    return total


def matmul_int8(a: ArrayLike, b: ArrayLike, *, a_zero_point: ArrayLike = 0,
                b_zero_point: ArrayLike = 0, out: Array | None = None) -> Array:
    """``(a - a_zero_point) @ (b - b_zero_point)`` in int32, exact (modulo 2**32).

    a @ b runs on the 8-bit kernels; the zero points enter as column sums of b (added in the
    kernel's pass over C), row sums of a and ``k * a_zp * b_zp``: an asymmetric product costs
    one epilogue add, never a widened copy of an operand.

    Parameters
    ----------
    a : (m, k) uint8 or int8 array, any strides
    b : (k, n) uint8 or int8 array, any strides
    a_zero_point : int or (m,) ints
        Per tensor, or per row of `a`; in a's type's range.
    b_zero_point : int or (n,) ints
        Per tensor, or per column of `b`.
    out : (m, n) int32 array, optional
        Filled and returned.

    Returns
    -------
    (m, n) int32 array

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> a = np.array([[130, 128]], np.uint8); b = np.array([[1], [-2]], np.int8)
    >>> pytpp.quant.matmul_int8(a, b, a_zero_point=128)
    array([[2]], dtype=int32)
    """
    a, b = _operand(a, "a"), _operand(b, "b")
    m, k = a.shape
    if b.shape[0] != k:
        raise ValueError(f"{_FN}: a is {a.shape} but b is {b.shape}: k must match")
    n = b.shape[1]
    za = _zero_point(a_zero_point, a.dtype, m, "a_zero_point")
    zb = _zero_point(b_zero_point, b.dtype, n, "b_zero_point")
    if out is not None:
        if not isinstance(out, np.ndarray) or out.dtype != I32 or out.shape != (m, n):
            raise ValueError(f"{_FN}: out must be an int32 array of shape {(m, n)}")
        if not out.flags.writeable:
            raise ValueError(f"{_FN}: out is read-only")
    target = out if out is not None else np.empty((m, n), I32)
    # uint8 A within [0, 127] (data quantized with a reduced range) runs the 7-bit kernels
    a7 = (a.dtype == np.uint8 and b.dtype == np.int8 and a.size > 0
          and _runtime.get_isa() == "avx2" and _lowp.SEVEN_BIT_PAYS and int(a.max()) <= 127)
    colsum = None
    if 0 < m <= 3 and n and _nonzero(za):
        # few rows: b's column sums come from the same single pass over b (the small-m kernels
        # read b once for up to 4 rows), as the product of one more row of ones
        a1 = np.empty((m + 1, k), a.dtype)
        a1[:m] = a
        a1[m] = 1
        full = np.empty((m + 1, n), I32)
        _product(a1, b, full, None, a7)
        target[...] = full[:m]
        colsum = full[m].astype(np.int64)     # modulo 2**32, all that the int32 result needs
        if za.ndim == 0:
            with np.errstate(over="ignore"):
                target += (-(za * colsum) + k * za * zb).astype(I32)
    elif za.ndim == 0 and za != 0 and m > 4:
        # a per-tensor zero point of a, rows enough for the packed kernels: -za * colsum(b),
        # the column sums taken from b's panels as they are packed, + k * za * zb per column
        with np.errstate(over="ignore"):
            const = np.ascontiguousarray(np.broadcast_to((k * za * zb).astype(I32), (n,)))
        _product(a, b, target, const if const.any() else None, a7, colsum_scale=-int(za))
    else:
        comp = None
        if za.ndim == 0 and (za != 0 or zb.ndim == 0 and zb != 0):
            # a per-tensor zero point of a: -za * colsum(b) + k * za * zb, one value per column
            colsum = _colsums(b)
            with np.errstate(over="ignore"):
                comp = (-(za * colsum) + k * za * zb).astype(I32)
            comp = np.ascontiguousarray(np.broadcast_to(comp, (n,)))
        _product(a, b, target, comp, a7)
    if za.ndim == 0 and not _nonzero(zb):
        return target
    with np.errstate(over="ignore"):
        if za.ndim == 1:
            if colsum is None:
                colsum = _colsums(b)
            target -= np.multiply.outer(za, colsum - k * zb).astype(I32)
        if _nonzero(zb):
            rowsum = _sums(a, 1)
            target -= np.multiply.outer(rowsum, zb).astype(I32) if zb.ndim else \
                (rowsum * int(zb)).astype(I32)[:, None]
    return target
