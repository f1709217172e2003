"""pytpp.brgemm: batch-reduce GEMM on numpy arrays of any strides."""
from __future__ import annotations

import math

import numpy as np

from pytpp import _validate
from pytpp._core import _brgemm, _runtime
from pytpp._typing import Array, ArrayLike, DTypeLike
from pytpp.linalg import _lowp as _lp

_FN = "pytpp.brgemm"


def brgemm(a: ArrayLike, b: ArrayLike, c: ArrayLike | None = None, /, *, beta: float = 1.0,
           out: Array | None = None, dtype: DTypeLike = None) -> Array:
    """Batch-reduce matrix product: ``beta * c + sum_i a[..., i, :, :] @ b[..., i, :, :]``.

    Parameters
    ----------
    a : array_like, shape (..., nb, m, k)
        The A_i blocks. Any strides, including transposed and negative ones: no copy.
    b : array_like, shape (..., nb, k, n)
        The B_i blocks. Leading dimensions (``...``) broadcast against `a`'s; each leading index
        is an independent batch-reduce, run in parallel.
    c : array_like, shape (..., m, n), optional
        Initial C, scaled by `beta`. Without it, C starts at zero.
    beta : float
        Scale of `c`. Ignored when `c` is None.
    out : ndarray, optional
        Where to write the result; may be `c` itself (in-place accumulation). It must have the
        result's shape and a dtype the result casts to (same_kind); it may overlap `a` or `b`
        (they are copied first, as numpy would).
    dtype : dtype, optional
        Result dtype. int8/uint8 blocks sum exactly in int32 (wrapping modulo 2**32); without
        `dtype`, `out` or an integer `c` the result has numpy's integer type of a and b
        (uint8 with int8: int16), wrapped as numpy's arithmetic wraps. bfloat16 x bfloat16 runs
        the bf16 kernels (float32 accumulation, float32 result; ``dtype=ml_dtypes.bfloat16``
        rounds it to nearest even).

    Returns
    -------
    ndarray, shape (..., m, n)
        numpy's result type of a, b (and c): float64 if any is float64, float16 for float16
        inputs (computed in float32), else float32 (bfloat16 inputs compute in float32);
        integer types for 8-bit integer blocks (above).

    Raises
    ------
    TypeError
        For a non-float dtype, or an `out` the result cannot be cast to.
    ValueError
        For mismatched shapes, fewer than 3 dimensions, or a read-only `out`.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> a = np.arange(8.0).reshape(2, 2, 2); b = np.ones((2, 2, 3))
    >>> pytpp.brgemm(a, b)
    array([[10., 10., 10.],
           [18., 18., 18.]])
    >>> c = np.ones((2, 3)); _ = pytpp.brgemm(a, b, c, beta=2.0, out=c); c
    array([[12., 12., 12.],
           [20., 20., 20.]])
    """
    isa = _runtime.active_isa_index()
    if dtype is None:
        fast = _brgemm.brgemm_fast(a, b, c, beta, out, isa)
        if fast is not None:
            return fast
    a = _lowp_operand(a, "a")
    b = _lowp_operand(b, "b")
    if a.ndim < 3:
        raise ValueError(f"{_FN}: a must have at least 3 dimensions (..., nb, m, k), got shape {a.shape}")
    if b.ndim < 3:
        raise ValueError(f"{_FN}: b must have at least 3 dimensions (..., nb, k, n), got shape {b.shape}")
    nb, m, k = a.shape[-3:]
    if b.shape[-3] != nb:
        raise ValueError(f"{_FN}: a has {nb} blocks but b has {b.shape[-3]} (axis -3)")
    if b.shape[-2] != k:
        raise ValueError(f"{_FN}: a's blocks are {m}x{k} but b's are {b.shape[-2]}x{b.shape[-1]}; "
                         f"k must match (a axis -1, b axis -2)")
    n = b.shape[-1]
    try:
        lead = np.broadcast_shapes(a.shape[:-3], b.shape[:-3])
    except ValueError:
        raise ValueError(f"{_FN}: leading dimensions {a.shape[:-3]} and {b.shape[:-3]} do not "
                         f"broadcast") from None
    shape = lead + (m, n)
    try:
        beta = float(beta)
    except (TypeError, ValueError):
        raise TypeError(f"{_FN}: beta must be a real number, got {beta!r}") from None
    dtypes = [a.dtype, b.dtype]
    if c is not None:
        c = np.asarray(c) if _lp.is_int8_pair(a, b) else _validate.contraction_operand(c, "c", _FN)
        try:
            ok = np.broadcast_shapes(c.shape, shape) == shape
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"{_FN}: c has shape {c.shape}; expected one that broadcasts to {shape}")
        dtypes.append(c.dtype)
    low = _low_precision(a, b, c, beta, out, dtype, lead, nb, m, k, n, shape)
    if low is not None:
        return low
    # numpy's promotion of beta * c + a @ b; bfloat16 and float16 compute in float32
    result = _validate.promote(*dtypes)
    if dtype is not None:
        result = _validate.dtype_arg(dtype, (_validate.F64, _validate.F32, _validate.BF16,
                                             np.dtype(np.float16)), _FN)
    if result == _validate.BF16:
        result = _validate.F32
    compute = _validate.F64 if result == _validate.F64 else _validate.F32
    if out is not None:
        _validate.check_out(out, shape, result, _FN)
        a, b = _validate.unalias(out, (a, b), allow_same=False)
    else:
        out = np.empty(shape, result)
    if out.size == 0:
        return out

    a4 = _as_4d(_validate.kernel_operand(a, compute), lead)
    b4 = _as_4d(_validate.kernel_operand(b, compute), lead)
    work3 = None
    if (out.dtype == compute and out.strides[-1] == out.itemsize
            and _validate.element_strides_ok(out)):
        try:
            work3 = out.reshape((math.prod(lead), m, n), copy=False)
        except ValueError:  # leading dims that do not merge into one stride
            work3 = None
    work = out if work3 is not None else np.empty(shape, compute)
    if c is None:
        beta = 0.0
    elif c is not work and beta != 0.0:
        np.copyto(work, c, casting="same_kind")
    if work3 is None:
        work3 = work.reshape((math.prod(lead), m, n))
    _brgemm.brgemm_strided(a4, b4, work3, 1.0, beta, isa)
    if work is not out:
        np.copyto(out, work, casting="same_kind")
    return out


