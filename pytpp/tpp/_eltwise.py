"""Element-wise TPP descriptors -> cached kernel handles (unary, binary, ternary).

A handle describes 2D row-major operands: ``m`` rows, ``n`` columns, a leading dimension (row
stride in elements) per operand, storage dtypes (float64, float32, bfloat16) and a compute dtype,
and per-input broadcast flags: ``"row"`` (one row of n reused by every row), ``"col"`` (one value
per row, at ``x[i * ld]``) or ``"scalar"``. Operands are C-contiguous arrays addressed as flat
buffers with the descriptor's leading dimensions (like the BRGEMM handles).
"""
from __future__ import annotations

import warnings
from typing import Literal, overload

import numpy as np

from pytpp import _validate

from pytpp._core import _eltwise as _ew
from pytpp._core import _runtime
from pytpp.tpp import _cache, _quant, _transforms
from pytpp._typing import Approx, DTypeLike
from pytpp.tpp._quant import QuantKernel
from pytpp.tpp._handles import (BF16, EltwiseKernel, TransformKernel, bcast_code, dtype_of,
                                lds, resolve_compute)


# Op codes come from the C op lists (eltwise_ops.h), read by name at import: no code is
# written here.
_APPROXIMATIONS = {}      # exact op -> {approximation suffix: code}, the approx=True one first
for _name, _exact in _ew.APPROX_OF.items():
    _APPROXIMATIONS.setdefault(_exact, {})[_name[len(_exact) + 1:]] = _ew.UNARY_CODES[_name]
# unary math ops by name (approximations are reached through approx=)
MATH_CODES = {name: code for name, code in _ew.UNARY_CODES.items() if name not in _ew.APPROX_OF}
# activation backward forms: binary kernels (gradient, forward input or output)
BACKWARD_CODES = {name: code for name, code in _ew.BINARY_CODES.items() if name.endswith("_inv")}
_BINARY = dict(_ew.BINARY_CODES)
_CMP = dict(_ew.CMP_CODES)
_TERNARY = dict(_ew.TERNARY_CODES)
_REDUCE = dict(_ew.REDUCE_CODES)
# spellings of approx= that still work but are deprecated, and what they mean
_APPROX_ALIASES = {None: False, "none": False, "exact": False, "fast": True}

UNARY_OPS = tuple(MATH_CODES) + tuple(BACKWARD_CODES) + (
    "dropout", "dropout_inv", "rand", "reduce", "transpose", "vnni", "vnni_transpose",
    "gather_rows", "scatter_rows", "replicate_col", "unpack", "quantize", "dequantize")
BINARY_OPS = tuple(_BINARY) + ("compare", "pack")
TERNARY_OPS = tuple(_TERNARY) + ("blend",)

def approx_choices(op: str) -> tuple[bool | str, ...]:
    """The approx= values unary op `op` takes: False, and where it has approximations, True
    and their names.

    >>> import pytpp
    >>> pytpp.tpp.approx_choices("sigmoid")
    (False, True, 'approx', 'pade')
    """
    named = tuple(_APPROXIMATIONS.get(op, {}))
    return (False, True) + named if named else (False,)


def resolve_unary(op, approx, fn, stacklevel=3):
    """C code of unary op `op` under ``approx=``: False (exact), True (the op's default
    approximation) or an approximation's name ('pade', 'minimax', ...). `stacklevel` points a
    deprecation warning at the user's call."""
    if approx in _APPROX_ALIASES and approx is not True and approx is not False:
        warnings.warn(f"{fn}: approx={approx!r} is deprecated; use approx="
                      f"{_APPROX_ALIASES[approx]}", DeprecationWarning, stacklevel=stacklevel)
        approx = _APPROX_ALIASES[approx]
    if approx is False:
        return MATH_CODES[op]
    named = _APPROXIMATIONS.get(op)
    if not named:
        raise ValueError(f"{fn}: op {op!r} has no approximation; use approx=False")
    if approx is True:
        return next(iter(named.values()))
    if isinstance(approx, str) and approx in named:
        return named[approx]
    raise ValueError(f"{fn}: approx must be one of {approx_choices(op)} for {op!r}; got {approx!r}")


