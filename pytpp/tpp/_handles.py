"""Building blocks of the element-wise and transform handles: dtype and broadcast codes, operand
checks, leading dimensions, and the handle classes. Used by tpp._eltwise and tpp._transforms."""
from __future__ import annotations

from typing import Any

import numpy as np

from pytpp import _validate
from pytpp._core import _eltwise as _ew
from pytpp._core import _runtime
from pytpp._typing import Array
from pytpp.tpp import _cache

BF16 = _validate.BF16
DT_CODE = {np.dtype(np.float64): _ew.F64, np.dtype(np.float32): _ew.F32, BF16: _ew.BF16}
BCAST = {None: 0, "none": 0, "row": 1, "col": 2, "scalar": 3}


def dtype_of(dtype, fn, name="dtype"):
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{fn}: {name} {dtype!r} is not a dtype; expected float64, float32 or "
                        f"bfloat16") from None
    if dt not in DT_CODE:
        raise TypeError(f"{fn}: {name} is {dt}; expected float64, float32 or bfloat16")
    return dt


def resolve_compute(*dts):
    """float64 if any operand is float64, else float32 (bfloat16 always computes in float32)."""
    return np.dtype(np.float64) if any(np.dtype(d) == np.float64 for d in dts) \
        else np.dtype(np.float32)


def extent(m, n, ld, bcast):
    if m == 0 or n == 0:
        return 0
    return {0: (m - 1) * ld + n, 1: n, 2: (m - 1) * ld + 1, 3: 1}[bcast]


# operand checks of the handles (type, dtype, C order, writable, size), in C
check_buffer = _ew.check_buffer


class Kernel:
    """Common part of the element-wise handles: descriptor, ISA, checks."""

    kind_name = "eltwise"
    descriptor: dict[str, Any]

    def __init__(self, descriptor, isa):
        self.descriptor = descriptor
        self._isa = isa
        self._isa_idx = _runtime.isa_index(isa)

    @property
    def isa(self) -> str:
        return self._isa

    def __repr__(self) -> str:
        d = ", ".join(f"{k}={v}" for k, v in self.descriptor.items())
        return f"<pytpp {self.kind_name} kernel {d} isa={self._isa}>"

    def __reduce__(self):
        # pickled as the dispatching call: re-dispatched on load, for the loader's ISA level
        return (_cache.rebuild, self._recipe)


