"""Transform / data-movement TPP handles: reduce, transpose, VNNI, gather/scatter rows,
replicate column, unpack/pack (split-SGD bit halves). Made through :func:`pytpp.tpp.unary`."""
import numpy as np

from pytpp import _validate

from pytpp._core import _eltwise as _ew
from pytpp._core import _runtime
from pytpp.tpp import _cache
from pytpp.tpp import _handles as H

_ANY_DT = (np.dtype(np.float64), np.dtype(np.float32), H.BF16, np.dtype(np.int8),
           np.dtype(np.uint8), np.dtype(np.int16), np.dtype(np.uint16), np.dtype(np.int32),
           np.dtype(np.uint32), np.dtype(np.int64))


def _any_dtype(dtype, fn):
    return _validate.dtype_arg(dtype, _ANY_DT, fn)


def _index(idx, limit, fn):
    a = np.asarray(idx)
    if a.dtype.kind not in "iu" or a.ndim != 1:
        raise TypeError(f"{fn}: index must be a 1-D array of integers")
    a = np.ascontiguousarray(a, dtype=np.int64)
    if a.size and (a.min() < 0 or a.max() >= limit):
        raise ValueError(f"{fn}: index entries must be in [0, {limit}); got [{a.min()}, {a.max()}]")
    return a