def _lowp_operand(x, name):
    x = _validate.asarray(x)
    if _lp.is_int8_pair(x, x):
        return x
    return _validate.contraction_operand(x, name, _FN)


def _low_precision(a, b, c, beta, out, dtype, lead, nb, m, k, n, shape):
    """8-bit integer or bf16 x bf16 blocks on the low-precision kernels; None for the float
    path."""
    if _lp.is_int8_pair(a, b):
        if dtype is not None:
            want = np.dtype(dtype)
        elif out is not None:
            want = out.dtype
        else:
            want = np.result_type(a, b) if c is None else np.result_type(a, b, c)
        if want.kind not in "iu":
            raise TypeError(f"{_FN}: int8/uint8 blocks give an integer result; {want} was asked "
                            f"for (convert the blocks to a float type first)")
        if c is not None and c.dtype.kind not in "iub":
            raise TypeError(f"{_FN}: c has dtype {c.dtype}; 8-bit integer blocks take an integer c")
        if beta != int(beta):
            raise ValueError(f"{_FN}: beta must be an integer for integer blocks, got {beta}")
        if out is not None:
            _validate.check_out(out, shape, want, _FN)
        L = math.prod(lead)
        s32 = _lp.sum_products_i32(_as_4d(a, lead), _as_4d(b, lead), L, m, n).reshape(shape)

        def exact():
            return np.einsum("...ipk,...ikq->...pq", a.astype(np.int64), b.astype(np.int64))
        res = _lp.int_result(s32, want, nb * k, exact)
        if c is not None and beta:
            res = (res + np.asarray(c).astype(want, casting="unsafe") * want.type(int(beta))
                   ).astype(want, casting="unsafe")
        if out is None:
            return res
        np.copyto(out, res, casting="same_kind")
        return out
    both_bf16 = a.dtype == _validate.BF16 and b.dtype == _validate.BF16
    if not both_bf16 or (c is not None and beta != 0.0):
        return None
    want = _validate.F32 if dtype is None else np.dtype(dtype)
    if out is not None and dtype is None:
        want = out.dtype if out.dtype in (_validate.F32, _validate.BF16) else _validate.F32
    if want not in (_validate.F32, _validate.BF16):
        return None
    if out is not None:
        _validate.check_out(out, shape, want, _FN)
    L = math.prod(lead)
    res = _lp.bf16_products(_as_4d(a, lead), _as_4d(b, lead), L, m, n, want).reshape(shape)
    if out is None:
        return res
    np.copyto(out, res, casting="same_kind")
    return out


def _as_4d(x, lead):
    """(L, nb, rows, cols) view of x broadcast to leading shape `lead` (a copy only when the
    leading dimensions cannot be merged into one stride)."""
    if x.ndim == 3 and not lead:
        return x[np.newaxis]
    return np.broadcast_to(x, lead + x.shape[-3:]).reshape((math.prod(lead),) + x.shape[-3:])
