"""Stacks of small matrix products: strided stacks (the path ``pytpp.matmul`` takes for 3-D
operands) and DBCSR-style indexed stacks (``pytpp.linalg.matmul_stack``)."""
from __future__ import annotations

import operator

import numpy as np

from pytpp import _validate
from pytpp._core import _smallgemm
from pytpp._typing import Array, ArrayLike


_BFN = "pytpp.linalg.batched_matmul"


def batched_matmul(a: ArrayLike, b: ArrayLike, out: Array) -> Array:
    """``out[l] = a[l] @ b[l]`` for every l of a 3-D stack: the small-GEMM stack engine.

    Nothing is packed, the kernel is planned once per call (not per matrix) and the stack is
    split over ``pytpp.get_num_threads()`` threads. Any strides work, including stride-0
    broadcasts, transposed and negative-stride views.

    Parameters
    ----------
    a : array_like, shape (L, m, k) or (1, m, k)
        The left matrices; a single one is used for every l.
    b : array_like, shape (L, k, n) or (1, k, n)
        The right matrices; likewise.
    out : ndarray, shape (L, m, n)
        Written in place: float64 or float32, which is also the compute dtype (operands of
        another float dtype are converted). It may overlap `a` or `b` (they are copied first).

    Returns
    -------
    ndarray
        `out`.

    Raises
    ------
    TypeError
        For an `out` that is not a float64/float32 ndarray or non-float operands.
    ValueError
        For operands that are not 3-D, a batch size other than L or 1, or core dimensions that
        do not match (m, k, n).

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> a = np.arange(8.0).reshape(2, 2, 2); b = np.ones((1, 2, 3)); out = np.empty((2, 2, 3))
    >>> pytpp.linalg.batched_matmul(a, b, out)[1]
    array([[ 9.,  9.,  9.],
           [13., 13., 13.]])
    """
    if not isinstance(out, np.ndarray):
        raise TypeError(f"{_BFN}: out must be a numpy.ndarray, got {type(out).__name__}")
    if out.dtype.newbyteorder("=") not in _validate.FLOAT_TYPES:
        raise TypeError(f"{_BFN}: out has dtype {out.dtype}; expected float64 or float32")
    a = _validate.contraction_operand(a, "a", _BFN)
    b = _validate.contraction_operand(b, "b", _BFN)
    for name, x, dims in (("a", a, "(L, m, k)"), ("b", b, "(L, k, n)"), ("out", out, "(L, m, n)")):
        if x.ndim != 3:
            raise ValueError(f"{_BFN}: {name} must be 3-D {dims}, got shape {x.shape}")
    count, m, n = out.shape
    for name, x in (("a", a), ("b", b)):
        if x.shape[0] not in (count, 1):
            raise ValueError(f"{_BFN}: {name} has {x.shape[0]} matrices; expected {count} (as "
                             f"out) or 1")
    if a.shape[1] != m or b.shape[2] != n or a.shape[2] != b.shape[1]:
        raise ValueError(f"{_BFN}: a's matrices are {a.shape[1]}x{a.shape[2]} and b's are "
                         f"{b.shape[1]}x{b.shape[2]}; out's are {m}x{n}: expected (m, k) @ (k, n)"
                         f" -> (m, n)")
    if not out.flags.writeable:
        raise ValueError(f"{_BFN}: out is read-only")
    if out.size == 0:
        return out
    if a.shape[2] == 0:
        out[...] = 0
        return out
    a, b = _validate.unalias(out, (a, b), allow_same=False)
    if out.dtype.isnative:
        return _stack_matmul(a, b, out)
    work = np.empty(out.shape, out.dtype.newbyteorder("="))
    _stack_matmul(a, b, work)
    out[...] = work
    return out


def _stack_matmul(a, b, out):
    """batched_matmul without the checks: the caller (``pytpp.matmul``) has checked that `a` is
    (L|1, m, k), `b` is (L|1, k, n) and `out` a writable native float64/float32 (L, m, n) array
    that does not overlap them."""
    return _smallgemm.stack_matmul(a, b, out)


_FN = "pytpp.linalg.matmul_stack"


def _index_array(x, name, count, bound):
    """`x` as a contiguous int64 array of `count` entries in [0, bound)."""
    arr = _validate.asarray(x)
    if arr.ndim == 1 and arr.size == 0 and arr.dtype.kind == "f":  # [] is float64 to numpy
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu" or arr.ndim != 1:
        raise TypeError(f"{_FN}: {name} must be a 1-D array of integers, got "
                        f"{arr.ndim}-D {arr.dtype}")
    if count is not None and arr.shape[0] != count:
        raise ValueError(f"{_FN}: {name} has {arr.shape[0]} entries; expected {count} "
                         f"(as many as a_index)")
    if arr.size:
        lo, hi = arr.min(), arr.max()
        if lo < 0 or hi >= bound:
            bad = int(np.flatnonzero((arr < 0) | (arr >= bound))[0])
            raise ValueError(f"{_FN}: {name}[{bad}] = {int(arr[bad])} is out of range [0, {bound})")
    return np.ascontiguousarray(arr, dtype=np.int64)