# the (de)quantize ops return their own handle class; every other op one of the other two (the
# overlap of the Literal with str is intended: typeshed's open() does the same)
@overload
def unary(op: Literal["quantize", "dequantize"], m: int, n: int,  # type: ignore[overload-overlap]
          dtype: DTypeLike = ..., *, out_dtype: DTypeLike | None = ...,
          compute_dtype: DTypeLike | None = ..., ldi: int | None = ..., ldo: int | None = ...,
          bcast: str | None = ..., approx: Approx = ..., p: float = ..., seed: int = ...,
          axis: int = ..., reduce_op: str = ..., squared: bool = ..., alpha: int = ...,
          channel_axis: int | None = ...) -> QuantKernel: ...
@overload
def unary(op: str, m: int, n: int, dtype: DTypeLike = ..., *,
          out_dtype: DTypeLike | None = ..., compute_dtype: DTypeLike | None = ...,
          ldi: int | None = ..., ldo: int | None = ..., bcast: str | None = ...,
          approx: Approx = ..., p: float = ..., seed: int = ..., axis: int = ...,
          reduce_op: str = ..., squared: bool = ..., alpha: int = ...,
          channel_axis: int | None = ...) -> EltwiseKernel | TransformKernel: ...


def unary(op: str, m: int, n: int, dtype: DTypeLike = np.float32, *,
          out_dtype: DTypeLike | None = None, compute_dtype: DTypeLike | None = None,
          ldi: int | None = None, ldo: int | None = None, bcast: str | None = None,
          approx: Approx = False, p: float = 0.5, seed: int = 0, axis: int = 1,
          reduce_op: str = "sum", squared: bool = False, alpha: int = 2,
          channel_axis: int | None = None) -> EltwiseKernel | TransformKernel | QuantKernel:
    """Dispatch a unary TPP on an m x n row-major input.

    Parameters
    ----------
    op : str
        One of :data:`UNARY_OPS`: ``identity`` (copy and dtype conversion; float32 -> bfloat16
        rounds to nearest even), ``zero``, ``square``, ``increment``, ``decrement``, ``negate``,
        ``abs``, ``sqrt``, ``reciprocal``, ``rsqrt``, ``relu``, ``exp``, ``tanh``, ``sigmoid``,
        ``gelu`` (erf form), ``gelu_tanh``; the backward forms ``relu_inv``, ``gelu_inv``,
        ``gelu_tanh_inv`` (called ``k(grad, x, out)``), ``tanh_inv``, ``sigmoid_inv``, ``exp_inv``
        (``k(grad, y, out)`` with y the forward output); ``dropout`` (``k.call_with_mask``),
        ``dropout_inv`` (``k(grad, mask, out)``), ``rand`` (uniform [0, 1), ``k(out)``),
        ``reduce`` (`reduce_op` over `axis`, optionally of the squared input), ``transpose``,
        ``vnni`` / ``vnni_transpose`` (`alpha` rows interleaved), ``gather_rows`` /
        ``scatter_rows`` (``k(x, index, out)``), ``replicate_col`` (an m-vector into m x n),
        ``unpack`` (float32 -> bfloat16 hi / lo bit halves, ``k(x, hi, lo)``); ``quantize``
        (float64 / float32 / bfloat16 -> uint8 / int8 `out_dtype`, default uint8) and
        ``dequantize`` (uint8 / int8 / int32 -> float32 / float64 / bfloat16 `out_dtype`,
        default float32), called ``k(x, scale, zero_point, out)``: the maps of
        :func:`pytpp.quant.quantize` / :func:`pytpp.quant.dequantize`, bit for bit (a NaN
        quantizes to the zero point here; the function raises).
    m, n : int
        Rows and columns of the input.
    dtype, out_dtype, compute_dtype : dtype
        Storage of the input and output (float64, float32, bfloat16) and of the arithmetic
        (default: float64 if any operand is float64, else float32).
    ldi, ldo : int, optional
        Leading dimensions (row strides in elements). Default: n.
    bcast : {None, 'row', 'col', 'scalar'}
        Broadcast of the input.
    approx : bool or str
        False: accurate within a few ulp. True: the op's fast approximation (float32 compute; see
        docs/eltwise.md for the measured errors); where an op has several, a name picks one:
        tanh 'pade' (True) or 'minimax'; sigmoid 'approx' (True, from the approximate exp) or
        'pade'; gelu 'minimax'; gelu_tanh 'pade'. ``approx_choices(op)`` lists them.
    p, seed : float, int
        Dropout probability and generator seed (the default seed of calls).
    channel_axis : {None, 0, 1}
        quantize / dequantize: one scale and zero point (None), one per row (0: 1-D arrays of
        m entries at each call) or one per column (1: n entries).

    Returns
    -------
    EltwiseKernel, TransformKernel or QuantKernel
        A cached handle: the same descriptor returns the same object.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> k = pytpp.tpp.unary("relu", 2, 3, np.float32)
    >>> k(np.array([[-1, 2, -3], [4, -5, 6]], np.float32), np.empty((2, 3), np.float32))
    array([[0., 2., 0.],
           [4., 0., 6.]], dtype=float32)
    >>> q = pytpp.tpp.unary("quantize", 1, 4, np.float32, out_dtype=np.int8)
    >>> q(np.array([[-1.0, 0.25, 0.75, 1e9]], np.float32), 0.5, 0, np.empty((1, 4), np.int8))
    array([[ -2,   0,   2, 127]], dtype=int8)
    """
    fn = "pytpp.tpp.unary"
    recipe = (unary, (op, m, n, dtype), dict(
        out_dtype=out_dtype, compute_dtype=compute_dtype, ldi=ldi, ldo=ldo, bcast=bcast,
        approx=approx, p=p, seed=seed, axis=axis, reduce_op=reduce_op, squared=squared,
        alpha=alpha, channel_axis=channel_axis))
    if op not in UNARY_OPS:
        raise ValueError(f"{fn}: unknown op {op!r}; expected one of {UNARY_OPS}")
    m, n = _validate.nonneg_int(m, "m", fn), _validate.nonneg_int(n, "n", fn)
    if op in ("quantize", "dequantize"):
        return _quant.make(op, m, n, dtype, out_dtype, ldi, ldo, channel_axis, fn, recipe)
    if op in ("transpose", "vnni", "vnni_transpose", "gather_rows", "scatter_rows", "unpack",
              "replicate_col", "reduce"):
        return _transforms.make(op, m, n, dtype, out_dtype, compute_dtype, ldi, ldo, axis,
                                reduce_op, squared, alpha, fn, recipe)
    dt = dtype_of(dtype, fn)
    odt = dt if out_dtype is None else dtype_of(out_dtype, fn, "out_dtype")
    cdt = resolve_compute(dt, odt) if compute_dtype is None else dtype_of(compute_dtype, fn, "compute_dtype")
    if cdt == BF16:
        raise TypeError(f"{fn}: compute_dtype bfloat16 is not supported; expected float32 or float64")
    bc = bcast_code(bcast, "bcast", fn)
    ldi, ldo = lds(m, n, (ldi, ldo), ("ldi", "ldo"), fn, (bc,))
    isa = _runtime.get_isa()
    code = resolve_unary(op, approx, fn) if op in MATH_CODES else None
    key = ("unary", op, m, n, dt, odt, cdt, ldi, ldo, bc, code, float(p), int(seed), isa)
    kern = _cache.lookup(key)
    if kern is not None:
        return kern
    desc = dict(op=op, m=m, n=n, dtype=dt.name, out_dtype=odt.name, compute_dtype=cdt.name,
                ldi=ldi, ldo=ldo, bcast=bcast)
    ldm = (n + 7) // 8
    if op in MATH_CODES:
        desc["approx"] = approx
        kern = EltwiseKernel(fn, _ew.KIND_UNARY, "unary", code, m, n, (dt,), (ldi,), (bc,), odt,
                             ldo, cdt, isa, desc)
    elif op in BACKWARD_CODES:
        kern = EltwiseKernel(fn, _ew.KIND_BINARY, "unary", BACKWARD_CODES[op], m, n, (dt, dt),
                             (ldi, ldi), (bc, bc), odt, ldo, cdt, isa, desc)
    elif op in ("dropout", "dropout_inv"):
        p = float(p)
        if not 0.0 <= p < 1.0:
            raise ValueError(f"{fn}: p must be in [0, 1), got {p}")
        thresh = min(int(round(p * 2.0 ** 32)), 2 ** 32 - 1)
        desc.update(p=p, ldm=ldm)
        kind = _ew.KIND_DROPOUT if op == "dropout" else _ew.KIND_DROPOUT_INV
        kern = EltwiseKernel(fn, kind, "unary", 0, m, n, (dt,), (ldi,), (0,), odt, ldo, cdt, isa,
                             desc, bits="out" if op == "dropout" else "in", ldm=ldm,
                             seed=int(seed), thresh=thresh, scale=1.0 / (1.0 - p))
    elif op == "rand":
        kern = EltwiseKernel(fn, _ew.KIND_RAND, "unary", 0, m, n, (), (), (), odt, ldo, cdt, isa,
                             desc, seed=int(seed))
    kern._recipe = recipe
    return _cache.store(key, kern)


