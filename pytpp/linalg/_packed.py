"""Pre-packed constant weights: pack B once into the GEMM's panel layout, multiply many times."""
import numpy as np

from pytpp._core import _matmul as _cm
from pytpp._core import _runtime
from pytpp.linalg import _matmul as _mm

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
    The layout belongs to the ISA level active when packing (register block, kc); products with
    it run at that level's kernels.

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

    _pytpp_packed = True
    __array_ufunc__ = None  # make numpy defer `ndarray @ PackedMatrix` to __rmatmul__

    def __init__(self, b, *, dtype=None):
        b = _mm._as_operand(b, "b")
        if b.ndim != 2:
            raise ValueError(f"{_FN}: b must be 2-D (k, n), got shape {b.shape}")
        if dtype is None:
            dtype = b.dtype
        try:
            dtype = np.dtype(dtype)
        except TypeError:
            raise TypeError(f"{_FN}: dtype={dtype!r} is not a dtype") from None
        if dtype not in _mm.SUPPORTED:
            raise TypeError(f"{_FN}: dtype={dtype} is not supported; expected {_mm._NAMES}")
        self._code = {np.dtype(np.float64): _cm.DT_F64, np.dtype(np.float32): _cm.DT_F32}.get(
            dtype, _cm.DT_BF16)
        self._isa = _runtime.isa_index(_runtime.get_isa())
        self._kernel = _mm._bf16_kernel
        self._blk = _cm.blocking(self._code, self._isa, self._kernel)
        self.dtype = dtype
        self.shape = b.shape
        k, n = b.shape
        src = _mm._prepare(b, dtype)
        self._data = np.empty(_cm.packed_size(self._blk, self._code, k, n), dtype)
        if k and n:
            _cm.pack_b(self._blk, self._code, src, self._data)

    @property
    def nbytes(self):
        """Bytes of packed data."""
        return self._data.nbytes

    @property
    def isa(self):
        """Name of the kernels this layout was packed for."""
        return self._blk["kernel"]

    def __repr__(self):
        return (f"<pytpp PackedMatrix shape={self.shape} dtype={self.dtype} isa={self.isa} "
                f"nbytes={self.nbytes}>")

    def __rmatmul__(self, a):
        return self._rmatmul(a, None, None)

    def _rmatmul(self, a, out, dtype):
        fn = "pytpp.matmul"
        a = _mm._as_operand(a, "a")
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
        if dtype is not None:
            result = np.dtype(dtype)
            if result not in _mm.SUPPORTED:
                raise TypeError(f"{fn}: dtype={result} is not supported; expected {_mm._NAMES}")
        elif isinstance(out, np.ndarray) and out.dtype in _mm.SUPPORTED:
            result = out.dtype
        else:
            result = acc
        out_given = out is not None
        if out_given:
            _mm._check_out(out, shape, result)
        else:
            out = np.empty(shape, result)
        if out.size == 0:
            return out
        view = np.expand_dims(out, -2) if a_vec else out
        a2 = _mm._prepare(a2, self.dtype)
        direct = (out.dtype == acc and _mm._element_strides_ok(view)
                  and (view.strides[-1] == view.itemsize or n == 1)
                  and not np.may_share_memory(view, a2))
        c = view if direct else np.empty(lead + (m, n), acc)
        self._run(a2, c, lead, m)
        if not direct:
            if out.dtype == _mm.BFLOAT16:
                _mm._store_bf16(c, view)
            else:
                np.copyto(view, c, casting="same_kind")
        return _mm._scalar_if_0d(out, out_given)

    def _run(self, a2, c, lead, m):
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
            off_a, a_base = _mm._offsets(a2, lead)
            off_c, _ = _mm._offsets(c, lead)
        else:
            off_a = off_c = np.zeros(1, np.int64)
            a_base = a2
        _cm.gemm_prepacked(a_base, self._data, n, c, off_a, off_c, self._blk, self._code,
                           self._isa, self._kernel)


def pack(b, *, dtype=None):
    """Pack a constant right-hand matrix once: ``pytpp.linalg.PackedMatrix(b, dtype=dtype)``.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> pw = pytpp.linalg.pack(np.eye(3, dtype=np.float32))
    >>> pytpp.matmul(np.arange(3, dtype=np.float32), pw)
    array([0., 1., 2.], dtype=float32)
    """
    return PackedMatrix(b, dtype=dtype)
