"""Process-wide configuration: ISA level (capped by PYTPP_ISA), threads, cache sizes."""
from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator

from pytpp._core import _runtime

LEVELS = _runtime.LEVELS


def _read_cache_sizes():
    """L1d, L2 (per core) and L3 (total) in bytes, from sysfs; defaults when it says nothing."""
    sizes = dict(_runtime.DEFAULT_CACHE)
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in sorted(os.listdir(base)):
            path = os.path.join(base, entry)
            try:
                with open(os.path.join(path, "level")) as f:
                    level = int(f.read())
                with open(os.path.join(path, "type")) as f:
                    kind = f.read().strip()
                with open(os.path.join(path, "size")) as f:
                    text = f.read().strip()
            except OSError:
                continue
            if kind == "Instruction":
                continue
            mult = {"K": 1024, "M": 1024 * 1024, "G": 1024 ** 3}.get(text[-1:], 1)
            value = int(text.rstrip("KMG")) * mult
            if level in sizes and value > 0:
                sizes[level] = value
    except OSError:
        pass
    return sizes[1], sizes[2], sizes[3]


def _cpus():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _default_threads():
    for var in ("PYTPP_NUM_THREADS", "OMP_NUM_THREADS"):
        raw = os.environ.get(var, "")
        value = raw.split(",")[0].strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
        if var == "PYTPP_NUM_THREADS" and raw.strip():
            warnings.warn(f"pytpp: ignoring PYTPP_NUM_THREADS={raw!r}: expected a positive "
                          f"integer", RuntimeWarning, stacklevel=3)
    return _cpus()


def _apply_env_isa():
    raw = os.environ.get("PYTPP_ISA", "")
    cap = raw.strip().lower()
    if not cap:
        return
    if cap not in LEVELS:
        warnings.warn(f"pytpp: ignoring PYTPP_ISA={raw!r}: expected one of {', '.join(LEVELS)}; "
                      f"using {_runtime.best_isa()!r}", RuntimeWarning, stacklevel=3)
        return
    best = LEVELS.index(_runtime.best_isa())
    _runtime.set_isa(LEVELS[min(best, LEVELS.index(cap))])


def available_isas() -> tuple[str, ...]:
    """The ISA levels this machine can run, lowest first (tests run each of them)."""
    return LEVELS[: LEVELS.index(_runtime.best_isa()) + 1]


def get_isa() -> str:
    """The ISA level kernels are dispatched for now."""
    return _runtime.get_isa()


def set_isa(level: str) -> None:
    """Dispatch kernels for `level` ('ref', 'avx2' or 'avx512') from now on.

    Raises ValueError if the CPU cannot run that level, TypeError if `level` is not a string.
    """
    _runtime.set_isa(_level_name(level, "pytpp.set_isa"))


def _level_name(level, fn):
    """`level` as the plain str the runtime takes (numpy's str_ included)."""
    if not isinstance(level, str):
        raise TypeError(f"{fn}: level must be a str such as 'avx2', got {type(level).__name__}")
    return str(level)


@contextlib.contextmanager
def use_isa(level: str) -> Iterator[str]:
    """Context manager: run the enclosed calls at ISA `level`, then restore the previous one.

    >>> import pytpp
    >>> with pytpp.use_isa("ref"):
    ...     pytpp.get_isa()
    'ref'
    """
    previous = _runtime.get_isa()
    _runtime.set_isa(_level_name(level, "pytpp.use_isa"))
    try:
        yield level
    finally:
        _runtime.set_isa(previous)


def get_num_threads() -> int:
    """Threads pytpp kernels use (process-wide; read at every call). Fewer than set when
    OpenMP's limit was lowered since import (``threadpoolctl.threadpool_limits(n,
    user_api="openmp")``)."""
    return _runtime.effective_num_threads()


def set_num_threads(n: int) -> None:
    """Set the threads pytpp kernels use, process-wide.

    More threads than the CPUs this process may use is allowed but warned about: every kernel
    then waits for threads that share a core.

    >>> import pytpp
    >>> old = pytpp.get_num_threads(); pytpp.set_num_threads(1); pytpp.get_num_threads()
    1
    >>> pytpp.set_num_threads(old)
    """
    import numpy as np
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"pytpp.set_num_threads: n must be an int, got {type(n).__name__}")
    n = int(n)
    if n < 1:
        raise ValueError(f"pytpp.set_num_threads: n must be >= 1, got {n}")
    if n > _cpus():
        warnings.warn(f"pytpp.set_num_threads({n}): more threads than the {_cpus()} CPUs this "
                      f"process may use (oversubscription slows every kernel)", RuntimeWarning,
                      stacklevel=2)
    _runtime.set_num_threads(n)


def _init():
    _runtime.set_cache_info(*_read_cache_sizes())
    _runtime.set_num_threads(_default_threads())
    _apply_env_isa()


def get_include() -> str:
    """Directory of pytpp's C headers, for Cython/C extensions that cimport pytpp's kernels.

    >>> import os, pytpp
    >>> os.path.exists(os.path.join(pytpp.get_include(), "pytpp", "gemm.h"))
    True
    """
    return os.path.join(os.path.dirname(os.path.abspath(_runtime.__file__)), "include")
