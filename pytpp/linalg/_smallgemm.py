"""Stacks of small matrix products: strided stacks (the path ``pytpp.matmul`` takes for 3-D
operands) and DBCSR-style indexed stacks (``pytpp.linalg.matmul_stack``)."""
import operator

import numpy as np

from pytpp import _validate
from pytpp._core import _smallgemm


def batched_matmul(a, b, out):
    """``out[l] = a[l] @ b[l]`` for every l, on a 3-D stack; the engine of ``pytpp.matmul`` stacks.

    No validation beyond what the kernels need: the caller (``pytpp.matmul``) has checked that
    `a` is (L, m, k) or (1, m, k), `b` is (L, k, n) or (1, k, n) and `out` is a writable
    (L, m, n) float64/float32 array that does not overlap them. Any strides work, including
    stride-0 broadcasts, transposed and negative-stride views: nothing is packed, the kernel is
    planned once per call (not per matrix), and the stack is split over
    ``pytpp.get_num_threads()`` threads. Operands of another float dtype are converted to
    ``out.dtype``.

    Returns
    -------
    ndarray
        `out`.

    Examples
    --------
    >>> import numpy as np
    >>> from pytpp.linalg._smallgemm import batched_matmul
    >>> a = np.arange(8.0).reshape(2, 2, 2); b = np.ones((1, 2, 3)); out = np.empty((2, 2, 3))
    >>> batched_matmul(a, np.broadcast_to(b, (2, 2, 3)), out)[1]
    array([[ 9.,  9.,  9.],
           [13., 13., 13.]])
    """
    return _smallgemm.stack_matmul(a, b, out)


_FN = "pytpp.linalg.matmul_stack"


def _index_array(x, name, count, bound):
    """`x` as a contiguous int64 array of `count` entries in [0, bound)."""
    arr = np.asarray(x)
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


def matmul_stack(a, b, c, a_index, b_index, c_index, *, alpha=1.0):
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
        The C blocks, updated in place. Must be writable and must not overlap `a` or `b`.
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
        For a dtype other than float64/float32, a `c` that is not an ndarray, or non-integer
        indices.
    ValueError
        For mismatched block shapes, index arrays of different lengths or out of range, a
        read-only `c` or one that overlaps `a` or `b`.

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
    c = _validate.as_float_array(c, "c", _FN)
    a = _validate.as_float_array(a, "a", _FN)
    b = _validate.as_float_array(b, "b", _FN)
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
    if c.size and (np.may_share_memory(c, a) or np.may_share_memory(c, b)):
        raise ValueError(f"{_FN}: c overlaps a or b; the output must not alias an input")
    if count == 0 or c.size == 0 or k == 0:
        return c

    dtype = c.dtype
    a = _kernel_operand(a, dtype)
    b = _kernel_operand(b, dtype)
    work = c if _validate.element_strides_ok(c) else np.ascontiguousarray(c)
    if not _smallgemm.indexed_matmul(a, b, work, ia, ib, ic, alpha):
        # B or C lacks a unit stride the kernels need: contiguous copies, once per call
        b = np.ascontiguousarray(b)
        if work.strides[2] != work.itemsize:
            work = np.ascontiguousarray(work)
        _smallgemm.indexed_matmul(a, b, work, ia, ib, ic, alpha)
    if work is not c:
        c[...] = work
    return c


def _kernel_operand(x, dtype):
    if x.dtype != dtype:
        return x.astype(dtype)
    if not _validate.element_strides_ok(x):
        return np.ascontiguousarray(x)
    return x
