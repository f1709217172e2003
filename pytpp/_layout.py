"""Copies between memory layouts by the level's transpose kernels.

numpy copies a transposed view element by element along one side (a Fortran-ordered 2048 x 2048
float32 array into C order: ~40 ms on a Zen 5 core, the transpose kernel ~3 ms). Functions that
reduce along an axis (softmax, the normalisations) bring such an axis last through these.
"""
from __future__ import annotations

import threading

import numpy as np

from pytpp._core import _eltwise, _runtime

# below this many elements per transposed block numpy's copy is as fast
_MIN_BLOCK = 4096
# more batched blocks than this: the Python loop would cost more than it saves
_MAX_BATCH = 4096
# runs of at least this many bytes move whole (the row gather) when both orders end alike
_MIN_RUN = 64
# bytes of one scratch buffer a thread keeps for the next call (larger ones are made each time)
_SCRATCH_MAX = 16 << 20
_local = threading.local()


def dense_order(a):
    """The axes of a longer than 1, from the slowest in memory to the fastest, when its elements
    fill one block in that order with positive strides (C, Fortran, transposed views...); else
    None."""
    order = sorted((i for i in range(a.ndim) if a.shape[i] > 1), key=lambda i: -a.strides[i])
    expect = a.itemsize
    for i in reversed(order):
        if a.strides[i] != expect:
            return None
        expect *= a.shape[i]
    return order


def channels_last(x):
    """x (N, C, ...) as the C-ordered (N, ..., C) view when its memory is channels-last (torch's
    channels_last seen through numpy), for the NHWC kernels; None otherwise."""
    if x.ndim >= 3 and not x.flags.c_contiguous:
        xt = np.moveaxis(x, 1, -1)
        if xt.flags.c_contiguous:
            return xt
    return None


def _swap(src_order, dst_order):
    """k, j with src_order = A + B + C and dst_order = A + C + B (A = the first k axes, B the
    next j), or None."""
    k = 0
    while k < len(src_order) and src_order[k] == dst_order[k]:
        k += 1
    rest = src_order[k:]
    for j in range(1, len(rest)):
        if dst_order[k:] == rest[j:] + rest[:j]:
            return k, j
    return None


def _gather(s0, d0, so, do):
    """Both orders end in the same axes, whose elements (a run of at least _MIN_RUN bytes) move
    whole: the runs copied by the row gather kernel in the destination's order (numpy paid ~0.1
    us per run: q of shape (B, L, H, E) seen as (B, H, L, E), 3 MB, 1.9 ms). True if done."""
    t = 0
    while t < len(so) and so[len(so) - 1 - t] == do[len(do) - 1 - t]:
        t += 1
    if t == 0 or t == len(so):
        return False
    run = int(np.prod([s0.shape[i] for i in so[len(so) - t:]], dtype=np.int64))
    if run * s0.itemsize < _MIN_RUN:
        return False
    outer_s, outer_d = so[:len(so) - t], do[:len(do) - t]
    rows = s0.size // run
    ids = np.arange(rows, dtype=np.int64).reshape([s0.shape[i] for i in outer_s])
    idx = np.ascontiguousarray(ids.transpose([outer_s.index(i) for i in outer_d]).reshape(-1))
    _eltwise.gather_rows(s0.transpose(so).reshape(rows, run), run, idx, run,
                         d0.transpose(do).reshape(rows, run), run, s0.itemsize)
    return True


def copy_into(dst, src):
    """dst[...] = src for arrays of one shape: by the row gather or batched transposes of the
    level's kernels where both have one dtype, fill one block each and their memory orders
    differ as those move them; else by numpy's assignment (which casts as it goes)."""
    s0, d0 = np.squeeze(src), np.squeeze(dst)     # views without the axes of length 1
    so = dense_order(s0) if src.size > 1 and src.shape == dst.shape else None
    do = dense_order(d0) if so is not None else None
    if (do is not None and so != do and src.dtype == dst.dtype and src.itemsize in (2, 4, 8)
            and not np.may_share_memory(src, dst)):
        if _gather(s0, d0, so, do):
            return dst
        found = _swap(so, do)
        if found is not None:
            k, j = found
            sizes = [s0.shape[i] for i in so]
            na = int(np.prod(sizes[:k], dtype=np.int64))
            nb = int(np.prod(sizes[k:k + j], dtype=np.int64))
            nc = int(np.prod(sizes[k + j:], dtype=np.int64))
            if nb * nc >= _MIN_BLOCK and na <= _MAX_BATCH:
                s = s0.transpose(so).reshape(na, nb, nc)      # views: both are dense
                d = d0.transpose(do).reshape(na, nc, nb)
                isa = _runtime.active_isa_index()
                for a in range(na):
                    _eltwise.transpose(s[a], nb, nc, nc, d[a], nb, src.itemsize, isa)
                return dst
    dst[...] = src
    return dst


def contiguous(a):
    """a in C order: a itself when it is, else a copy (see :func:`copy_into`)."""
    if a.flags.c_contiguous:
        return a
    return copy_into(np.empty(a.shape, a.dtype), a)


def scratch(slot, shape, dtype):
    """A C-ordered array of `shape` and `dtype` for a temporary that dies inside the calling
    function: the calling thread's buffer `slot`, kept from call to call up to _SCRATCH_MAX
    bytes. Fresh memory costs a page fault per 4 KiB at its first touch (~2.5 us on these VMs:
    copies of q, k, v for one attention call, 9 MB, added ~6 ms to its 8.5)."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if n > _SCRATCH_MAX:
        return np.empty(shape, dtype)
    bufs = _local.__dict__.setdefault("bufs", {})
    b = bufs.get(slot)
    if b is None or b.nbytes < n:
        b = bufs[slot] = np.empty(max(n, 64), np.uint8)
    return b[:n].view(dtype).reshape(shape)


def dense(slot, a, shape, dtype):
    """a broadcast to `shape` in `dtype` and C order: a itself (reshaped) when it is already,
    else a copy in the thread's scratch buffer `slot` (see :func:`scratch`)."""
    if a.shape == tuple(shape) and a.dtype == dtype and a.flags.c_contiguous:
        return a
    out = scratch(slot, shape, dtype)
    if a.shape == tuple(shape) and a.dtype == dtype:
        return copy_into(out, a)
    np.copyto(out, np.broadcast_to(a, shape), casting="unsafe")
    return out
