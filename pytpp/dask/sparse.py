"""Block-sparse products inside dask graphs: the sparse operand is split into pieces of block
rows (``A @ b``) or taken whole (``x @ A``), each piece one object of the graph (shipped to a
worker once, not embedded in every task), and every task a pytpp.sparse.spmm call."""
import dask.array as da
import numpy as np

from pytpp.sparse import BCSC, BSR
from pytpp.sparse._containers import _BlockSparse

__all__ = ["spmm"]


def _row_pieces(a, parts):
    """`a` as BSR pieces of consecutive block rows, each holding about the same number of stored
    blocks (the work), at most `parts` of them."""
    if isinstance(a, BCSC):
        a = BSR.from_scipy(a.to_scipy())
    bm, bk = a.block
    nrows = a.shape[0] // bm
    parts = max(1, min(parts, nrows))
    cum = a.indptr
    total = int(cum[-1])
    cuts = [0]
    for p in range(1, parts):
        r = int(np.searchsorted(cum, total * p / parts))
        if cuts[-1] < r < nrows:
            cuts.append(r)
    cuts.append(nrows)
    pieces = []
    for r0, r1 in zip(cuts, cuts[1:]):
        i0, i1 = int(cum[r0]), int(cum[r1])
        pieces.append(BSR(((r1 - r0) * bm, a.shape[1]), (bm, bk), cum[r0:r1 + 1] - i0,
                          a.indices[i0:i1], a.data[i0:i1], check=False))
    return pieces


def _dense(x, A, axis, name, fn):
    """The dense operand as a 2-D dask array whose `axis` (0: rows of b in A @ b, 1: columns of
    x in x @ A) matches A's inner dimension, of A's dtype."""
    x = da.asanyarray(x)
    inner = A.shape[1 - axis]
    if x.ndim != 2 or x.shape[axis] != inner:
        raise ValueError(f"{fn}: A is {A.shape} but {name} is {x.shape}: {name} must be 2-D "
                         f"with {inner} {'rows' if axis == 0 else 'columns'}")
    if x.dtype != A.dtype:
        raise TypeError(f"{fn}: {name} has dtype {x.dtype}; A holds {A.dtype}")
    return x


def _result_dtype(A):
    """spmm's result dtype: bf16 products come back in float32."""
    return np.result_type(np.float32, A.dtype) if A.dtype.itemsize == 2 else A.dtype


def _product(x, y):
    from pytpp.sparse import spmm as _spmm
    return _spmm(x, y)


def spmm(a, b, *, row_parts=None):
    """``a @ b`` with one operand a :class:`pytpp.sparse.BSR` / :class:`~pytpp.sparse.BCSC`
    and the other a dask array (2-D): a dask array.

    ``A @ b`` (A sparse): A is split into pieces of block rows of about equal stored blocks
    (``row_parts`` of them; default one per 4 MiB of stored values, at least 1), b's rows are
    gathered in one chunk, and each (piece, column chunk of b) pair is one task.
    ``x @ A`` (A sparse): each row chunk of x is one task against the whole A. The sparse pieces
    enter the graph once each (they pickle, and run at each worker's own ISA level).

    Examples
    --------
    >>> import numpy as np, dask.array as da, pytpp.sparse, pytpp.dask.sparse
    >>> A = pytpp.sparse.BSR.from_dense(np.eye(4, dtype=np.float32), block=(2, 2))
    >>> b = da.ones((4, 3), dtype=np.float32, chunks=(2, 2))
    >>> pytpp.dask.sparse.spmm(A, b).compute()[:, 0]
    array([1., 1., 1., 1.], dtype=float32)
    """
    from dask import delayed
    fn = "pytpp.dask.sparse.spmm"
    if isinstance(a, _BlockSparse) and not isinstance(b, _BlockSparse):
        b = _dense(b, a, 0, "b", fn)
        if row_parts is None:
            row_parts = max(1, a.data.nbytes // (4 << 20))
        pieces = _row_pieces(a, int(row_parts))
        b1 = b.rechunk({0: -1})
        out_dt = _result_dtype(a)
        blocks = [da.map_blocks(_product, delayed(p, pure=True), b1, dtype=out_dt,
                                chunks=((p.shape[0],), b1.chunks[1]))
                  for p in pieces]
        return da.concatenate(blocks, axis=0)
    if isinstance(b, _BlockSparse) and not isinstance(a, _BlockSparse):
        x = _dense(a, b, 1, "x", fn)
        x1 = x.rechunk({1: -1})
        out_dt = _result_dtype(b)
        return da.map_blocks(_product, x1, delayed(b, pure=True), dtype=out_dt,
                             chunks=(x1.chunks[0], (b.shape[1],)))
    raise TypeError(f"{fn}: exactly one operand must be a pytpp.sparse BSR or BCSC, the other a "
                    f"dask array")