def make(op, m, n, dtype, out_dtype, compute_dtype, ldi, ldo, axis, reduce_op, squared, alpha, fn,
         recipe):
    isa = _runtime.get_isa()
    key = ("transform", op, m, n, str(dtype), str(out_dtype), str(compute_dtype), ldi, ldo, axis,
           reduce_op, bool(squared), alpha, isa)
    kern = _cache.lookup(key)
    if kern is not None:
        return kern
    isa_idx = _runtime.isa_index(isa)
    desc = dict(op=op, m=m, n=n, dtype=str(np.dtype(dtype)))

    if op == "reduce":
        dt = H.dtype_of(dtype, fn)
        odt = dt if out_dtype is None else H.dtype_of(out_dtype, fn, "out_dtype")
        cdt = H.resolve_compute(dt, odt) if compute_dtype is None else \
            H.dtype_of(compute_dtype, fn, "compute_dtype")
        (ldi,) = H.lds(m, n, (ldi,), ("ldi",), fn)
        if axis not in (0, 1):
            raise ValueError(f"{fn}: axis must be 0 (over rows) or 1 (over columns), got {axis!r}")
        if reduce_op not in _ew.REDUCE_CODES:
            raise ValueError(f"{fn}: reduce_op must be one of {tuple(_ew.REDUCE_CODES)}, got {reduce_op!r}")
        nout = n if axis == 0 else m
        desc.update(axis=axis, reduce_op=reduce_op, squared=bool(squared), out_dtype=odt.name)

        def run(k, x, out):
            H.check_buffer(x, "x", dt, H.extent(m, n, ldi, 0), fn)
            H.check_buffer(out, "out", odt, nout, fn, True)
            if m == 0 or n == 0:
                ident = {"sum": 0.0, "mul": 1.0, "max": -np.inf, "min": np.inf}[reduce_op]
                out.reshape(-1)[:nout] = ident
                return out
            _ew.reduce(x, m, n, ldi, H.DT_CODE[dt], out, H.DT_CODE[odt], axis,
                       _ew.REDUCE_CODES[reduce_op], bool(squared), H.DT_CODE[cdt], isa_idx)
            return out

    elif op == "transpose":
        dt = _any_dtype(dtype, fn)
        (ldi,) = H.lds(m, n, (ldi,), ("ldi",), fn)
        (ldo,) = H.lds(n, m, (ldo,), ("ldo",), fn)
        desc.update(ldi=ldi, ldo=ldo)

        def run(k, x, out):
            H.check_buffer(x, "x", dt, H.extent(m, n, ldi, 0), fn)
            H.check_buffer(out, "out", dt, H.extent(n, m, ldo, 0), fn, True)
            if np.may_share_memory(x, out) and m and n:
                raise ValueError(f"{fn}: out overlaps x; transpose is out of place")
            _ew.transpose(x, m, n, ldi, out, ldo, dt.itemsize, isa_idx)
            return out

    elif op in ("vnni", "vnni_transpose"):
        dt = _any_dtype(dtype, fn)
        if alpha not in (2, 4):
            raise ValueError(f"{fn}: alpha must be 2 (16-bit types) or 4 (8-bit types), got {alpha!r}")
        (ldi,) = H.lds(m, n, (ldi,), ("ldi",), fn)
        mb = -(-m // alpha)
        nb = -(-n // alpha)
        desc.update(alpha=alpha)
        if op == "vnni":
            need_in, need_out = H.extent(m, n, ldi, 0), mb * n * alpha
        else:
            need_in, need_out = mb * n * alpha, nb * mb * alpha * alpha

        def run(k, x, out):
            H.check_buffer(x, "x", dt, need_in, fn)
            H.check_buffer(out, "out", dt, need_out, fn, True)
            if op == "vnni":
                _ew.vnni(x, m, n, ldi, out, dt.itemsize, alpha)
            else:
                _ew.vnni_transpose(x, m, n, out, dt.itemsize, alpha)
            return out

    elif op in ("gather_rows", "scatter_rows"):
        dt = _any_dtype(dtype, fn)
        (ldi,) = H.lds(m, n, (ldi,), ("ldi",), fn)
        ldo_ = n if ldo is None else ldo
        desc.update(ldi=ldi, ldo=ldo_)

        def run(k, x, index, out):
            if op == "gather_rows":   # x: m rows; out: len(index) rows
                idx = _index(index, m, fn)
                H.check_buffer(x, "x", dt, H.extent(m, n, ldi, 0), fn)
                H.check_buffer(out, "out", dt, H.extent(len(idx), n, ldo_, 0), fn, True)
                _ew.gather_rows(x, ldi, idx, n, out, ldo_, dt.itemsize)
            else:                     # x: len(index) rows; out: m rows
                idx = _index(index, m, fn)
                H.check_buffer(x, "x", dt, H.extent(len(idx), n, ldi, 0), fn)
                H.check_buffer(out, "out", dt, H.extent(m, n, ldo_, 0), fn, True)
                _ew.scatter_rows(x, ldi, idx, n, out, ldo_, dt.itemsize)
            return out

    elif op == "replicate_col":
        # the identity op with a column broadcast: one value per row, written across it
        dt = H.dtype_of(dtype, fn)
        odt = dt if out_dtype is None else H.dtype_of(out_dtype, fn, "out_dtype")
        cdt = H.resolve_compute(dt, odt)
        (ldo_,) = H.lds(m, n, (ldo,), ("ldo",), fn)
        inner = H.EltwiseKernel(fn, _ew.KIND_UNARY, "unary", _ew.UNARY_CODES["identity"], m, n,
                                (dt,), (1,), (H.BCAST["col"],), odt, ldo_, cdt, isa, dict(desc))

        def run(k, x, out):
            return inner(x, out)

    elif op in ("unpack", "pack"):
        f32, u16 = np.dtype(np.float32), np.dtype(np.uint16)
        size = m * n

        def run(k, *arrays):
            if op == "unpack":
                x, hi, lo = arrays
                H.check_buffer(x, "x", f32, size, fn)
                H.check_buffer(hi, "hi", u16, size, fn, True)
                H.check_buffer(lo, "lo", u16, size, fn, True)
                _ew.unpack_f32(x.reshape(-1)[:size], hi, lo)
                return hi, lo
            hi, lo, x = arrays
            H.check_buffer(x, "out", f32, size, fn, True)
            H.check_buffer(hi, "hi", u16, size, fn)
            H.check_buffer(lo, "lo", u16, size, fn)
            _ew.pack_f32(hi, lo, x.reshape(-1)[:size])
            return x
    else:  # pragma: no cover - guarded by the callers
        raise ValueError(f"{fn}: unknown op {op!r}")

    kern = H.TransformKernel(fn, run, desc, isa)
    kern._recipe = recipe
    return _cache.store(key, kern)
