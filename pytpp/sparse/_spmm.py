"""spmm: block-sparse x dense and dense x block-sparse products on the output-stationary driver
(frame/sparse.c). Every argument is checked here, before any kernel runs; nothing is written
into ``out`` when a check fails.

Two walks, each writing every output element once from one thread:

- rows: C = A @ B walks A's block rows (any block strides), B and C with unit column stride;
- cols: C = X @ W walks W's block columns (blocks with unit column stride), X any strides.

A @ B uses rows, unless B is narrower than a vector and A's blocks are at least a vector tall:
then C^T = B^T @ A^T by cols (the vector runs along A's block rows instead of a 1-lane column;
B^T is a free view). X @ W uses cols, unless W's blocks are narrower than a vector: then
C^T = W^T @ X^T by rows when X has at least 4 vectors of rows and W's blocks are narrower than 4
vectors (or narrower than one): the tiles run along X's rows; X^T and C^T go through the
transpose kernel.

bfloat16 (result float32, as ``pytpp.matmul`` returns it): every output is the sum
``vdpbf16ps`` forms, k in pairs (the odd element first) within each block, a block of odd depth
padded with a zero, denormals flushed: bit for bit the same at every ISA level, and for blocks of
even depth the same bits as ``pytpp.matmul`` of the dense operands. Where the CPU has
AVX512_BF16 (or at the ref level) the bf16 direct kernels run on bf16 words (``BF16_PAIRS``);
elsewhere the float32 kernels on operands widened in that order (``BF16_WIDENED``). The sparse
operand's blocks are laid out once per matrix and mode; the dense operand by the kernel while it
packs it (rows walk) or by numpy (cols walk)."""
from typing import Any, Protocol

import numpy as np

from pytpp import _validate
from pytpp._core import _eltwise, _runtime, _sparse
from pytpp._typing import Array, ArrayLike

FN = "pytpp.sparse.spmm"
# X @ W runs as (W^T X^T)^T from this many vectors of X rows, for W blocks narrower than this
# many vectors (see _dense_sparse)
_TRANSPOSED_MIN_VECTORS = 4


def _form(s, key, make):
    """s's kernel-ready form `key`, made once per matrix (not pickled)."""
    form = s._forms.get(key)
    if form is None:
        form = s._forms[key] = make()
    return form


def _by_rows(s):
    """(indptr, indices, data) of s by block rows, the stored dtype."""
    return _form(s, "rows", lambda: (s.indptr, s.indices, s.data) if s._row_major
                 else s._recompressed())


def _by_cols(s):
    """(indptr, indices, data) of s by block columns, the stored dtype."""
    return _form(s, "cols", lambda: s._recompressed() if s._row_major
                 else (s.indptr, s.indices, s.data))


def _pad_depth(d, axis):
    """d with its `axis` (a reduction of k values per block) zero-padded to even k."""
    if d.shape[axis] % 2 == 0:
        return d
    pad = [(0, 0)] * d.ndim
    pad[axis] = (0, 1)
    return np.pad(d, pad)