class EltwiseKernel(Kernel):
    """A dispatched unary / binary / ternary TPP. Call it with the input arrays then the output
    (``k(x, out)``, ``k(x, y, out)``, ``k(x, y, z, out)``); it returns the output."""

    def __init__(self, fn, kind, kind_name, op, m, n, in_dts, in_lds, in_bcast, out_dt, ldo, cdt,
                 isa, descriptor, bits=None, ldm=0, seed=0, thresh=0, scale=1.0):
        super().__init__(descriptor, isa)
        self.kind_name = kind_name
        self._fn = fn
        self._kind, self._op, self._m, self._n = kind, op, m, n
        self._in = tuple(zip(in_dts, in_lds, in_bcast))
        self._out_dt, self._ldo, self._cdt = out_dt, ldo, cdt
        # per call: what each operand must hold, and the C codes
        self._in_checks = tuple((name, dt, extent(m, n, ld, bc))
                                for name, dt, ld, bc in zip("xyz", in_dts, in_lds, in_bcast))
        self._in_codes = tuple((ld, DT_CODE[dt], bc) for dt, ld, bc in self._in)
        self._out_need = extent(m, n, ldo, 0)
        self._out_code = DT_CODE[out_dt]
        self._cdt_code = DT_CODE[cdt]
        self._bits_role = bits     # None, "in" or "out"
        self._ldm = ldm
        self._seed, self._thresh, self._scale = seed, thresh, scale
        self._plain_unary = kind == _ew.KIND_UNARY and bits is None
        # binary and ternary TPPs without mask bits: called as k(x, y, out), k(x, y, z, out)
        self._plain_args = (len(in_dts) + 1 if bits is None and kind in (
            _ew.KIND_BINARY, _ew.KIND_TERNARY) else -1)

    def _check_inputs(self, arrays):
        fn = self._fn
        ins = []
        for arr, (name, dt, need), codes in zip(arrays, self._in_checks, self._in_codes):
            check_buffer(arr, name, dt, need, fn)
            ins.append((arr,) + codes)
        return tuple(ins)

    def _bits(self, arr, writable):
        need = self._m * self._ldm if self._n else 0
        return check_buffer(arr, "mask", np.dtype(np.uint8), need, self._fn, writable)

    def __call__(self, *args: Array, seed: int | None = None, base: int = 0) -> Array:
        fn = self._fn
        if self._plain_unary and len(args) == 2:
            # the common k(x, out): the general path's Python costs as much as the kernel
            x, out = args
            name, dt, need = self._in_checks[0]
            check_buffer(x, name, dt, need, fn)
            check_buffer(out, "out", self._out_dt, self._out_need, fn, True)
            _ew.run(self._kind, self._op, self._m, self._n, ((x,) + self._in_codes[0],),
                    (out, self._ldo, self._out_code), self._cdt_code, self._isa_idx)
            return out
        if len(args) == self._plain_args:
            out = args[-1]
            if len(args) == 3:
                (nx, dx, kx), (ny, dy, ky) = self._in_checks
                cx, cy = self._in_codes
                ins = ((check_buffer(args[0], nx, dx, kx, fn),) + cx,
                       (check_buffer(args[1], ny, dy, ky, fn),) + cy)
            else:
                ins = self._check_inputs(args[:-1])
            check_buffer(out, "out", self._out_dt, self._out_need, fn, True)
            _ew.run(self._kind, self._op, self._m, self._n, ins,
                    (out, self._ldo, self._out_code), self._cdt_code, self._isa_idx)
            return out
        nin = len(self._in)
        nargs = nin + (self._bits_role == "in") + 1
        if len(args) != nargs:
            raise TypeError(f"{fn}: the kernel takes {nargs} arrays, got {len(args)}")
        ins = self._check_inputs(args[:nin])
        bits = None
        if self._bits_role == "in":
            bits = self._bits(args[nin], False)
        out = args[-1]
        if self._bits_role == "out" and self._kind == _ew.KIND_CMP:
            bits = self._bits(out, True)
            outspec = None
        else:
            check_buffer(out, "out", self._out_dt, self._out_need, fn, True)
            outspec = (out, self._ldo, self._out_code)
        if self._bits_role == "out" and self._kind == _ew.KIND_DROPOUT:
            raise TypeError(f"{fn}: use call_with_mask(x, out, mask) for dropout")
        _ew.run(self._kind, self._op, self._m, self._n, ins, outspec, self._cdt_code,
                self._isa_idx, bits, self._ldm,
                seed=self._seed if seed is None else seed, base=base, thresh=self._thresh,
                scale=self._scale)
        return out

    def call_with_mask(self, x: Array, out: Array, mask: Array | None, seed: int | None = None,
                       base: int = 0) -> tuple[Array, Array | None]:
        """Dropout: ``out = x * keep / (1 - p)``, keep-bits into `mask` (uint8, ldm bytes/row)."""
        fn = self._fn
        ins = self._check_inputs((x,))
        check_buffer(out, "out", self._out_dt, self._out_need, fn, True)
        bits = self._bits(mask, True) if mask is not None else None
        _ew.run(self._kind, self._op, self._m, self._n, ins, (out, self._ldo, self._out_code),
                self._cdt_code, self._isa_idx, bits, self._ldm,
                seed=self._seed if seed is None else seed, base=base, thresh=self._thresh,
                scale=self._scale)
        return out, mask


class TransformKernel(Kernel):
    """Reductions, transposes, VNNI formatting, row gather/scatter, replicate, unpack."""

    def __init__(self, fn, run, descriptor, isa):
        super().__init__(descriptor, isa)
        self.kind_name = descriptor["op"]
        self._fn = fn
        self._run = run

    def __call__(self, *args: Array) -> Any:
        return self._run(self, *args)


def lds(m, n, given, names, fn, bcasts=()):
    """Leading dimensions (default n); a dense operand's must cover its n columns."""
    out = []
    bcasts = tuple(bcasts) + (0,) * (len(given) - len(bcasts))
    for ld, name, bc in zip(given, names, bcasts):
        ld = (1 if bc == 2 else n) if ld is None else _validate.nonneg_int(ld, name, fn)
        if bc == 0 and ld < n and m > 1:
            raise ValueError(f"{fn}: {name}={ld} is smaller than the {n} columns it strides over")
        out.append(ld)
    return out


def bcast_code(value, name, fn):
    if value not in BCAST:
        raise ValueError(f"{fn}: {name} must be one of None, 'row', 'col', 'scalar'; got {value!r}")
    return BCAST[value]
