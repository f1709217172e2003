"""Embedding bags and embeddings: a gather-reduce over the rows of a table, its backward, and the
plain gather.

``embedding_bag`` runs one kernel per call (embedding.h): per bag, the rows
``weight[indices[k]]`` are accumulated in vector registers (bfloat16 tables widened on load,
the result rounded once), the rows a few positions ahead prefetched; no gathered copy is made.
``embedding_bag_backward`` groups the index positions by table row (a counting sort per thread
over the rows it owns) and writes every gradient row once, so duplicate indices accumulate
without races and the result does not depend on the thread count. Every argument is checked
here, before any kernel runs."""
import math
from typing import Literal, overload

import numpy as np

from pytpp import _validate
from pytpp._core import _embedding
from pytpp._typing import Array, ArrayLike

__all__ = ["embedding_bag", "embedding_bag_backward", "embedding"]

Mode = Literal["sum", "mean", "max"]
I32 = np.dtype(np.int32)
I64 = np.dtype(np.int64)
# max mode keeps each column's winning position in the bag as a float of the compute dtype
_MAX_BAG_F32 = 1 << 24


def _check_table(w, fn):
    """A table's dtype and rank (no copy)."""
    if w.dtype.kind in "biu":
        raise TypeError(f"{fn}: weight has dtype {w.dtype}; expected float32, bfloat16 or "
                        f"float64 (float16 is computed as float32)")
    if w.ndim != 2:
        raise ValueError(f"{fn}: weight must be 2-D (num_embeddings, embedding_dim), got shape "
                         f"{w.shape}")
    return w


def _table(w, fn):
    """The checked table w as the kernels read it: float64, float32 or bfloat16 with unit column
    stride (float16 is computed as float32: a converted copy)."""
    _check_table(w, fn)
    if w.dtype == _validate.F16:
        w = w.astype(_validate.F32)
    if (w.shape[1] > 1 and w.strides[1] != w.itemsize) or w.strides[0] % w.itemsize:
        w = np.ascontiguousarray(w)
    return w


def _compute_dtype(dtype):
    return _validate.F64 if dtype == _validate.F64 else _validate.F32


def _integers(x, name, fn):
    """x as an integer ndarray (an empty list too); TypeError for anything else."""
    try:
        arr = _validate.asarray(x)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{fn}: {name} must be array_like, got {type(x).__name__} ({e})") from None
    if arr.size == 0 and arr.dtype.kind == "f":    # [] is float64 to numpy
        arr = arr.astype(I64)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{fn}: {name} has dtype {arr.dtype}; expected an integer dtype "
                        f"(int32 or int64)")
    return arr


def _indices(indices, fn, rows):
    """indices as an int32 or int64 array of its shape, every value in [0, rows)."""
    idx = _integers(indices, "indices", fn)
    if idx.size:
        bad = np.flatnonzero((idx < 0) | (idx >= rows)) if (idx.min() < 0
                                                            or idx.max() >= rows) else ()
        if len(bad):
            where = np.unravel_index(bad[0], idx.shape)
            pos = int(where[0]) if idx.ndim == 1 else tuple(int(i) for i in where)
            raise ValueError(f"{fn}: indices[{pos}] = {idx.flat[bad[0]]} is out of range "
                             f"[0, {rows}) (weight has {rows} rows)")
    if idx.dtype not in (I32, I64) or not idx.dtype.isnative:
        idx = idx.astype(I64)
    return idx


def _offsets(offsets, fn, nidx):
    """offsets as a contiguous int64 array: 1-D, non-decreasing from 0, at most nidx."""
    off = _integers(offsets, "offsets", fn)
    if off.ndim != 1:
        raise ValueError(f"{fn}: offsets must be 1-D, got shape {off.shape}")
    if off.size:
        if off[0] != 0:
            raise ValueError(f"{fn}: offsets[0] must be 0 (bag 0 starts at position 0, as "
                             f"torch requires), got {off[0]}")
        down = np.flatnonzero(off[1:] < off[:-1])
        if len(down):
            i = down[0] + 1
            raise ValueError(f"{fn}: offsets must be non-decreasing, but offsets[{i}] = "
                             f"{off[i]} < offsets[{i - 1}] = {off[i - 1]}")
        if off[-1] > nidx:
            raise ValueError(f"{fn}: offsets[-1] = {off[-1]} is beyond len(indices) = {nidx}")
    return np.ascontiguousarray(off, dtype=I64)


