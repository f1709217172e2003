"""The block-sparse containers: BSR (block rows) and BCSC (block columns).

Both hold the same three arrays, compressed along a different dimension (docs/sparse.md):

- ``indptr`` int64, one more than the number of outer block groups (block rows for BSR, block
  columns for BCSC), ``indptr[0] == 0``, non-decreasing, ``indptr[-1] == nblocks``;
- ``indices`` int32, the inner block index of every stored block (its block column for BSR, its
  block row for BCSC), strictly increasing inside each group (canonical: sorted, no duplicates);
- ``data`` (nblocks, bm, bk): block p's values as they appear in the matrix, whatever the strides
  (``BSR.T`` is a BCSC whose ``data`` is a transposed view of the BSR's, no copy).

Stored blocks are kept even when all their values are zero (a scipy bsr's explicit zeros survive a
round trip)."""
from typing import Any, TypeVar

import numpy as np

from pytpp import _validate
from pytpp._typing import Array, ArrayLike

I32 = np.dtype(np.int32)
I64 = np.dtype(np.int64)
VALUE_DTYPES = (_validate.F32, _validate.F64, _validate.BF16)
Pair = tuple[int, int]
# the class a classmethod is called on (typing.Self needs Python 3.11; pytpp supports 3.10)
_S = TypeVar("_S", bound="_BlockSparse")


def _block_arg(block, fn):
    """block as (bm, bk) positive ints; ValueError/TypeError naming `block` otherwise."""
    try:
        bm, bk = block
        bm, bk = int(bm), int(bk)
        if (bm, bk) != tuple(block):
            raise TypeError
    except (TypeError, ValueError):
        raise TypeError(f"{fn}: block must be a pair of ints (bm, bk), got {block!r}") from None
    if bm <= 0 or bk <= 0:
        raise ValueError(f"{fn}: block sizes must be positive, got block={block!r}")
    return bm, bk


def _shape_arg(shape, block, fn):
    """shape as (rows, cols) non-negative ints divisible by the block."""
    try:
        m, k = (int(s) for s in shape)
    except (TypeError, ValueError):
        raise TypeError(f"{fn}: shape must be a pair of ints, got {shape!r}") from None
    if m < 0 or k < 0:
        raise ValueError(f"{fn}: shape must be non-negative, got {shape!r}")
    bm, bk = block
    if m % bm or k % bk:
        raise ValueError(f"{fn}: block={tuple(block)} does not divide shape={(m, k)}")
    return m, k