def binary(op: str, m: int, n: int, dtype: DTypeLike = np.float32, *,
           dtype1: DTypeLike | None = None, out_dtype: DTypeLike | None = None,
           compute_dtype: DTypeLike | None = None, ld0: int | None = None,
           ld1: int | None = None, ldo: int | None = None, bcast0: str | None = None,
           bcast1: str | None = None, cmp: str = "gt") -> EltwiseKernel | TransformKernel:
    """Dispatch a binary TPP ``out = op(x, y)`` on m x n operands.

    Parameters
    ----------
    op : str
        ``add``, ``sub``, ``mul``, ``div``, ``max``, ``min``, the activation backward forms
        (``relu_inv`` ... as in :func:`unary`), ``compare`` (out is a bitmask: uint8 rows of
        ceil(n / 8) bytes, bit j of a row little-endian, set where ``x cmp y``) or ``pack``
        (bfloat16 bit halves hi, lo -> float32, the inverse of unary ``unpack``).
    dtype, dtype1, out_dtype, compute_dtype : dtype
        Storage of x, y (default: dtype) and out, and the arithmetic dtype.
    ld0, ld1, ldo : int, optional
        Leading dimensions of x, y and out.
    bcast0, bcast1 : {None, 'row', 'col', 'scalar'}
        Broadcasts of x and y.
    cmp : {'eq', 'ne', 'lt', 'le', 'gt', 'ge'}
        Predicate of ``compare``.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> k = pytpp.tpp.binary("add", 2, 3, np.float64, bcast1="row")
    >>> k(np.ones((2, 3)), np.arange(3.0), np.empty((2, 3)))
    array([[1., 2., 3.],
           [1., 2., 3.]])
    """
    fn = "pytpp.tpp.binary"
    recipe = (binary, (op, m, n, dtype), dict(
        dtype1=dtype1, out_dtype=out_dtype, compute_dtype=compute_dtype, ld0=ld0, ld1=ld1,
        ldo=ldo, bcast0=bcast0, bcast1=bcast1, cmp=cmp))
    if op not in BINARY_OPS:
        raise ValueError(f"{fn}: unknown op {op!r}; expected one of {BINARY_OPS}")
    m, n = _validate.nonneg_int(m, "m", fn), _validate.nonneg_int(n, "n", fn)
    if op == "pack":
        return _transforms.make("pack", m, n, dtype, out_dtype, None, None, None, 1, "sum",
                                False, 2, fn, recipe)
    dt0 = dtype_of(dtype, fn)
    dt1 = dt0 if dtype1 is None else dtype_of(dtype1, fn, "dtype1")
    odt = dt0 if out_dtype is None else dtype_of(out_dtype, fn, "out_dtype")
    cdt = resolve_compute(dt0, dt1, odt) if compute_dtype is None else \
        dtype_of(compute_dtype, fn, "compute_dtype")
    if cdt == BF16:
        raise TypeError(f"{fn}: compute_dtype bfloat16 is not supported; expected float32 or float64")
    b0, b1 = bcast_code(bcast0, "bcast0", fn), bcast_code(bcast1, "bcast1", fn)
    ld0, ld1, ldo = lds(m, n, (ld0, ld1, ldo), ("ld0", "ld1", "ldo"), fn, (b0, b1))
    if op == "compare" and cmp not in _CMP:
        raise ValueError(f"{fn}: cmp must be one of {tuple(_CMP)}, got {cmp!r}")
    isa = _runtime.get_isa()
    key = ("binary", op, m, n, dt0, dt1, odt, cdt, ld0, ld1, ldo, b0, b1, cmp, isa)
    kern = _cache.lookup(key)
    if kern is not None:
        return kern
    desc = dict(op=op, m=m, n=n, dtype=dt0.name, dtype1=dt1.name, out_dtype=odt.name,
                compute_dtype=cdt.name, ld0=ld0, ld1=ld1, ldo=ldo, bcast0=bcast0, bcast1=bcast1)
    if op == "compare":
        ldm = (n + 7) // 8 if ldo == n else _validate.nonneg_int(ldo, "ldo", fn)
        desc.update(cmp=cmp, ldm=ldm)
        kern = EltwiseKernel(fn, _ew.KIND_CMP, "binary", _CMP[cmp], m, n, (dt0, dt1), (ld0, ld1),
                             (b0, b1), odt, ldm, cdt, isa, desc, bits="out", ldm=ldm)
    else:
        kern = EltwiseKernel(fn, _ew.KIND_BINARY, "binary", _BINARY[op], m, n, (dt0, dt1),
                             (ld0, ld1), (b0, b1), odt, ldo, cdt, isa, desc)
    kern._recipe = recipe
    return _cache.store(key, kern)