def _mode(mode, fn):
    if not isinstance(mode, str):
        raise TypeError(f"{fn}: mode must be 'sum', 'mean' or 'max', got {type(mode).__name__}")
    if mode not in _embedding.MODES:
        raise ValueError(f"{fn}: mode must be 'sum', 'mean' or 'max', got {mode!r}")
    return mode


def _bags(fn, rows, cdt, indices, offsets, mode, per_sample_weights):
    """(idx 1-D contiguous, offsets int64, mode code, psw or None) of a checked call on a table
    of `rows` rows computed in `cdt`."""
    mode = _mode(mode, fn)
    idx = _indices(indices, fn, rows)
    if offsets is None:
        if idx.ndim != 2:
            raise ValueError(f"{fn}: offsets=None takes 2-D indices (bags, bag_size), got "
                             f"indices of shape {idx.shape}")
        off = np.arange(0, idx.size, max(idx.shape[1], 1), dtype=I64)[:idx.shape[0]]
        if idx.shape[1] == 0:
            off = np.zeros(idx.shape[0], I64)
    else:
        if idx.ndim != 1:
            raise ValueError(f"{fn}: indices must be 1-D with offsets, got shape {idx.shape} "
                             f"(2-D indices take offsets=None)")
        off = _offsets(offsets, fn, idx.size)
    psw = None
    if per_sample_weights is not None:
        if mode != "sum":
            raise ValueError(f"{fn}: per_sample_weights is only supported with mode='sum' (as in "
                             f"torch), got mode={mode!r}")
        p = _validate.elementwise_operand(per_sample_weights, "per_sample_weights", fn)
        if p.shape != idx.shape:
            raise ValueError(f"{fn}: per_sample_weights has shape {p.shape}; expected indices' "
                             f"shape {idx.shape}")
        psw = np.ascontiguousarray(p.reshape(-1), dtype=cdt)
    if mode == "max" and cdt == _validate.F32 and off.size:
        longest = int(np.diff(off, append=idx.size).max())
        if longest > _MAX_BAG_F32:
            raise ValueError(f"{fn}: mode='max' with a float32 or bfloat16 table takes bags of "
                             f"at most 2**24 positions, got one of {longest}")
    return np.ascontiguousarray(idx.reshape(-1)), off, _embedding.MODES[mode], psw