def _k_last(d, mode):
    """Blocks (or rows of blocks) `d` (..., k) whose last axis is reduced, in the form of the
    mode: float32/float64 as they are; BF16_PAIRS bf16 of even depth, C-contiguous;
    BF16_WIDENED float32 of even depth with each pair stored odd element first."""
    if mode == _sparse.PLAIN:
        return d
    d = _pad_depth(d, -1)
    if mode == _sparse.BF16_PAIRS:
        return np.ascontiguousarray(d)
    pairs = d.reshape(d.shape[:-1] + (d.shape[-1] // 2, 2))[..., ::-1]
    return pairs.astype(_validate.F32, order="C").reshape(d.shape)


def _k_first(d, mode):
    """Blocks (nb, k, n) whose axis 1 is reduced, as the cols walk's B: float blocks with unit
    column stride; BF16_PAIRS VNNI pairs (nb, k / 2, n, 2); BF16_WIDENED float32 (nb, k, n), k
    even, each pair of rows stored odd row first."""
    if mode == _sparse.PLAIN:
        return d if d.shape[2] <= 1 or d.strides[2] == d.itemsize else np.ascontiguousarray(d)
    d = _pad_depth(d, 1)
    nb, k, n = d.shape
    pairs = d.reshape(nb, k // 2, 2, n)
    if mode == _sparse.BF16_PAIRS:
        return np.ascontiguousarray(pairs.transpose(0, 1, 3, 2))
    return pairs[:, :, ::-1].astype(_validate.F32, order="C").reshape(nb, k, n)


def _rows_a(s, mode):
    """The rows walk's A for s: its blocks by block rows."""
    def make():
        ip, ix, d = _by_rows(s)
        return ip, ix, _k_last(d, mode)
    return _form(s, ("rows_a", mode), make)


def _cols_b(s, mode):
    """The cols walk's B for s: its blocks by block columns."""
    def make():
        ip, ix, d = _by_cols(s)
        return ip, ix, _k_first(d, mode)
    return _form(s, ("cols_b", mode), make)


def _cols_t_a(s, mode):
    """The rows walk's A for s^T: s's block columns, each block transposed."""
    def make():
        ip, ix, d = _by_cols(s)
        return ip, ix, _k_last(d.transpose(0, 2, 1), mode)
    return _form(s, ("cols_t_a", mode), make)


def _rows_t_b(s, mode):
    """The cols walk's B for s^T: s's block rows, each block transposed."""
    def make():
        ip, ix, d = _by_rows(s)
        return ip, ix, _k_first(d.transpose(0, 2, 1), mode)
    return _form(s, ("rows_t_b", mode), make)


def _mode(dtype):
    """How a product of this dtype runs at the active level (see the module's text)."""
    return _sparse.bf16_mode() if dtype == _validate.BF16 else _sparse.PLAIN


def prepare_right(s):
    """Make the forms ``x @ s`` runs on at the active level (the column walk's, and the
    transposed walk's taken for tall x), so that the first product does not pay for them."""
    mode = _mode(s.dtype)
    _cols_b(s, mode)
    _cols_t_a(s, mode)


def _cols_x(x, k, mode):
    """The cols walk's dense A (m x K, k per block): any element strides for the float dtypes;
    bf16 in the mode's form (PAIRS: rows of whole words, used in place when they are)."""
    if mode == _sparse.PLAIN:
        return x if _validate.element_strides_ok(x) else np.ascontiguousarray(x)
    if (mode == _sparse.BF16_PAIRS and k % 2 == 0 and x.strides[1] == x.itemsize
            and x.strides[0] % 4 == 0 and x.ctypes.data % 4 == 0):
        return x
    m = x.shape[0]
    return _k_last(x.reshape(m, x.shape[1] // k, k), mode).reshape(m, -1)


def _unit_cols(x):
    """x with unit column stride and whole-element strides (a copy only when needed)."""
    if (x.shape[1] > 1 and x.strides[1] != x.itemsize) or not _validate.element_strides_ok(x):
        return np.ascontiguousarray(x)
    return x


def _transpose_into(x, y):
    """y[...] = x.T through the level's transpose kernel when both have unit column strides
    (numpy's strided copy is several times slower), else numpy."""
    m, n = x.shape
    unit = (lambda a: _validate.element_strides_ok(a) and (a.shape[1] <= 1
                                                          or a.strides[1] == a.itemsize))
    if m and n and unit(x) and unit(y) and not np.may_share_memory(x, y):
        _eltwise.transpose(x, m, n, x.strides[0] // x.itemsize, y, y.strides[0] // y.itemsize,
                           x.itemsize, _runtime.active_isa_index())
    else:
        y[...] = x.T


def _writable_target(c_shape, out, cd, inputs):
    """Where the kernel writes a c_shape result: `out` itself when the kernel can write it in
    place (unit column stride, no overlap with an input), else a fresh array."""
    if (out is not None and out.dtype == cd and _validate.element_strides_ok(out)
            and (c_shape[1] <= 1 or out.strides[1] == out.itemsize)
            and not any(np.may_share_memory(out, x) for x in inputs)):
        return out
    return np.empty(c_shape, cd)


def _sparse_dense(s, b, out, cd):
    m, n = s.shape[0], b.shape[1]
    bm, bk = s.block
    mode = _mode(s.dtype)
    vl = _runtime.vector_width(cd == _validate.F64)
    if n < vl <= bm:
        # C^T (n x m) = B^T @ A^T through the cols walk: B^T is a view of any strides
        ip, ix, d = _rows_t_b(s, mode)
        bt = _cols_x(b.T, bk, mode)
        ct_target = None if out is None else out.T
        ct = _writable_target((n, m), ct_target, cd, (b, s.data))
        _sparse.spmm_cols(bt, ip, ix, d, ct, mode)
        return ct.T
    ip, ix, d = _rows_a(s, mode)
    b = _unit_cols(b)  # a bfloat16 b is laid out by the kernel as it packs b
    c = _writable_target((m, n), out, cd, (b, s.data))
    _sparse.spmm_rows(ip, ix, d, b, c, mode, bk)
    return c


def _dense_sparse(x, s, out, cd):
    m, n = x.shape[0], s.shape[1]
    bk, bn = s.block
    mode = _mode(s.dtype)
    vl = _runtime.vector_width(cd == _validate.F64)
    if (m >= _TRANSPOSED_MIN_VECTORS * vl and bn < _TRANSPOSED_MIN_VECTORS * vl) or bn < vl <= m:
        # C^T (n x m) = W^T @ X^T through the rows walk: W^T's block rows are W's block
        # columns, and the register tiles run along m instead of a block's bn columns. Measured
        # (fp32 AVX2, one thread, transposes included, m 32-384): 8 x 8 blocks 36-67 vs 24-49
        # GFLOP/s for the column walk, 16 x 16 equal to 1.8x faster; 32 x 32 blocks, whose
        # columns fill the column walk's tiles, 52 vs 57-66: those keep the column walk.
        ip, ix, d = _cols_t_a(s, mode)
        if x.shape[0] > 1 and x.strides[0] == x.itemsize:
            xt = x.T  # x is Fortran-ordered: x^T is already row-major
        else:  # (a bfloat16 x stays bfloat16: the kernel lays x^T out as it packs it)
            xt = np.empty((x.shape[1], m), x.dtype)
            _transpose_into(x, xt)
        if out is not None and _writable_target((n, m), out.T, cd, (x, s.data)) is out.T:
            _sparse.spmm_rows(ip, ix, d, xt, out.T, mode, bk)
            return out
        ct = np.empty((n, m), cd)
        _sparse.spmm_rows(ip, ix, d, xt, ct, mode, bk)
        c = out if out is not None and not any(
            np.may_share_memory(out, a) for a in (x, s.data)) else np.empty((m, n), cd)
        _transpose_into(ct, c)
        return c
    ip, ix, d = _cols_b(s, mode)
    x = _cols_x(x, bk, mode)
    c = _writable_target((m, n), out, cd, (x, s.data))
    _sparse.spmm_cols(x, ip, ix, d, c, mode)
    return c


class BlockSparseOperand(Protocol):
    """What spmm reads of a BSR / BCSC (pytpp.sparse._containers), named here so that the
    containers, which call spmm for ``@``, are not imported back."""

    _pytpp_block_sparse: bool
    indptr: Array
    indices: Array
    data: Array

    @property
    def shape(self) -> tuple[int, int]: ...

    @property
    def block(self) -> tuple[int, int]: ...

    @property
    def dtype(self) -> np.dtype[Any]: ...


def _is_block_sparse(x) -> bool:
    """A pytpp.sparse container (BSR / BCSC): they carry this mark, so this module needs not
    import the containers (which call it for ``@``)."""
    return getattr(type(x), "_pytpp_block_sparse", False)


def spmm(a: "BlockSparseOperand | ArrayLike", b: "BlockSparseOperand | ArrayLike",
         out: Array | None = None) -> Array:
    """Block-sparse x dense or dense x block-sparse product.

    One operand is a :class:`BSR` or :class:`BCSC`, the other a 2-D array of the same dtype.
    Each output block row (``A @ B``) or block column (``X @ W``) is computed by one thread as a
    batch-reduce over the sparse operand's non-empty blocks of that block row / column through the
    BRGEMM micro-kernels; threads are balanced by stored blocks, not by rows.

    Parameters
    ----------
    a, b : BSR, BCSC or array_like
        Exactly one of them sparse. float32, float64 or bfloat16, the same for both.
    out : ndarray, optional
        Of shape (a.shape[0], b.shape[1]) and the result dtype; any strides. Filled and
        returned. Left untouched when an argument is rejected.

    Returns
    -------
    ndarray
        float32 for float32 and bfloat16 operands (bfloat16 products are exact in float32 and
        accumulate in float32), float64 for float64.

    Raises
    ------
    TypeError
        Neither or both operands sparse; a dense operand that is not numeric; `out` not an
        ndarray or of another dtype than the result.
    ValueError
        A dense operand that is not 2-D, of another dtype than the sparse one, or whose
        contracted dimension differs; `out` of the wrong shape or read-only.

    Examples
    --------
    >>> import numpy as np
    >>> from pytpp.sparse import BSR, spmm
    >>> a = np.kron(np.eye(2), np.ones((2, 2))).astype(np.float32)
    >>> A = BSR.from_dense(a, block=(2, 2))
    >>> x = np.arange(8, dtype=np.float32).reshape(4, 2)
    >>> bool(np.array_equal(spmm(A, x), a @ x)), bool(np.array_equal(x.T @ A, x.T @ a))
    (True, True)
    """
    a_sp, b_sp = _is_block_sparse(a), _is_block_sparse(b)
    if a_sp == b_sp:
        raise TypeError(f"{FN}: exactly one operand must be a pytpp.sparse BSR or BCSC (got "
                        f"{type(a).__name__} and {type(b).__name__})")
    s, name = (a, "b") if a_sp else (b, "a")
    d = _validate.as_array(b if a_sp else a, name, FN)
    if d.ndim != 2:
        raise ValueError(f"{FN}: {name} must be 2-D, got shape {d.shape}")
    if d.dtype != s.dtype:
        raise ValueError(f"{FN}: {name} has dtype {d.dtype}; the sparse operand has {s.dtype} "
                         f"(both operands must have the same dtype)")
    if a_sp:
        if d.shape[0] != s.shape[1]:
            raise ValueError(f"{FN}: b has {d.shape[0]} rows; a {s.shape} has {s.shape[1]} "
                             f"columns")
        shape = (s.shape[0], d.shape[1])
    else:
        if d.shape[1] != s.shape[0]:
            raise ValueError(f"{FN}: a has {d.shape[1]} columns; b {s.shape} has {s.shape[0]} "
                             f"rows")
        shape = (d.shape[0], s.shape[1])
    cd = _validate.F32 if s.dtype == _validate.BF16 else s.dtype
    if out is not None:
        if not isinstance(out, np.ndarray):
            raise TypeError(f"{FN}: out must be a numpy.ndarray, got {type(out).__name__}")
        if out.shape != shape:
            raise ValueError(f"{FN}: out has shape {out.shape}; expected {shape}")
        if out.dtype != cd:
            raise TypeError(f"{FN}: out has dtype {out.dtype}; the result is {cd}")
        if not out.flags.writeable:
            raise ValueError(f"{FN}: out is read-only")
    if 0 in shape:
        res = out if out is not None else np.zeros(shape, cd)
        return res
    if 0 in d.shape:  # k == 0: an empty sum
        res = out if out is not None else np.empty(shape, cd)
        res[...] = 0
        return res
    res = _sparse_dense(s, d, out, cd) if a_sp else _dense_sparse(d, s, out, cd)
    if out is None:
        return res
    if not (res is out or (res.base is not None and _validate.same_view(res, out))):
        out[...] = res
    return out
