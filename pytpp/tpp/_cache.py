"""The cache of dispatched kernel handles, shared by every TPP family.

One handle per descriptor: a handle is immutable after dispatch, so threads share it; two
threads dispatching one new descriptor at once both get the handle that was stored first.
"""
from __future__ import annotations

import threading

_handles = {}
_lock = threading.Lock()


def lookup(key):
    """The cached handle of `key`, or None."""
    return _handles.get(key)


def store(key, kern):
    """Cache `kern` under `key` unless another thread stored one first; returns the cached one."""
    with _lock:
        return _handles.setdefault(key, kern)


def clear() -> None:
    """Forget every dispatched kernel handle (BRGEMM, GEMM, element-wise and transforms).

    Later dispatches make new handles; handles obtained before keep working.

    >>> import pytpp
    >>> k = pytpp.tpp.gemm(2, 2, 2)
    >>> pytpp.tpp.clear_cache()
    >>> pytpp.tpp.gemm(2, 2, 2) is k
    False
    """
    with _lock:
        _handles.clear()


def rebuild(factory, args, kwargs):
    """Unpickling of a handle: dispatch its descriptor again, for the loading process's CPU and
    ISA level."""
    return factory(*args, **kwargs)