def matmul_stack(a: ArrayLike, b: ArrayLike, c: Array, a_index: ArrayLike, b_index: ArrayLike,
                 c_index: ArrayLike, *, alpha: float = 1.0) -> Array:
    """DBCSR-style stack of small products: ``c[c_index[i]] += alpha * a[a_index[i]] @ b[b_index[i]]``.

    The products of one stack all have the same shape, as the blocks of CP2K's block-sparse
    matrices do. They are grouped by `c_index` (a counting sort); each group is reduced in
    registers and written once, and every block of `c` belongs to one thread, so repeated
    `c_index` entries give the right sum under any number of threads.

    Parameters
    ----------
    a : array_like, shape (na, m, k)
        The A blocks. Any strides (transposed block views cost nothing).
    b : array_like, shape (nb, k, n)
        The B blocks.
    c : ndarray, shape (nc, m, n)
        The C blocks, updated in place (writable). The products are computed in numpy's
        promoted type of a, b and c and cast into c (same_kind). `c` may overlap `a` or `b`
        (they are copied first).
    a_index, b_index, c_index : array_like of int, shape (count,)
        Which blocks each product takes, 0-based; all checked to be in range before any
        arithmetic starts.
    alpha : float
        Scale of every product.

    Returns
    -------
    ndarray
        `c`.

    Raises
    ------
    TypeError
        For a non-float dtype, a `c` that is not an ndarray or cannot hold the product's type,
        or non-integer indices.
    ValueError
        For mismatched block shapes, index arrays of different lengths or out of range, or a
        read-only `c`.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> a = np.arange(8.0).reshape(2, 2, 2); b = np.ones((1, 2, 2)); c = np.zeros((2, 2, 2))
    >>> pytpp.linalg.matmul_stack(a, b, c, [0, 1, 1], [0, 0, 0], [0, 0, 1], alpha=0.5)
    array([[[5. , 5. ],
            [9. , 9. ]],
    <BLANKLINE>
           [[4.5, 4.5],
            [6.5, 6.5]]])
    """
    if not isinstance(c, np.ndarray):
        raise TypeError(f"{_FN}: c must be a numpy.ndarray (it is updated in place), got "
                        f"{type(c).__name__}")
    if c.dtype.kind != "f" and c.dtype != _validate.BF16:
        raise TypeError(f"{_FN}: c has dtype {c.dtype}; expected a float dtype (float64, float32, "
                        f"bfloat16, float16)")
    a = _validate.contraction_operand(a, "a", _FN)
    b = _validate.contraction_operand(b, "b", _FN)
    for name, x, dims in (("a", a, "(na, m, k)"), ("b", b, "(nb, k, n)"), ("c", c, "(nc, m, n)")):
        if x.ndim != 3:
            raise ValueError(f"{_FN}: {name} must be a 3-D stack of blocks {dims}, got shape {x.shape}")
    m, k = a.shape[1:]
    if b.shape[1] != k:
        raise ValueError(f"{_FN}: a's blocks are {m}x{k} but b's are {b.shape[1]}x{b.shape[2]}; "
                         f"k must match (a axis 2, b axis 1)")
    n = b.shape[2]
    if c.shape[1:] != (m, n):
        raise ValueError(f"{_FN}: c's blocks are {c.shape[1]}x{c.shape[2]}; expected {m}x{n}")
    if not c.flags.writeable:
        raise ValueError(f"{_FN}: c is read-only")
    try:
        alpha = float(operator.index(alpha) if isinstance(alpha, (int, np.integer)) else alpha)
    except (TypeError, ValueError):
        raise TypeError(f"{_FN}: alpha must be a real number, got {alpha!r}") from None
    ia = _index_array(a_index, "a_index", None, a.shape[0])
    count = ia.shape[0]
    ib = _index_array(b_index, "b_index", count, b.shape[0])
    ic = _index_array(c_index, "c_index", count, c.shape[0])
    # c += alpha * a @ b in numpy's promoted type (float64 products are not rounded to a float32
    # c before they are summed), cast back into c
    dtype = _validate.engine_dtype(_validate.promote(a.dtype, b.dtype, c.dtype))
    if dtype == _validate.BF16:
        dtype = _validate.F32
    if not _validate.can_write(dtype, c.dtype):
        raise TypeError(f"{_FN}: c has dtype {c.dtype}; a {dtype} product cannot be added into "
                        f"it (same_kind casting)")
    if count == 0 or c.size == 0 or k == 0:
        return c
    a, b = _validate.unalias(c, (a, b), allow_same=False)
    a = _validate.kernel_operand(a, dtype)
    b = _validate.kernel_operand(b, dtype)
    direct = c.dtype == dtype and _validate.element_strides_ok(c)
    work = c if direct else np.ascontiguousarray(c, dtype=dtype)
    if not _smallgemm.indexed_matmul(a, b, work, ia, ib, ic, alpha):
        # B or C lacks a unit stride the kernels need: contiguous copies, once per call
        b = np.ascontiguousarray(b)
        if work.strides[2] != work.itemsize:
            work = np.ascontiguousarray(work)
        _smallgemm.indexed_matmul(a, b, work, ia, ib, ic, alpha)
    if work is not c:
        np.copyto(c, work, casting="unsafe")
    return c
