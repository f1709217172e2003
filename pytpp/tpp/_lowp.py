"""Low-precision BRGEMM / GEMM handles: bfloat16 x bfloat16 -> float32 (or bfloat16) and 8-bit
(int8/uint8) x 8-bit -> int32, on the packed-panel kernels of pytpp/_core/frame/gemm_lowp.c.
Reached through :func:`pytpp.tpp.brgemm` and :func:`pytpp.tpp.gemm` with such a dtype."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from pytpp import _validate
from pytpp._core import _lowp, _runtime
from pytpp._typing import Array
from pytpp.tpp import _cache, _handles

BF16 = _validate.BF16
I8, U8, I32, F32 = (np.dtype(t) for t in (np.int8, np.uint8, np.int32, np.float32))
LOWP_DTYPES = (BF16, I8, U8)
_TYPE = {I8: _lowp.S8, U8: _lowp.U8, BF16: _lowp.BF16}
_MODES = {"stride": 0, "offset": 1, "address": 2}
_U7 = _lowp.I8_KERNELS.index("avx2_u7")
# AVX-VNNI's vpdpbusd (ymm) runs full-range u8 x s8 at twice the 7-bit kernels' rate: where the
# CPU has it, the AVX2 level never picks those
SEVEN_BIT_PAYS = not _runtime.has_feature("avx_vnni")

# The kernels calls run: 0 = the level's best, else an index into _lowp.I8_KERNELS /
# _lowp.BF16_KERNELS (tests force each path with `using_kernel`).
_forced = {"i8": 0, "bf16": 0}


@contextlib.contextmanager
def using_kernel(name: str, family: str = "i8") -> Iterator[None]:
    """Run the 8-bit (``family="i8"``) or bf16 handles on the kernel `name` inside the block
    (one of ``pytpp._core._lowp.I8_KERNELS`` / ``BF16_KERNELS``; for tests and tuning)."""
    names = _lowp.I8_KERNELS if family == "i8" else _lowp.BF16_KERNELS
    old = _forced[family]
    _forced[family] = names.index(name)
    try:
        yield
    finally:
        _forced[family] = old


def in_place_target(c, inputs, keep):
    """C itself when the kernels can write it in place (unit column stride, no memory shared
    with an input), else a C-contiguous stand-in to copy back (holding C's values when `keep`:
    beta 1)."""
    if c.strides[-1] == c.itemsize and not any(np.may_share_memory(c, x) for x in inputs):
        return c
    return np.array(c, order="C") if keep else np.empty(c.shape, c.dtype)


def product_8bit(a, b, c, comp=None, a_7bit=False, colsum_scale=0):
    """c = a @ b (+ comp on every row) for 2-D 8-bit a (m, k), b (k, n) with any strides and an
    int32 c (m, n), on the active level's kernels with no checks: for callers that checked the
    operands themselves (pytpp.quant.matmul_int8; a handle checks again, at ten times the cost
    of a small product). a_7bit: a holds values in [0, 127] (the AVX2 7-bit kernels).
    colsum_scale: s to add s * (b's column sums) to every row as well (with comp: the
    compensation of a per-tensor zero point of a, the sums taken while b is packed; for more
    rows than the small-m kernels take, which read b unpacked)."""
    m, k = a.shape
    n = b.shape[1]
    which = _forced["i8"] or (_U7 if a_7bit and SEVEN_BIT_PAYS else 0)
    target = in_place_target(c, (a, b), False)
    geom = (m, n, k, a.strides[0], a.strides[1], 1, b.strides[0], 0, b.strides[1],
            target.strides[0] // 4, _TYPE[a.dtype], _TYPE[b.dtype], _lowp.I32, 0, 0,
            int(np.int32(np.uint32(colsum_scale % 2 ** 32))))
    _lowp.run(_runtime.active_isa_index(), which, a, b, target, geom, 0, 1, 0, 0, None, None,
              comp)
    if target is not c:
        c[...] = target


def vnni_group(dtype: np.dtype) -> int:
    """k values per VNNI group: 2 for 16-bit types, 4 for 8-bit ones."""
    return 2 if dtype.itemsize == 2 else 4


def check_lowp_dtypes(dtype, b_dtype, out_dtype, fn):
    """(A dtype, B dtype, C dtype) of a low-precision handle, checked."""
    dt = _validate.dtype_arg(dtype, LOWP_DTYPES, fn)
    bdt = dt if b_dtype is None else _validate.dtype_arg(b_dtype, LOWP_DTYPES, fn, "b_dtype")
    if (dt == BF16) != (bdt == BF16):
        raise TypeError(f"{fn}: dtype {dt} and b_dtype {bdt} do not go together: bfloat16 "
                        f"multiplies bfloat16, an 8-bit type an 8-bit type")
    if dt == BF16:
        cdt = F32 if out_dtype is None else _validate.dtype_arg(out_dtype, (F32, BF16), fn,
                                                                "out_dtype")
    else:
        cdt = I32 if out_dtype is None else _validate.dtype_arg(out_dtype, (I32,), fn,
                                                                "out_dtype")
    return dt, bdt, cdt


class LowpPackedB:
    """A constant B (weights) packed for the low-precision kernels once: what
    :meth:`LowpKernel.pack` returns and a GEMM handle takes in place of B. It keeps a copy of
    B and packs it again for another kernel (another ISA level or operand signedness)."""

    def __init__(self, kern: "LowpKernel", b: Array):
        self._b = np.array(b, copy=True, order="C")
        self.shape = self._b.shape
        self.dtype = self._b.dtype
        self._kern = kern
        self._bufs: dict = {}
        self._colsums: dict = {}

    def buffer(self, tag, a_type):
        """The packed bytes for kernel `tag` = (isa, forced kernel, a_type)."""
        buf = self._bufs.get(tag)
        if buf is None:
            isa, which, _ = tag
            b = self._b
            geom = self._kern._geom_for(b, a_type)
            nbytes = _lowp.packed_bytes(isa, which, a_type, geom[11], self._kern._k,
                                        self._kern._n)
            buf = np.empty(nbytes, np.uint8)
            _lowp.pack_b(isa, which, geom, b, buf)
            self._bufs[tag] = buf
        return buf

    def colsums(self, tag):
        """B's column sums for the kernels of `tag` (an s8 A on quad kernels runs as A + 128
        and subtracts 128 times them), taken once from the packed bytes; None where the
        kernels have none."""
        if tag not in self._colsums:
            isa, which, a_type = tag
            self._colsums[tag] = _lowp.packed_colsums(isa, which, a_type, self._kern._k,
                                                      self._kern._n, self.buffer(tag, a_type))
        return self._colsums[tag]

    def __reduce__(self):
        return (_repack, (self._kern, self._b))


def _repack(kern, b):
    return LowpPackedB(kern, b)


class LowpKernel(_handles.Kernel):
    """A dispatched bf16 or 8-bit BRGEMM (``kind_name == "brgemm"``) or GEMM handle.

    Calls take row-major operands; B blocks are (k, n), or with ``b_vnni=True`` in
    :func:`pytpp.linalg.vnni_pack`'s layout (ceil(k/v), n, v). C (m, n) is float32 / bfloat16
    (bf16 handles) or int32 (8-bit handles); it is returned."""

    def __init__(self, kind, m, n, k, dt, bdt, cdt, b_vnni, beta, batch, isa, descriptor):
        super().__init__(descriptor, isa)
        self.kind_name = kind
        self._m, self._n, self._k = m, n, k
        self._dt, self._bdt, self._cdt = dt, bdt, cdt
        self._b_vnni, self._beta, self._batch = b_vnni, beta, batch
        self._fn = f"pytpp.tpp.{kind} handle"
        self._v = vnni_group(dt)
        self._kq = -(-k // self._v)
        self._b_shape = (self._kq, n, self._v) if b_vnni else (k, n)
        self._family = "bf16" if dt == BF16 else "i8"
        self._a7 = False
        # arguments of a call the fast path takes (0: none), and the path (None: not yet made)
        self._fast_nargs = 3 if kind == "gemm" else 4 if batch == "stride" else 0
        self._fast = None

    # operand checks -------------------------------------------------------------------------
    def _dtype_ok(self, x, want, name):
        if not isinstance(x, np.ndarray):
            raise TypeError(f"{self._fn}: {name} must be a numpy array, got {type(x).__name__}")
        dt = x.dtype
        eight = want is I8 or want is U8
        if not ((dt is I8 or dt is U8 or dt == I8 or dt == U8) if eight else dt == want):
            raise TypeError(f"{self._fn}: {name} has dtype {x.dtype}; expected "
                            f"{'int8 or uint8' if eight else want}")
        if dt.itemsize > 1:     # (1-byte elements have no byte order and whole strides)
            if not dt.isnative:
                raise ValueError(f"{self._fn}: {name} has non-native byte order")
            if any(s % x.itemsize for s in x.strides):
                raise ValueError(f"{self._fn}: {name} has strides {x.strides} that are not "
                                 f"whole elements")

    def _block(self, x, shape, name):
        if x.shape != shape:
            raise ValueError(f"{self._fn}: {name} has shape {x.shape}; expected {shape}")

    def _c(self, c):
        if not isinstance(c, np.ndarray):
            raise TypeError(f"{self._fn}: c must be a numpy array, got {type(c).__name__}")
        if c.dtype != self._cdt:
            raise TypeError(f"{self._fn}: c has dtype {c.dtype}; expected {self._cdt}")
        self._block(c, (self._m, self._n), "c")
        if not c.flags.writeable:
            raise ValueError(f"{self._fn}: c is read-only")
        if not c.dtype.isnative:
            raise ValueError(f"{self._fn}: c has non-native byte order")

    def _b_geom(self, strides, esz):
        """(g, rs_g, rs_e, cs) of one B block from its element strides."""
        if self._b_vnni:
            return (self._v, strides[-3] // esz, strides[-1] // esz, strides[-2] // esz)
        return (1, strides[-2] // esz, 0, strides[-1] // esz)

    # calls -------------------------------------------------------------------------------------
    def __call__(self, *args: Any, comp: Array | None = None) -> Array:
        """Run the product (see the class). `comp`: int32 (n,) values added to every row of an
        int32 C after the sums (the zero-point compensation of asymmetric quantization, e.g.
        ``-a_zero_point * column sums of B``), in the same pass."""
        # the common call (exact arrays of the handle's types, C-contiguous, c apart) checked
        # and run in one Cython call; anything else takes the checks below
        fast = self._fast
        if fast is None:
            fast = self._fast = (self.c_handle.fast_call if self._fast_nargs and not self._a7
                                 else False)
        if (fast and comp is None and len(args) == self._fast_nargs
                and not _forced[self._family] and fast(*args)):
            return args[2]
        m, n, k = self._m, self._n, self._k
        mode = self._batch
        a_shape = (m, k)
        if self.kind_name == "gemm":
            if len(args) != 3:
                raise TypeError(f"{self._fn}: call it as h(a, b, c), got {len(args)} arguments")
            a, b, c = args
            if isinstance(b, LowpPackedB):
                if comp is not None:
                    self._comp_ok(comp)
                return self._call_packed(a, b, c, comp)
            for x, name, want in ((a, "a", self._dt), (b, "b", self._bdt)):
                self._dtype_ok(x, want, name)
            self._block(a, a_shape, "a")
            self._block(b, self._b_shape, "b")
            a, b = a[None], b[None]
            count, mode, sa, sb, oa, ob = 1, "stride", 0, 0, None, None
        elif mode == "stride":
            if len(args) != 4:
                raise TypeError(f"{self._fn}: call it as h(a, b, c, count), got {len(args)} "
                                f"arguments")
            a, b, c, count = args
            count = _validate.nonneg_int(count, "count", self._fn)
            for x, name, want in ((a, "a", self._dt), (b, "b", self._bdt)):
                self._dtype_ok(x, want, name)
            if a.ndim != 3 or a.shape[1:] != a_shape or a.shape[0] < count:
                raise ValueError(f"{self._fn}: a has shape {a.shape}; expected ({count}, {m}, {k})")
            if b.shape[1:] != self._b_shape or b.shape[0] < count:
                raise ValueError(f"{self._fn}: b has shape {b.shape}; expected "
                                 f"{(count,) + self._b_shape}")
            sa, sb = a.strides[0] // a.itemsize, b.strides[0] // b.itemsize
            oa = ob = None
        elif mode == "offset":
            if len(args) != 5:
                raise TypeError(f"{self._fn}: call it as h(a, b, c, a_offsets, b_offsets), got "
                                f"{len(args)} arguments")
            a, b, c, oa, ob = args
            for x, name, want in ((a, "a", self._dt), (b, "b", self._bdt)):
                self._dtype_ok(x, want, name)
                if not x.flags.c_contiguous:
                    raise ValueError(f"{self._fn}: {name} must be C-contiguous in offset mode")
            oa, ob = self._offsets(oa, "a_offsets", a.size, m * k), \
                self._offsets(ob, "b_offsets", b.size, int(np.prod(self._b_shape)))
            if len(oa) != len(ob):
                raise ValueError(f"{self._fn}: a_offsets has {len(oa)} entries, b_offsets "
                                 f"{len(ob)}")
            count, sa, sb = len(oa), 0, 0
            a = a.reshape(-1)
            b = b.reshape(-1)
        else:
            if len(args) != 3:
                raise TypeError(f"{self._fn}: call it as h(a_list, b_list, c), got {len(args)} "
                                f"arguments")
            al, bl, c = args
            al, bl = list(al), list(bl)
            if len(al) != len(bl):
                raise ValueError(f"{self._fn}: {len(al)} A blocks but {len(bl)} B blocks")
            for i, (x, y) in enumerate(zip(al, bl)):
                self._dtype_ok(x, self._dt, f"a_list[{i}]")
                self._dtype_ok(y, self._bdt, f"b_list[{i}]")
                self._block(x, a_shape, f"a_list[{i}]")
                self._block(y, self._b_shape, f"b_list[{i}]")
            self._same_types(al, "a_list")
            self._same_types(bl, "b_list")
            # one set of strides serves every block: blocks laid out differently are copied
            if len({x.strides for x in al}) > 1 or len({y.strides for y in bl}) > 1:
                al = [np.ascontiguousarray(x) for x in al]
                bl = [np.ascontiguousarray(y) for y in bl]
            count, sa, sb, oa, ob = len(al), 0, 0, None, None
            if not al:
                a = np.zeros(a_shape, self._dt if self._dt == BF16 else U8)
                b = np.zeros(self._b_shape, self._bdt if self._bdt == BF16 else I8)
            else:
                a, b = al[0], bl[0]
        self._c(c)
        if comp is not None:
            self._comp_ok(comp)
        esz = a.itemsize
        a_strides = (a.strides[-2] // esz, a.strides[-1] // esz) if a.ndim >= 2 else (k, 1)
        b_geom = self._b_geom(b.strides, esz) if b.ndim >= 2 else (
            (self._v, n * self._v, 1, self._v) if self._b_vnni else (1, n, 0, 1))
        target = in_place_target(c, (al + bl) if mode == "address" else (a, b), self._beta)
        geom = (m, n, k, *a_strides, *b_geom, target.strides[0] // target.itemsize,
                _TYPE[a.dtype], _TYPE[b.dtype],
                _lowp.I32 if self._cdt == I32 else (_lowp.F32 if self._cdt == F32 else _lowp.BF16),
                int(self._beta))
        _lowp.run(self._isa_idx, self._which(a, b), al if mode == "address" else a,
                  bl if mode == "address" else b, target, geom, _MODES[mode], count, sa, sb,
                  oa, ob, comp)
        if target is not c:
            c[...] = target
        return c

    def _which(self, a, b):
        """The kernel of this call: a forced one (tests), the 7-bit kernels for declared 7-bit
        uint8 A x int8 B at the AVX2 level (without AVX-VNNI), else the level's best (0)."""
        forced = _forced[self._family]
        if forced or not self._a7:
            return forced
        if self._isa != "avx2" or a.dtype != U8 or b.dtype != I8:
            return 0
        if a.size and int(np.max(a)) > 127:
            raise ValueError(f"{self._fn}: the handle was made with a_7bit=True but A holds "
                             f"values above 127")
        return _U7 if SEVEN_BIT_PAYS else 0     # (the check above holds on every AVX2 CPU)

    def _comp_ok(self, comp):
        if self._cdt != I32:
            raise TypeError(f"{self._fn}: comp applies to 8-bit handles (int32 C)")
        if not (isinstance(comp, np.ndarray) and comp.dtype == I32 and comp.shape == (self._n,)
                and comp.flags.c_contiguous):
            raise ValueError(f"{self._fn}: comp must be a C-contiguous int32 array of shape "
                             f"({self._n},)")

    @property
    def c_handle(self) -> "_lowp.LowpHandle":
        """The handle for Cython code: ``cimport`` ``LowpHandle`` from ``pytpp._core._lowp``
        (pytpp/_core/_lowp.pxd) and call its ``run(a, b, c, &batch, comp)`` or
        ``run_packed(a, packed_b, c, comp)`` inside ``nogil`` on C-contiguous blocks of this
        handle's types (B in its layout: (k, n), or VNNI with ``b_vnni=True``). No checks there:
        the caller owns the bounds. With ``a_7bit=True`` A must hold values in [0, 127]."""
        ch = self.__dict__.get("_c_handle")
        if ch is None:
            which = _U7 if self._a7 and self._isa == "avx2" and SEVEN_BIT_PAYS else 0
            cdt = _lowp.I32 if self._cdt == I32 else (_lowp.F32 if self._cdt == F32 else _lowp.BF16)
            ch = _lowp.LowpHandle(self._isa_idx, which, self._m, self._n, self._k,
                                  self._v if self._b_vnni else 1, _TYPE[self._dt],
                                  _TYPE[self._bdt], cdt, bool(self._beta), self.descriptor)
            self.__dict__["_c_handle"] = ch
        return ch

    def pack(self, b: Array) -> LowpPackedB:
        """B (of the handle's B shape and an 8-bit / bf16 type) packed once for this handle's
        kernels: pass the result as B to a GEMM handle (``h(a, packed, c)``) to skip the
        per-call packing of a constant operand (weights)."""
        if self.kind_name != "gemm":
            raise TypeError(f"{self._fn}: pack() serves GEMM handles (pytpp.tpp.gemm)")
        self._dtype_ok(b, self._bdt, "b")
        self._block(b, self._b_shape, "b")
        return LowpPackedB(self, b)

    def _geom_for(self, b, a_type):
        """The descriptor tuple of a call with a C-contiguous B block `b` (for packing)."""
        g = self._b_geom(b.strides, b.itemsize)
        return (self._m, self._n, self._k, self._k, 1, *g, self._n, a_type, _TYPE[b.dtype],
                _lowp.I32 if self._cdt == I32 else _lowp.F32, 0)

    def _call_packed(self, a, pb, c, comp):
        self._dtype_ok(a, self._dt, "a")
        self._block(a, (self._m, self._k), "a")
        if pb._kern._b_shape != self._b_shape or pb._kern._k != self._k or \
                pb._kern._n != self._n or pb._kern._family != self._family:
            raise ValueError(f"{self._fn}: the packed B was made for another shape or type")
        self._c(c)
        a_type = _TYPE[a.dtype]
        which = self._which(a, pb)
        tag = (self._isa_idx, which, a_type)
        buf = pb.buffer(tag, a_type)
        target = in_place_target(c, (a,), self._beta)
        esz = a.itemsize
        geom = (self._m, self._n, self._k, a.strides[0] // esz, a.strides[1] // esz, 1, 0, 0, 0,
                target.strides[0] // target.itemsize, a_type, _TYPE[pb.dtype],
                _lowp.I32 if self._cdt == I32 else (_lowp.F32 if self._cdt == F32 else _lowp.BF16),
                int(self._beta), 1)
        sums = pb.colsums(tag) if a.dtype == np.int8 else None
        _lowp.run(self._isa_idx, which, a, buf, target, geom, 0, 1, 0, 0, None,
                  None, comp, sums)
        if target is not c:
            c[...] = target
        return c

    def _same_types(self, xs, name):
        if len({x.dtype for x in xs}) > 1:
            raise TypeError(f"{self._fn}: the blocks of {name} mix dtypes "
                            f"{sorted({str(x.dtype) for x in xs})}")

    def _offsets(self, off, name, size, extent):
        o = np.asarray(off)
        if o.ndim != 1 or (o.size and o.dtype.kind not in "iu"):
            raise TypeError(f"{self._fn}: {name} must be a 1-D array of integers")
        o = np.ascontiguousarray(o, dtype=np.int64)
        if o.size and (o.min() < 0 or o.max() + extent > size):
            raise ValueError(f"{self._fn}: {name} must lie in [0, {size - extent}] (blocks of "
                             f"{extent} elements in {size}); got [{o.min()}, {o.max()}]")
        return o