def ternary(op: str, m: int, n: int, dtype: DTypeLike = np.float32, *,
            out_dtype: DTypeLike | None = None, compute_dtype: DTypeLike | None = None,
            ld0: int | None = None, ld1: int | None = None, ld2: int | None = None,
            ldo: int | None = None, bcast0: str | None = None, bcast1: str | None = None,
            bcast2: str | None = None) -> EltwiseKernel:
    """Dispatch a ternary TPP on m x n operands.

    ``muladd``: ``out = x * y + z``; ``nmuladd``: ``out = z - x * y`` (out may be z itself:
    the paper's C = C +- A * B); ``blend``: ``out = mask ? y : x`` with a bitmask as from
    ``binary('compare')``, called ``k(x, y, mask, out)``.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> k = pytpp.tpp.ternary("muladd", 1, 3, np.float64, bcast1="scalar")
    >>> c = np.ones(3)
    >>> k(np.arange(3.0), np.array([2.0]), c, c)
    array([1., 3., 5.])
    """
    fn = "pytpp.tpp.ternary"
    recipe = (ternary, (op, m, n, dtype), dict(
        out_dtype=out_dtype, compute_dtype=compute_dtype, ld0=ld0, ld1=ld1, ld2=ld2, ldo=ldo,
        bcast0=bcast0, bcast1=bcast1, bcast2=bcast2))
    if op not in TERNARY_OPS:
        raise ValueError(f"{fn}: unknown op {op!r}; expected one of {TERNARY_OPS}")
    m, n = _validate.nonneg_int(m, "m", fn), _validate.nonneg_int(n, "n", fn)
    dt = dtype_of(dtype, fn)
    odt = dt if out_dtype is None else dtype_of(out_dtype, fn, "out_dtype")
    cdt = resolve_compute(dt, odt) if compute_dtype is None else dtype_of(compute_dtype, fn, "compute_dtype")
    if cdt == BF16:
        raise TypeError(f"{fn}: compute_dtype bfloat16 is not supported; expected float32 or float64")
    b0, b1, b2 = (bcast_code(b, nm, fn) for b, nm in ((bcast0, "bcast0"), (bcast1, "bcast1"),
                                                  (bcast2, "bcast2")))
    ld0, ld1, ld2, ldo = lds(m, n, (ld0, ld1, ld2, ldo), ("ld0", "ld1", "ld2", "ldo"), fn,
                              (b0, b1, b2))
    isa = _runtime.get_isa()
    key = ("ternary", op, m, n, dt, odt, cdt, ld0, ld1, ld2, ldo, b0, b1, b2, isa)
    kern = _cache.lookup(key)
    if kern is not None:
        return kern
    desc = dict(op=op, m=m, n=n, dtype=dt.name, out_dtype=odt.name, compute_dtype=cdt.name,
                ld0=ld0, ld1=ld1, ld2=ld2, ldo=ldo, bcast0=bcast0, bcast1=bcast1, bcast2=bcast2)
    if op == "blend":
        ldm = (n + 7) // 8
        desc["ldm"] = ldm
        kern = EltwiseKernel(fn, _ew.KIND_BLEND, "ternary", 0, m, n, (dt, dt), (ld0, ld1),
                             (b0, b1), odt, ldo, cdt, isa, desc, bits="in", ldm=ldm)
    else:
        kern = EltwiseKernel(fn, _ew.KIND_TERNARY, "ternary", _TERNARY[op], m, n, (dt, dt, dt),
                             (ld0, ld1, ld2), (b0, b1, b2), odt, ldo, cdt, isa, desc)
    kern._recipe = recipe
    return _cache.store(key, kern)