def embedding_bag(weight: ArrayLike, indices: ArrayLike, offsets: ArrayLike | None,
                  mode: Mode = "sum", per_sample_weights: ArrayLike | None = None, *,
                  out: Array | None = None) -> Array:
    """Sums, means or maxima of bags of table rows (``torch.nn.functional.embedding_bag``).

    Bag ``i`` holds the rows ``weight[indices[offsets[i]:offsets[i + 1]]]`` (the last bag runs to
    the end of ``indices``: torch's ``include_last_offset=False``); its result is their sum (each
    times ``per_sample_weights[k]`` when given), their mean or their column-wise maximum. An
    empty bag gives zeros in every mode. One kernel pass: per bag the rows are accumulated in
    vector registers in position order (bfloat16 rows widened to float32 on load, the result
    rounded once to bfloat16), the rows a few positions ahead prefetched, no gathered copy made;
    bags are split over threads, each bag computed by one thread (results do not depend on the
    thread count).

    Parameters
    ----------
    weight : array_like
        The table, (num_embeddings, embedding_dim): float32, bfloat16 or float64 (float16 is
        computed as float32). Any row stride.
    indices : array_like of int
        Rows of ``weight``, each in ``[0, num_embeddings)``: 1-D with ``offsets``, or 2-D
        (bags, bag_size) with ``offsets=None``. int32 and int64 are read as they are.
    offsets : array_like of int or None
        Start of each bag in ``indices``: 1-D, ``offsets[0] == 0`` (as torch requires),
        non-decreasing, at most ``len(indices)``.
    mode : {'sum', 'mean', 'max'}, optional
        ``max`` takes torch's rule per column: the first maximum wins (a NaN in a bag's first
        row stays).
    per_sample_weights : array_like, optional
        One weight per index (indices' shape); only with ``mode='sum'``, as in torch.
    out : ndarray, optional
        (len(offsets), embedding_dim), C-contiguous, of weight's dtype or the compute dtype
        (float32 for a bfloat16 table: the sums unrounded).

    Returns
    -------
    ndarray
        (len(offsets), embedding_dim) in weight's dtype (or ``out``).

    Raises
    ------
    ValueError
        An index out of range, offsets that do not start at 0, decrease or pass the end of
        indices, a weight that is not 2-D, per_sample_weights with another mode.
    TypeError
        Indices or offsets that are not integers, a weight that is not floating.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> w = np.arange(12, dtype=np.float32).reshape(4, 3)
    >>> pytpp.nn.embedding_bag(w, [0, 2, 2, 3], [0, 1, 4])
    array([[ 0.,  1.,  2.],
           [21., 24., 27.],
           [ 0.,  0.,  0.]], dtype=float32)
    >>> pytpp.nn.embedding_bag(w, [1, 3], [0], mode="max")
    array([[ 9., 10., 11.]], dtype=float32)
    """
    fn = "pytpp.nn.embedding_bag"
    w0 = _validate.as_array(weight, "weight", fn)
    w = _table(w0, fn)
    cdt = _compute_dtype(w.dtype)
    idx, off, code, psw = _bags(fn, w.shape[0], cdt, indices, offsets, mode, per_sample_weights)
    shape = (off.size, w.shape[1])
    if out is not None:
        y = _check_out(out, fn, shape, (w.dtype, cdt), dict(weight=w, indices=idx, offsets=off,
                                                           per_sample_weights=psw))
    else:
        y = np.empty(shape, w.dtype)
    if y.size:
        _embedding.forward(w, idx, off, code, psw, y)
    return y if out is not None else y.astype(w0.dtype, copy=False)


def _check_out(out, fn, shape, dtypes, inputs):
    """out= of a kernel that writes it directly: an ndarray of `shape` and one of `dtypes`,
    C-contiguous, writable, sharing no memory with the inputs."""
    if not isinstance(out, np.ndarray):
        raise TypeError(f"{fn}: out must be a numpy.ndarray, got {type(out).__name__}")
    if out.shape != shape:
        raise ValueError(f"{fn}: out has shape {out.shape}; expected {shape}")
    if out.dtype not in dtypes or not out.dtype.isnative:
        raise TypeError(f"{fn}: out has dtype {out.dtype}; expected "
                        f"{' or '.join(sorted({d.name for d in dtypes}))} in native byte order")
    if not out.flags.c_contiguous:
        raise ValueError(f"{fn}: out must be C-contiguous")
    if not out.flags.writeable:
        raise ValueError(f"{fn}: out is read-only")
    for name, a in inputs.items():
        if a is not None and np.may_share_memory(out, a):
            raise ValueError(f"{fn}: out shares memory with {name}")
    return out