def handle(kind, m, n, k, dtype, b_dtype, out_dtype, b_vnni, beta, batch, fn, factory,
           a_7bit=False):
    """The cached low-precision handle of a descriptor (tpp.brgemm / tpp.gemm with a bf16 or
    8-bit dtype)."""
    m, n, k = (_validate.nonneg_int(v, name, fn) for v, name in ((m, "m"), (n, "n"), (k, "k")))
    dt, bdt, cdt = check_lowp_dtypes(dtype, b_dtype, out_dtype, fn)
    try:
        beta = float(beta)
    except (TypeError, ValueError):
        raise TypeError(f"{fn}: beta must be a real number, got {beta!r}") from None
    if beta not in (0.0, 1.0):
        raise ValueError(f"{fn}: beta must be 0 or 1 for {dt} operands, got {beta}")
    if batch not in _MODES:
        raise ValueError(f"{fn}: batch must be one of {tuple(_MODES)}, got {batch!r}")
    b_vnni = bool(b_vnni)
    a_7bit = bool(a_7bit)
    if a_7bit and (dt != U8 or bdt != I8):
        raise ValueError(f"{fn}: a_7bit applies to uint8 A with int8 B")
    isa = _runtime.get_isa()
    key = (kind, "lowp", m, n, k, dt.name, bdt.name, cdt.name, b_vnni, beta, batch, a_7bit, isa)
    kern = _cache.lookup(key)
    if kern is None:
        desc = dict(m=m, n=n, k=k, dtype=dt.name, b_dtype=bdt.name, out_dtype=cdt.name,
                    b_vnni=b_vnni, beta=beta)
        if kind == "brgemm":
            desc["batch"] = batch
        if a_7bit:
            desc["a_7bit"] = True
        kern = LowpKernel(kind, m, n, k, dt, bdt, cdt, b_vnni, beta, batch, isa, desc)
        kern._a7 = a_7bit
        kern._recipe = (factory, (m, n, k, dt), {key_: v for key_, v in desc.items()
                                                   if key_ not in ("m", "n", "k", "dtype")})
        kern = _cache.store(key, kern)
    return kern


def float_only(fn, b_dtype, out_dtype, b_vnni, dt, a_7bit=False):
    """The low-precision arguments of tpp.brgemm / tpp.gemm given with a float dtype: only
    their defaults (or dt itself) are accepted."""
    for name, v in (("b_dtype", b_dtype), ("out_dtype", out_dtype)):
        if v is not None and np.dtype(v) != dt:
            raise TypeError(f"{fn}: {name}={np.dtype(v)} needs dtype bfloat16, int8 or uint8 "
                            f"(float handles are {dt} throughout)")
    if b_vnni:
        raise ValueError(f"{fn}: b_vnni applies to bfloat16 and 8-bit dtypes, not {dt}")
    if a_7bit:
        raise ValueError(f"{fn}: a_7bit applies to uint8 A, not {dt}")


def is_lowp(dtype) -> bool:
    try:
        return np.dtype(dtype) in LOWP_DTYPES
    except TypeError:
        return False


def no_float_knobs(fn, **given):
    """Descriptor arguments the low-precision handles do not take (they read packed rows)."""
    for name, (value, default) in given.items():
        if value != default:
            raise ValueError(f"{fn}: {name}={value!r} is not supported for bfloat16 / 8-bit "
                             f"handles (operands are passed as arrays with their own strides)")
