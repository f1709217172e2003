"""Pre-packed constant weights: pack B once into the GEMM's panel layout, multiply many times."""
from __future__ import annotations

from typing import Any

import numpy as np

from pytpp._core import _matmul as _cm
from pytpp._core import _runtime
from pytpp import _validate
from pytpp.linalg import _matmul as _mm
from pytpp._typing import Array, ArrayLike, DTypeLike
from pytpp.linalg import _operands as ops

_FN = "pytpp.linalg.PackedMatrix"


class PackedMatrix:
    """A constant right-hand matrix B (k, n) packed once into the panel layout of the GEMM.

    ``pytpp.matmul(a, packed)`` (or ``a @ packed``) then skips packing B on every call, as NGEMM
    and the oneDNN graph compiler do for weights. The packed data takes about the memory of B
    (k x n rounded up to a multiple of the register block's width; bfloat16 k to even).

    Parameters
    ----------
    b : array_like, shape (k, n)
        float64, float32 or bfloat16; any strides (a transposed view packs without a copy).
    dtype : dtype, optional
        Compute dtype to pack for (float64, float32 or bfloat16). Default: b's dtype. Left
        operands are cast to it (they must cast safely, e.g. bfloat16 onto float32 weights).

    Notes
    -----
    The layout belongs to the ISA level active when packing (register block, kc). A product
    under another level (``pytpp.use_isa``, ``PYTPP_ISA``, or after unpickling on another CPU)
    re-packs once for that level. A PackedMatrix pickles as its matrix. ``np.asarray(P)``
    unpacks a copy of B; ``P.shape``, ``P.ndim``, ``P.dtype`` and ``P.T`` (unpacked) behave as
    on an ndarray.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> w = np.arange(6.0).reshape(3, 2)
    >>> pw = pytpp.linalg.PackedMatrix(w)
    >>> pw.shape, pw.dtype
    ((3, 2), dtype('float64'))
    >>> pytpp.matmul(np.ones((2, 3)), pw)
    array([[6., 9.],
           [6., 9.]])
    >>> np.ones((4, 1, 3)) @ pw        # stacks of left operands
    array([[[6., 9.]],
    <BLANKLINE>
           [[6., 9.]],
    <BLANKLINE>
           [[6., 9.]],
    <BLANKLINE>
           [[6., 9.]]])
    """

    shape: tuple[int, int]
    dtype: np.dtype[Any]
    _pytpp_packed = True
    __array_ufunc__ = None  # make numpy defer `ndarray @ PackedMatrix` to __rmatmul__
    ndim = 2

    def __init__(self, b: ArrayLike, *, dtype: DTypeLike = None) -> None:
        b = ops.as_operand(b, "b", _FN)
        if b.ndim != 2:
            raise ValueError(f"{_FN}: b must be 2-D (k, n), got shape {b.shape}")
        if dtype is None:
            dtype = b.dtype
        try:
            dtype = np.dtype(dtype)
        except TypeError:
            raise TypeError(f"{_FN}: dtype={dtype!r} is not a dtype") from None
        if dtype == ops.F16:
            dtype = ops.F32  # float16 weights multiply in float32
        if dtype not in ops.SUPPORTED:
            raise TypeError(f"{_FN}: dtype={dtype} is not supported; expected {ops.NAMES}")
        self._code = {np.dtype(np.float64): _cm.DT_F64, np.dtype(np.float32): _cm.DT_F32}.get(
            dtype, _cm.DT_BF16)
        self.dtype = dtype
        self.shape = (b.shape[0], b.shape[1])
        self._layout = self._pack(_validate.kernel_operand(b, dtype))

    def _pack(self, src):
        """(isa index, bf16 kernel, blocking, packed data) of `src` for the ISA level active now."""
        isa = _runtime.isa_index(_runtime.get_isa())
        kernel = ops.bf16_kernel
        blk = _cm.blocking(self._code, isa, kernel)
        k, n = src.shape
        data = np.empty(_cm.packed_size(blk, self._code, k, n), src.dtype)
        if k and n:
            _cm.pack_b(blk, self._code, src, data)
        return isa, kernel, blk, data

    def _current(self):
        """The layout for the ISA level active now: a pack made under another level (or
        unpickled) is re-packed once, so a product never runs kernels this CPU or the user's
        ``use_isa`` does not allow."""
        layout = self._layout
        if layout[:2] != (_runtime.isa_index(_runtime.get_isa()), ops.bf16_kernel):
            layout = self._layout = self._pack(self._unpack(layout))
        return layout

    def _unpack(self, layout=None):
        """B (k, n) back from a packed layout. Packing is a permutation of B's elements plus
        zero padding: packing the element indices (in 16-bit halves, so any element size and
        count fit) with the same blocking tells where each element went."""
        _, _, blk, data = self._layout if layout is None else layout
        k, n = self.shape
        b = np.zeros((k, n), data.dtype)
        if not (k and n):
            return b
        idx = np.arange(1, k * n + 1, dtype=np.int64).reshape(k, n)   # 0 marks padding
        carrier = np.dtype(f"u{data.itemsize}")
        pos = np.zeros(data.shape, np.int64)
        for shift in (0, 16, 32):
            if idx.max() >> shift == 0:
                break
            part = ((idx >> shift) & 0xFFFF).astype(carrier).view(data.dtype)
            packed = np.zeros(data.shape, data.dtype)
            _cm.pack_b(blk, self._code, part, packed)
            pos |= packed.view(carrier).astype(np.int64) << shift
        used = pos > 0
        b.reshape(-1)[pos[used] - 1] = data[used]
        return b

    @property
    def _data(self):
        return self._layout[3]

    @property
    def _blk(self):
        return self._layout[2]

    @property
    def nbytes(self) -> int:
        """Bytes of packed data."""
        return self._data.nbytes

    @property
    def size(self) -> int:
        return self.shape[0] * self.shape[1]

    @property
    def isa(self) -> str:
        """Name of the kernels the current layout was packed for."""
        return self._blk["kernel"]

    @property
    def T(self) -> Array:
        """The transposed matrix, unpacked (an ndarray)."""
        return self._unpack().T

    def __len__(self) -> int:
        return self.shape[0]

    def __array__(self, dtype: DTypeLike = None, copy: bool | None = None) -> Array:
        """The unpacked matrix: always a new array (``copy=False`` raises ValueError)."""
        if copy is False:
            raise ValueError(f"{_FN}: a PackedMatrix holds no array to view; np.asarray makes a "
                             f"copy")
        b = self._unpack()
        return b if dtype is None else b.astype(dtype)

    def __reduce__(self):
        # pickled as the matrix: re-packed on load, for the loading process's CPU and ISA level
        return _unpickle, (self._unpack(), self.dtype)

    def __repr__(self) -> str:
        return (f"<pytpp PackedMatrix shape={self.shape} dtype={self.dtype} isa={self.isa} "
                f"nbytes={self.nbytes}>")

    def __rmatmul__(self, a: ArrayLike) -> Any:
        return self._rmatmul(a, None, None)

    def __matmul__(self, x: ArrayLike) -> Any:
        # B @ x: B is unpacked for this product (packing pays off only on the right)
        return _mm.matmul(self._unpack(), x)

    def _rmatmul(self, a, out, dtype):
        fn = "pytpp.matmul"
        a = ops.as_operand(a, "a")
        k, n = self.shape
        if not np.can_cast(a.dtype, self.dtype, "safe"):
            raise TypeError(f"{fn}: a has dtype {a.dtype}, which does not cast safely to the "
                            f"PackedMatrix dtype {self.dtype}; pack with dtype={a.dtype}")
        a_vec = a.ndim == 1
        a2 = a.reshape(1, -1) if a_vec else a
        if a2.shape[-1] != k:
            raise ValueError(f"{fn}: core dimensions do not match: a has shape {a.shape} (k = "
                             f"{a2.shape[-1]}), the PackedMatrix has shape {self.shape}")
        lead, m = a2.shape[:-2], a2.shape[-2]
        shape = lead + ((m,) if not a_vec else ()) + (n,)
        acc = np.dtype(np.float32) if self._code == _cm.DT_BF16 else self.dtype
        result = acc if dtype is None else ops.result_dtype_arg(dtype)
        out, out_given = ops.result_array(out, shape, result)
        if out.size == 0:
            return out
        view = np.expand_dims(out, -2) if a_vec else out
        a2 = _validate.kernel_operand(a2, self.dtype)
        direct = (out.dtype == acc and _validate.element_strides_ok(view)
                  and (view.strides[-1] == view.itemsize or n == 1)
                  and not np.may_share_memory(view, a2))
        c = view if direct else np.empty(lead + (m, n), acc)
        self._run(a2, c, lead, m, self._current())
        if not direct:
            if out.dtype == ops.BFLOAT16:
                ops.store_bf16(c, view)
            else:
                np.copyto(view, c, casting="same_kind")
        return ops.scalar_if_0d(out, out_given)

    def _run(self, a2, c, lead, m, layout):
        k, n = self.shape
        if k == 0:
            c[...] = 0
            return
        # a stack whose rows are evenly spaced is one tall product
        if lead:
            try:
                a_flat = a2.reshape((-1, k), copy=False)
                c_flat = c.reshape((-1, n), copy=False)
            except ValueError:
                a_flat = c_flat = None
            if a_flat is not None:
                a2, c, lead = a_flat, c_flat, ()
        if lead:
            off_a, a_base = ops.offsets(a2, lead)
            off_c, _ = ops.offsets(c, lead)
        else:
            off_a = off_c = np.zeros(1, np.int64)
            a_base = a2
        isa, kernel, blk, data = layout
        _cm.gemm_prepacked(a_base, data, n, c, off_a, off_c, blk, self._code, isa, kernel)


def _unpickle(b, dtype):
    return PackedMatrix(b, dtype=dtype)


def pack(b: ArrayLike, *, dtype: DTypeLike = None) -> PackedMatrix:
    """Pack a constant right-hand matrix once: ``pytpp.linalg.PackedMatrix(b, dtype=dtype)``.

    Parameters
    ----------
    b : array_like, shape (k, n)
        float64, float32, bfloat16 (float16 packs as float32); any strides.
    dtype : dtype, optional
        The dtype to pack for (default: b's).

    Returns
    -------
    PackedMatrix

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> pw = pytpp.linalg.pack(np.eye(3, dtype=np.float32))
    >>> pytpp.matmul(np.arange(3, dtype=np.float32), pw)
    array([0., 1., 2.], dtype=float32)
    """
    return PackedMatrix(b, dtype=dtype)