def _index_array(x, dtype, name, fn):
    """A 1-D integer array as `dtype` (C-contiguous); ValueError when values do not fit."""
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise ValueError(f"{fn}: {name} must be 1-D, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise TypeError(f"{fn}: {name} must hold integers, got dtype {arr.dtype}")
    if arr.size and arr.dtype != dtype:
        info = np.iinfo(dtype)
        if arr.min() < info.min or arr.max() > info.max:
            raise ValueError(f"{fn}: {name} has values outside {dtype.name}")
    return np.ascontiguousarray(arr, dtype=dtype)


def _check_structure(indptr, indices, ninner, outer_name, inner_name, fn):
    """O(nnz) checks of user index arrays: a valid indptr, indices in range and strictly
    increasing inside each group."""
    n = indices.size
    if indptr[0] != 0 or indptr[-1] != n or np.any(np.diff(indptr) < 0):
        raise ValueError(f"{fn}: indptr must start at 0, be non-decreasing and end at the "
                         f"number of blocks ({n})")
    if n == 0:
        return
    if indices.min() < 0 or indices.max() >= ninner:
        raise ValueError(f"{fn}: indices must be {inner_name} indices in [0, {ninner})")
    # strictly increasing inside each group: a step that is not positive is allowed only where
    # a new group starts
    bad = np.diff(indices.astype(np.int64)) <= 0
    if bad.any():
        starts = np.zeros(n, bool)
        starts[indptr[1:-1][indptr[1:-1] < n]] = True
        if (bad & ~starts[1:]).any():
            raise ValueError(f"{fn}: indices must be strictly increasing inside each "
                             f"{outer_name} (sorted, no duplicate blocks)")


def _group_of_blocks(indptr):
    """The outer group index of every block."""
    return np.repeat(np.arange(indptr.size - 1, dtype=np.int64), np.diff(indptr))


def _compress(outer, inner, nouter, order=None):
    """indptr, indices and the permutation that sorts blocks by (outer, inner)."""
    if order is None:
        order = np.lexsort((inner, outer))
    counts = np.bincount(outer, minlength=nouter) if outer.size else np.zeros(nouter, np.int64)
    indptr = np.zeros(nouter + 1, I64)
    np.cumsum(counts, out=indptr[1:])
    return indptr, np.ascontiguousarray(inner[order], dtype=I32), order


def dense_blocks(a, name, block, fn):
    """A dense 2-D operand checked and cut into blocks: (array in a value dtype, (m, k),
    (bm, bk), its (m/bm, k/bk, bm, bk) view of blocks)."""
    arr = _validate.as_array(a, name, fn)
    if arr.dtype not in VALUE_DTYPES:
        arr = arr.astype(_validate.F32 if arr.dtype == _validate.F16 else _validate.F64)
    if arr.ndim != 2:
        raise ValueError(f"{fn}: {name} must be 2-D, got shape {arr.shape}")
    bm, bk = _block_arg(block, fn)
    m, k = _shape_arg(arr.shape, (bm, bk), fn)
    blocks = arr.reshape(m // bm, bm, k // bk, bk).transpose(0, 2, 1, 3)
    return arr, (m, k), (bm, bk), blocks


class _BlockSparse:
    """Shared implementation of BSR and BCSC (see the module docstring)."""

    # numpy defers `ndarray @ A` to A.__rmatmul__ when this is None
    __array_ufunc__ = None
    _row_major = True  # BSR: groups are block rows
    _pytpp_block_sparse = True  # what pytpp.sparse.spmm recognises

    def __init__(self, shape: Pair, block: Pair, indptr: ArrayLike, indices: ArrayLike,
                 data: ArrayLike, check: bool = True) -> None:
        fn = f"pytpp.sparse.{type(self).__name__}"
        bm, bk = _block_arg(block, fn)
        m, k = _shape_arg(shape, (bm, bk), fn)
        data = _validate.native(np.asarray(data))
        if data.dtype not in VALUE_DTYPES:
            raise TypeError(f"{fn}: data has dtype {data.dtype}; expected float32, float64 or "
                            f"bfloat16")
        indptr = _index_array(indptr, I64, "indptr", fn)
        indices = _index_array(indices, I32, "indices", fn)
        nouter, ninner = (m // bm, k // bk) if self._row_major else (k // bk, m // bm)
        if indptr.size != nouter + 1:
            raise ValueError(f"{fn}: indptr must have {nouter + 1} entries, got {indptr.size}")
        if data.shape != (indices.size, bm, bk):
            raise ValueError(f"{fn}: data must have shape (nblocks, bm, bk) = "
                             f"{(indices.size, bm, bk)}, got {data.shape}")
        if not _validate.element_strides_ok(data):
            data = np.ascontiguousarray(data)
        if check:
            outer, inner = ("block row", "block column") if self._row_major else \
                ("block column", "block row")
            _check_structure(indptr, indices, ninner, outer, inner, fn)
        self._shape = (m, k)
        self._block = (bm, bk)
        self.indptr = indptr
        self.indices = indices
        self.data = data
        self._forms = {}  # kernel-ready forms, made once (not pickled)

    # --- properties ---------------------------------------------------------------------------
    @property
    def shape(self) -> Pair:
        """(rows, columns) of the matrix."""
        return self._shape

    @property
    def block(self) -> Pair:
        """(bm, bk): rows and columns of one block."""
        return self._block

    @property
    def dtype(self) -> np.dtype[Any]:
        """The values' dtype (float32, float64 or bfloat16)."""
        return self.data.dtype

    @property
    def nblocks(self) -> int:
        """Number of stored blocks."""
        return self.indices.size

    @property
    def nnz(self) -> int:
        """Stored values: stored blocks x bm x bk (as scipy's bsr counts them)."""
        return self.nblocks * self._block[0] * self._block[1]

    @property
    def density(self) -> float:
        """Stored blocks / all blocks of the matrix (0.0 for an empty shape)."""
        m, k = self._shape
        bm, bk = self._block
        total = (m // bm) * (k // bk)
        return self.nblocks / total if total else 0.0

    @property
    def ndim(self) -> int:
        return 2

    def __repr__(self) -> str:
        return (f"<pytpp.sparse.{type(self).__name__} shape={self._shape} block={self._block} "
                f"dtype={self.dtype} blocks={self.nblocks} density={self.density:.3g}>")

    # --- pickling -------------------------------------------------------------------------------
    def __reduce__(self):
        return (type(self), (self._shape, self._block, self.indptr, self.indices, self.data,
                             False))

    # --- block coordinates ----------------------------------------------------------------------
    def _coords(self):
        """(block row, block column) of every stored block, in storage order."""
        outer = _group_of_blocks(self.indptr)
        inner = self.indices.astype(np.int64)
        return (outer, inner) if self._row_major else (inner, outer)

    def _recompressed(self):
        """(indptr, indices, data) of the same matrix compressed the other way (block columns
        for a BSR, block rows for a BCSC), data C-contiguous; cached."""
        form = self._forms.get("other")
        if form is None:
            rows, cols = self._coords()
            m, k = self._shape
            bm, bk = self._block
            if self._row_major:  # BSR -> block columns
                new_outer, new_inner, nouter = cols, rows, k // bk
            else:                # BCSC -> block rows
                new_outer, new_inner, nouter = rows, cols, m // bm
            indptr, indices, order = _compress(new_outer, new_inner, nouter)
            form = (indptr, indices, np.ascontiguousarray(self.data[order]))
            self._forms["other"] = form
        return form

    # --- conversions ----------------------------------------------------------------------------
    def to_dense(self) -> Array:
        """The matrix as a C-contiguous ndarray of the values' dtype.

        Examples
        --------
        >>> import numpy as np
        >>> from pytpp.sparse import BSR
        >>> a = np.arange(16.0).reshape(4, 4) * np.kron(np.eye(2), np.ones((2, 2)))
        >>> bool((BSR.from_dense(a, block=(2, 2)).to_dense() == a).all())
        True
        """
        m, k = self._shape
        bm, bk = self._block
        out = np.zeros((m // bm, bm, k // bk, bk), self.dtype)
        rows, cols = self._coords()
        if rows.size:
            out[rows, :, cols, :] = self.data
        return out.reshape(m, k)

    def to_scipy(self) -> Any:
        """The matrix as a ``scipy.sparse.bsr_array`` of blocksize (bm, bk) holding the stored
        blocks (explicit zeros included), canonical (sorted indices). bfloat16 values come back
        as float32 (scipy has no bfloat16).

        Examples
        --------
        >>> import numpy as np
        >>> from pytpp.sparse import BCSC
        >>> m = BCSC.from_dense(np.eye(4, dtype=np.float32), block=(2, 2)).to_scipy()
        >>> m.format, m.blocksize, m.nnz
        ('bsr', (2, 2), 8)
        """
        import scipy.sparse as sp
        if self._row_major:
            indptr, indices, data = self.indptr, self.indices, np.ascontiguousarray(self.data)
        else:
            indptr, indices, data = self._recompressed()
        if data.dtype == _validate.BF16:
            data = data.astype(_validate.F32)
        return sp.bsr_array((data.copy(), indices.copy(), indptr.copy()), shape=self._shape,
                            blocksize=self._block)

    @classmethod
    def from_dense(cls: type[_S], a: ArrayLike, block: Pair,  # noqa: PYI019
                   threshold: float = 0.0) -> _S:
        """The blocks of dense `a` whose largest absolute value exceeds `threshold` (all-zero
        blocks are always dropped).

        Parameters
        ----------
        a : array_like, 2-D
            float32, float64 or bfloat16 (integers become float64).
        block : (int, int)
            (bm, bk), dividing a's shape.
        threshold : float
            Blocks with ``max |value| <= threshold`` are not stored.

        Examples
        --------
        >>> import numpy as np
        >>> from pytpp.sparse import BSR
        >>> a = np.zeros((4, 6), np.float32); a[2, 5] = 1.0
        >>> s = BSR.from_dense(a, block=(2, 3))
        >>> s.nblocks, s.density, s.indptr.tolist(), s.indices.tolist()
        (1, 0.25, [0, 0, 1], [1])
        """
        fn = f"pytpp.sparse.{cls.__name__}.from_dense"
        arr, (m, k), (bm, bk), blocks = dense_blocks(a, "a", block, fn)
        thr = _validate.real_arg(threshold, "threshold", fn, lo=0.0)
        nbr, nbc = m // bm, k // bk
        mag = np.abs(blocks.astype(_validate.F32) if arr.dtype == _validate.BF16 else blocks)
        peak = mag.max(axis=(2, 3)) if bm * bk and nbr * nbc else np.zeros((nbr, nbc))
        keep = peak > thr
        if cls._row_major:
            r, c = np.nonzero(keep)  # row-major order: sorted by (row, col)
            indptr, indices, _ = _compress(r, c, nbr, order=np.arange(r.size))
        else:
            c, r = np.nonzero(keep.T)
            indptr, indices, _ = _compress(c, r, nbc, order=np.arange(r.size))
        data = np.ascontiguousarray(blocks[r, c])
        shape = (m, k)
        return cls(shape, (bm, bk), indptr, indices, data, check=False)

    @classmethod
    def from_scipy(cls: type[_S], m: Any,  # noqa: PYI019
                   block: Pair | None = None) -> _S:
        """From a scipy sparse matrix or array (bsr, csr, csc, coo; ``sparray`` or ``spmatrix``).

        A bsr input keeps its blocksize (``block`` must be None or equal to it) and every stored
        block, explicit zeros included; csr/csc/coo need ``block=`` and are blocked as scipy's
        ``tobsr`` blocks them. Duplicates are summed and indices sorted; `m` is not modified.

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp
        >>> from pytpp.sparse import BSR
        >>> c = sp.csr_array(np.eye(4, dtype=np.float32))
        >>> BSR.from_scipy(c, block=(2, 2)).nblocks
        2
        """
        import scipy.sparse as sp
        fn = f"pytpp.sparse.{cls.__name__}.from_scipy"
        if not sp.issparse(m):
            raise TypeError(f"{fn}: m must be a scipy sparse matrix or array, got "
                            f"{type(m).__name__}")
        if m.format == "bsr":
            if block is not None and tuple(_block_arg(block, fn)) != tuple(m.blocksize):
                raise ValueError(f"{fn}: block={tuple(block)} differs from the bsr input's "
                                 f"blocksize {m.blocksize}")
            b = m.copy()
        elif m.format in ("csr", "csc", "coo"):
            if block is None:
                raise ValueError(f"{fn}: a {m.format} input needs block=(bm, bk)")
            bm, bk = _block_arg(block, fn)
            _shape_arg(m.shape, (bm, bk), fn)
            c = m.tocsr(copy=True)
            c.sum_duplicates()
            b = c.tobsr(blocksize=(bm, bk))
        else:
            raise TypeError(f"{fn}: format {m.format!r} is not supported (bsr, csr, csc, coo)")
        b.sum_duplicates()  # sorts indices too; keeps explicit zeros
        data = b.data
        if data.dtype not in VALUE_DTYPES:
            if data.dtype.kind not in "biuf":
                raise TypeError(f"{fn}: values of dtype {data.dtype} are not supported")
            data = data.astype(_validate.F32 if data.dtype == _validate.F16 else _validate.F64)
        bsr = BSR(b.shape, b.blocksize, b.indptr, b.indices, data, check=True)
        if cls is BSR:
            return bsr  # type: ignore[return-value]
        indptr, indices, cdata = bsr._recompressed()
        return cls(bsr.shape, bsr.block, indptr, indices, cdata, check=False)

    # --- products -------------------------------------------------------------------------------
    def __matmul__(self, other: ArrayLike) -> Array:
        if isinstance(other, _BlockSparse):
            return NotImplemented
        from pytpp.sparse._spmm import spmm
        return spmm(self, other)

    def __rmatmul__(self, other: ArrayLike) -> Array:
        if isinstance(other, _BlockSparse):
            return NotImplemented
        from pytpp.sparse._spmm import spmm
        return spmm(other, self)


class BSR(_BlockSparse):
    """Block compressed sparse rows: block row i holds blocks ``indptr[i]:indptr[i+1]``, block p
    sits in block column ``indices[p]`` and holds ``data[p]`` (bm x bk), sorted by block column
    inside each block row (docs/sparse.md). The natural left operand of ``A @ B``.

    Parameters
    ----------
    shape : (int, int)
        (M, K), multiples of (bm, bk).
    block : (int, int)
        (bm, bk), positive.
    indptr : int array, (M / bm + 1,)
    indices : int array, (nblocks,)
        Block column of each block (stored as int32).
    data : array, (nblocks, bm, bk)
        float32, float64 or bfloat16; any strides.
    check : bool
        Validate indptr and indices (range, sortedness, no duplicates): O(nblocks).

    Examples
    --------
    >>> import numpy as np
    >>> from pytpp.sparse import BSR
    >>> a = BSR((4, 4), (2, 2), [0, 1, 1], [1], np.ones((1, 2, 2), np.float32))
    >>> a.to_dense()[:2]
    array([[0., 0., 1., 1.],
           [0., 0., 1., 1.]], dtype=float32)
    >>> (a @ np.ones((4, 1), np.float32)).ravel().tolist()
    [2.0, 2.0, 0.0, 0.0]
    """

    _row_major = True

    @property
    def T(self) -> "BCSC":
        """The transposed matrix as a BCSC sharing indptr, indices and (a transposed view of)
        data: no copy."""
        m, k = self._shape
        bm, bk = self._block
        return BCSC((k, m), (bk, bm), self.indptr, self.indices, self.data.transpose(0, 2, 1),
                    check=False)


class BCSC(_BlockSparse):
    """Block compressed sparse columns: block column j holds blocks ``indptr[j]:indptr[j+1]``,
    block p sits in block row ``indices[p]`` and holds ``data[p]`` (bm x bk, as it appears in the
    matrix), sorted by block row inside each block column (docs/sparse.md). The natural right
    operand of ``X @ W`` (the sparse-weights case).

    Parameters
    ----------
    shape : (int, int)
        (M, K), multiples of (bm, bk).
    block : (int, int)
        (bm, bk), positive.
    indptr : int array, (K / bk + 1,)
    indices : int array, (nblocks,)
        Block row of each block (stored as int32).
    data : array, (nblocks, bm, bk)
        float32, float64 or bfloat16; any strides.
    check : bool
        Validate indptr and indices (range, sortedness, no duplicates): O(nblocks).

    Examples
    --------
    >>> import numpy as np
    >>> from pytpp.sparse import BCSC
    >>> w = BCSC.from_dense(np.eye(4), block=(2, 2))
    >>> w.indptr.tolist(), w.indices.tolist(), type(w.T).__name__
    ([0, 1, 2], [0, 1], 'BSR')
    """

    _row_major = False

    @property
    def T(self) -> "BSR":
        """The transposed matrix as a BSR sharing indptr, indices and (a transposed view of)
        data: no copy."""
        m, k = self._shape
        bm, bk = self._block
        return BSR((k, m), (bk, bm), self.indptr, self.indices, self.data.transpose(0, 2, 1),
                   check=False)