def _aligned_empty(shape, dtype):
    """An uninitialised C-order array whose data start on a 64-byte boundary (whole cache lines:
    the kernels may write it by streaming stores)."""
    dtype = np.dtype(dtype)
    n = math.prod(shape)
    raw = np.empty(n + 64 // dtype.itemsize, dtype)
    skip = (-raw.ctypes.data % 64) // dtype.itemsize
    return raw[skip:skip + n].reshape(shape)


def _grad_out(grad_out, fn, shape, cdt):
    g = _validate.as_array(grad_out, "grad_out", fn)
    if g.shape != shape:
        raise ValueError(f"{fn}: grad_out has shape {g.shape}; expected {shape} (one row per "
                         f"bag, weight's columns)")
    return np.ascontiguousarray(g, dtype=cdt)


@overload
def embedding_bag_backward(grad_out: ArrayLike, weight: ArrayLike, indices: ArrayLike,
                           offsets: ArrayLike | None, mode: Mode = ...,
                           per_sample_weights: ArrayLike | None = ..., *,
                           sparse: Literal[False] = ..., out: Array | None = ...) -> Array: ...
@overload
def embedding_bag_backward(grad_out: ArrayLike, weight: ArrayLike, indices: ArrayLike,
                           offsets: ArrayLike | None, mode: Mode = ...,
                           per_sample_weights: ArrayLike | None = ..., *,
                           sparse: Literal[True], out: None = ...) -> tuple[Array, Array]: ...
def embedding_bag_backward(grad_out: ArrayLike, weight: ArrayLike, indices: ArrayLike,
                           offsets: ArrayLike | None, mode: Mode = "sum",
                           per_sample_weights: ArrayLike | None = None, *,
                           sparse: bool = False,
                           out: Array | None = None) -> Array | tuple[Array, Array]:
    """Gradient of :func:`embedding_bag` with respect to the table.

    Row ``r`` of the gradient is the sum over the index positions ``k`` with
    ``indices[k] == r`` of ``scale_k * grad_out[bag(k)]``: ``scale_k`` is 1 (sum),
    ``per_sample_weights[k]`` (sum with weights) or ``1 / len(bag)`` (mean); duplicate indices
    accumulate. For ``max`` the gradient of each bag and column goes to the row that gave its
    maximum, recomputed from ``weight`` here (torch's rule: the first maximum). The positions are
    grouped by row by a counting sort (each thread over the rows it owns) and each gradient row is
    written once, in position order, so the result does not depend on the thread count; the
    dense gradient is written by streaming stores when it is large.

    Parameters
    ----------
    grad_out : array_like
        (len(offsets), embedding_dim), any float dtype (computed in float32, float64 for a
        float64 table).
    weight, indices, offsets, mode, per_sample_weights
        As given to :func:`embedding_bag` (``weight`` is read only by ``mode='max'``; otherwise
        only its shape and dtype matter).
    sparse : bool, optional
        Return the row-sparse form ``(rows, values)``: the distinct rows indexed (sorted, int64)
        and their gradients, ``(len(rows), embedding_dim)``.
    out : ndarray, optional
        The dense gradient's buffer (weight's shape, C-contiguous; weight's dtype or the compute
        dtype): every element is written. Reusing one spares the page faults of a fresh
        allocation, which cost as much as the kernel for a table beyond the caches.

    Returns
    -------
    ndarray or (ndarray, ndarray)
        The dense gradient, weight's shape and dtype; or ``(rows, values)`` when ``sparse``.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> w = np.zeros((4, 2), np.float32)
    >>> g = np.array([[1.0, 2.0], [10.0, 20.0]], np.float32)
    >>> pytpp.nn.embedding_bag_backward(g, w, [0, 2, 2, 3], [0, 1])
    array([[ 1.,  2.],
           [ 0.,  0.],
           [20., 40.],
           [10., 20.]], dtype=float32)
    >>> rows, values = pytpp.nn.embedding_bag_backward(g, w, [0, 2, 2, 3], [0, 1], sparse=True)
    >>> rows
    array([0, 2, 3])
    """
    fn = "pytpp.nn.embedding_bag_backward"
    w0 = _check_table(_validate.as_array(weight, "weight", fn), fn)
    rows, dim = w0.shape
    cdt = _compute_dtype(w0.dtype)
    idx, off, code, psw = _bags(fn, rows, cdt, indices, offsets, mode, per_sample_weights)
    g = _grad_out(grad_out, fn, (off.size, dim), cdt)
    # the table itself is read only by max (the rows of the maxima); else its shape and dtype
    table = _table(w0, fn) if code == _embedding.MODES["max"] else None
    if sparse:
        if out is not None:
            raise ValueError(f"{fn}: out= is for the dense gradient, not sparse=True")
        return _sparse_backward(g, table, idx, off, code, psw, dim, w0.dtype)
    if out is not None:
        kinds = (cdt,) if w0.dtype == _validate.F16 else (w0.dtype, cdt)
        res = _check_out(out, fn, (rows, dim), kinds,
                         dict(grad_out=g, weight=w0, indices=idx, offsets=off,
                              per_sample_weights=psw))
    elif w0.dtype == cdt:     # whole aligned lines: the kernels may stream the rows out
        res = _aligned_empty((rows, dim), cdt)
    else:
        res = np.empty((rows, dim), w0.dtype if w0.dtype == _validate.BF16 else cdt)
    if res.size:
        _embedding.backward(g, table, idx, off, code, psw, res)
    return res if out is not None else res.astype(w0.dtype, copy=False)


def _sparse_backward(g, table, idx, off, code, psw, dim, dtype):
    """(rows, values) of the row-sparse gradient: the positions sorted by row (stable: each row's
    contributions in position order, as in the dense form)."""
    order = np.argsort(idx, kind="stable").astype(I64, copy=False)
    by_row = idx[order]
    starts = np.flatnonzero(by_row[1:] != by_row[:-1]) + 1
    rows = by_row[np.concatenate(([0], starts))] if idx.size else np.zeros(0, I64)
    ends = np.append(starts, idx.size).astype(I64) if idx.size else np.zeros(0, I64)
    values = np.empty((rows.size, dim), g.dtype)
    if values.size:
        bag_of = np.repeat(np.arange(off.size, dtype=I64), np.diff(off, append=idx.size))
        _embedding.backward_rows(g, table, idx, off, code, psw, ends, order, bag_of[order], values)
    return rows.astype(I64, copy=False), values.astype(dtype, copy=False)


def embedding(weight: ArrayLike, indices: ArrayLike) -> Array:
    """Rows of a table: ``weight[indices]`` (``torch.nn.functional.embedding``, weight first).

    A parallel gather that copies whole rows, prefetching the rows a few indices ahead. Any
    dtype (the rows are copied as bytes).

    Parameters
    ----------
    weight : array_like
        The table, 2-D (num_embeddings, embedding_dim).
    indices : array_like of int
        Any shape; each in ``[0, num_embeddings)`` (negative indices are errors, as in torch).

    Returns
    -------
    ndarray
        ``indices.shape + (embedding_dim,)``, weight's dtype.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> w = np.arange(6.0).reshape(3, 2)
    >>> pytpp.nn.embedding(w, [[2, 0], [1, 1]])
    array([[[4., 5.],
            [0., 1.]],
    <BLANKLINE>
           [[2., 3.],
            [2., 3.]]])
    """
    fn = "pytpp.nn.embedding"
    try:
        w = _validate.native(_validate.asarray(weight))
    except (TypeError, ValueError) as e:
        raise TypeError(f"{fn}: weight must be array_like, got {type(weight).__name__} "
                        f"({e})") from None
    if w.dtype.hasobject:
        raise TypeError(f"{fn}: weight has dtype {w.dtype}; expected a numeric dtype")
    if w.ndim != 2:
        raise ValueError(f"{fn}: weight must be 2-D (num_embeddings, embedding_dim), got shape "
                         f"{w.shape}")
    idx = _indices(indices, fn, w.shape[0])
    if (w.shape[1] > 1 and w.strides[1] != w.itemsize) or w.strides[0] % w.itemsize:
        w = np.ascontiguousarray(w)
    out = np.empty(idx.shape + (w.shape[1],), w.dtype)
    if out.size:
        _embedding.gather(w, np.ascontiguousarray(idx.reshape(-1)), out)
    return out
