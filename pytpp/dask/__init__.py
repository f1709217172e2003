"""pytpp inside dask.array graphs: the same functions on dask arrays, each task calling pytpp.

Install with the extra ``pytpp[dask]`` (dask[array] and distributed). Works with any dask
scheduler; on a ``distributed`` cluster every worker runs pytpp with the threads it was given
(``threads_per_worker`` / ``--nthreads``), see ``docs/distributed.md``.

>>> import numpy as np, dask.array as da, pytpp.dask
>>> a = da.ones((6, 8), chunks=(4, 3)); b = da.ones((8, 5), chunks=(5, 2))
>>> c = pytpp.dask.matmul(a, b)
>>> c.compute()[0]
array([8., 8., 8., 8., 8.])
"""
import numpy as np

try:
    import dask.array as da
    from dask.array.reductions import reduction
except ImportError as e:  # pragma: no cover - the extra is not installed
    raise ImportError("pytpp.dask needs dask: pip install 'pytpp[dask]'") from e

from pytpp import _validate
from pytpp.dask import _blocks, nn, sparse  # noqa: F401  (pytpp.dask.nn, pytpp.dask.sparse)
from pytpp.dask._threads import PytppThreads, register

__all__ = ["matmul", "brgemm", "nn", "sparse", "PytppThreads", "register"]

# contractions whose two k slabs together stay below this run as one GEMM per output block;
# longer ones as one product per k chunk summed in a tree (dask's own plan: bounded memory)
SLAB_BYTES = 256 << 20


def _contraction_dtype(x, fn, name):
    dt = np.dtype(x.dtype)
    if dt.kind != "f" and dt != _validate.BF16:
        raise TypeError(f"{fn}: {name} has dtype {dt}; expected float64, float32, bfloat16 or "
                        f"float16 (pytpp has no kernel for it)")
    return dt


def _result_dtype(a, b):
    both_bf16 = a.dtype == _validate.BF16 and b.dtype == _validate.BF16
    if both_bf16:
        return _validate.F32                  # bf16 x bf16 accumulates and returns in float32
    res = _validate.promote(a.dtype, b.dtype)
    return _validate.F32 if res == _validate.BF16 else res


def matmul(a, b):
    """``np.matmul`` on dask arrays, each block product a ``pytpp.matmul`` call.

    Any chunking: k chunks of a and b that do not line up are unified first. Stacks (leading
    dimensions) broadcast as in numpy and are chunked along their batch dimensions. When a row
    slab of a and a column slab of b fit in ``SLAB_BYTES`` together, each output block is one
    GEMM over the whole k axis; otherwise one product per k chunk, summed in a tree.

    Parameters
    ----------
    a, b : dask.array.Array or array_like
        float64, float32, bfloat16 or float16; 1-D operands are promoted as in numpy.

    Returns
    -------
    dask.array.Array
        numpy's result dtype (bfloat16 x bfloat16: float32, as ``pytpp.matmul``).

    Raises
    ------
    TypeError
        For dtypes pytpp has no kernel for (integers, complex), when the graph is built.
    ValueError
        For 0-d operands or core dimensions that do not match.

    Examples
    --------
    >>> import numpy as np, dask.array as da, pytpp.dask
    >>> x = da.from_array(np.arange(12.0).reshape(3, 4), chunks=2)
    >>> pytpp.dask.matmul(x, x.T).compute()
    array([[ 14.,  38.,  62.],
           [ 38., 126., 214.],
           [ 62., 214., 366.]])
    """
    fn = "pytpp.dask.matmul"
    a, b = da.asanyarray(a), da.asanyarray(b)
    _contraction_dtype(a, fn, "a")
    _contraction_dtype(b, fn, "b")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"{fn}: matmul needs at least one dimension (got a 0-d operand)")
    a_vec, b_vec = a.ndim == 1, b.ndim == 1
    if a_vec:
        a = a[np.newaxis, :]
    if b_vec:
        b = b[:, np.newaxis]
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"{fn}: core dimensions do not match: a has k = {a.shape[-1]}, b has "
                         f"k = {b.shape[-2]}")
    if a.ndim < b.ndim:
        a = a[(b.ndim - a.ndim) * (np.newaxis,)]
    elif a.ndim > b.ndim:
        b = b[(a.ndim - b.ndim) * (np.newaxis,)]
    dtype = _result_dtype(a, b)
    nd = a.ndim
    lhs_ind = tuple(range(nd))
    rhs_ind = tuple(range(nd - 2)) + (nd - 1, nd)
    k = a.shape[-1]
    slab = k * (max(a.chunksize[-2], 1) * a.dtype.itemsize + max(b.chunksize[-1], 1) * b.dtype.itemsize)
    if slab <= SLAB_BYTES:
        out_ind = tuple(range(nd - 1)) + (nd,)
        # concatenate=None: the k blocks arrive as lists (dask's concatenation would copy even
        # a single block), and, unlike False, the layer fuses with a following blockwise step
        # (dask fuses only layers of equal `concatenate`, a reduction's per-chunk step has None)
        out = da.blockwise(_blocks.matmul_slab, out_ind, a, lhs_ind, b, rhs_ind, dtype=dtype,
                           concatenate=None)
    else:
        out_ind = tuple(range(nd + 1))
        out = da.blockwise(_blocks.matmul_partial, out_ind, a, lhs_ind, b, rhs_ind,
                           adjust_chunks={lhs_ind[-1]: 1}, dtype=dtype, concatenate=None)
        out = _tree_sum(out, axis=-2)
    if a_vec:
        out = out.squeeze(-2)
    if b_vec:
        out = out.squeeze(-1)
    return out


def _tree_sum(x, axis):
    if x.shape[axis] == 1:
        return x.squeeze(axis)
    return reduction(x, _blocks.sum_blocks, _blocks.sum_blocks, axis=axis, dtype=x.dtype,
                     concatenate=False)


def brgemm(a, b):
    """Batch-reduce GEMM on dask stacks: ``sum_i a[i] @ b[i]`` for a (batch, m, k) and
    b (batch, k, n) chunked along the batch; each chunk pair is one ``pytpp.brgemm`` call and the
    chunk results are summed in a tree.

    Examples
    --------
    >>> import numpy as np, dask.array as da, pytpp.dask
    >>> a = da.ones((10, 2, 3), chunks=(4, 2, 3)); b = da.ones((10, 3, 2), chunks=(4, 3, 2))
    >>> pytpp.dask.brgemm(a, b).compute()
    array([[30., 30.],
           [30., 30.]])
    """
    fn = "pytpp.dask.brgemm"
    a, b = da.asanyarray(a), da.asanyarray(b)
    _contraction_dtype(a, fn, "a")
    _contraction_dtype(b, fn, "b")
    if a.ndim != 3 or b.ndim != 3:
        raise ValueError(f"{fn}: a and b must be stacks (batch, m, k) and (batch, k, n), got "
                         f"shapes {a.shape} and {b.shape}")
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise ValueError(f"{fn}: shapes {a.shape} and {b.shape} do not match as (batch, m, k) "
                         f"and (batch, k, n)")
    a = a.rechunk({1: -1, 2: -1})
    b = b.rechunk({0: a.chunks[0], 1: -1, 2: -1})
    dtype = _result_dtype(a, b)
    parts = da.blockwise(_blocks.brgemm_partial, "bmn", a, "bmk", b, "bkn",
                         adjust_chunks={"b": 1}, dtype=dtype, concatenate=None)
    return _tree_sum(parts, axis=0)
