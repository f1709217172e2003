# cython: language_level=3, boundscheck=False, wraparound=False
"""Process-wide runtime of the engine: CPU features, the active ISA level, thread count, cache
sizes and the measurement loops behind ``python -m pytpp info``."""
import os
import time

from cython.parallel cimport prange, parallel
cimport openmp
from libc.stdint cimport int64_t, uint32_t
from libc.stdlib cimport malloc, free
from pytpp._core.cengine cimport *
from pytpp._core.celtwise cimport PYTPP_EW_N_UNARY, PYTPP_EW_N_BINARY
from pytpp._core.cdispatch cimport (pytpp_i8_kernel_list, PYTPP_I8_NKERNELS,
                                     pytpp_levels, pytpp_level_kernels, pytpp_bf16_select,
                                     pytpp_bf16_kernels, pytpp_dispatch_missing, PYTPP_BF16_AUTO,
                                     PYTPP_BF16_NKERNELS)
from pytpp._core.cengine cimport pytpp_table_info

LEVELS = ("ref", "avx2", "avx512")

cdef uint32_t _features = pytpp_cpu_features()
cdef int _best = pytpp_cpu_best_isa(_features)
cdef int _active = _best
cdef int _threads = 1
cdef pytpp_cache_info _cache
_cache.l1, _cache.l2, _cache.l3 = PYTPP_DEFAULT_L1, PYTPP_DEFAULT_L2, PYTPP_DEFAULT_L3
# cache sizes assumed when sysfs reports none (tuning.h)
DEFAULT_CACHE = {1: PYTPP_DEFAULT_L1, 2: PYTPP_DEFAULT_L2, 3: PYTPP_DEFAULT_L3}

# OpenMP's own thread limit of the calling thread at import: when something lowers it later
# (threadpoolctl's threadpool_limits(user_api="openmp"), omp_set_num_threads), pytpp follows.
cdef int _omp_initial = openmp.omp_get_max_threads()
# OMP_THREAD_LIMIT: no team is ever larger
cdef int _omp_limit = openmp.omp_get_thread_limit()


cdef int num_threads() noexcept nogil:
    cdef int omp = openmp.omp_get_max_threads()
    cdef int n = omp if omp < _omp_initial and omp < _threads else _threads
    return n if n <= _omp_limit else _omp_limit

cdef int active_isa() noexcept nogil:
    return _active

cdef const pytpp_cache_info *cache_info() noexcept nogil:
    return &_cache

cdef uint32_t features() noexcept nogil:
    return _features

cdef const pytpp_level_kernels *level(int isa) noexcept nogil:
    return &pytpp_levels[isa]


_FEATURE_NAMES = (
    ("avx2", PYTPP_FEAT_AVX2), ("fma", PYTPP_FEAT_FMA), ("f16c", PYTPP_FEAT_F16C),
    ("avx512f", PYTPP_FEAT_AVX512F), ("avx512bw", PYTPP_FEAT_AVX512BW),
    ("avx512dq", PYTPP_FEAT_AVX512DQ), ("avx512vl", PYTPP_FEAT_AVX512VL),
    ("avx512_bf16", PYTPP_FEAT_AVX512_BF16), ("avx512_vnni", PYTPP_FEAT_AVX512_VNNI),
    ("os_avx", PYTPP_FEAT_OS_AVX), ("os_avx512", PYTPP_FEAT_OS_AVX512),
    ("avx_vnni", PYTPP_FEAT_AVX_VNNI),
)


def cpu_features():
    """Names of the ISA features this CPU and OS support."""
    return tuple(name for name, bit in _FEATURE_NAMES if _features & bit)


def has_feature(str name):
    for n, bit in _FEATURE_NAMES:
        if n == name:
            return bool(_features & bit)
    raise ValueError(f"unknown feature {name!r}")


def cpu_brand():
    cdef char buf[64]
    pytpp_cpu_brand(buf)
    return buf.decode("ascii", "replace").strip()


def best_isa():
    """Highest ISA level this machine can run."""
    return LEVELS[_best]


def get_isa():
    return LEVELS[_active]


def active_isa_index():
    return _active


def isa_index(level):
    if level not in LEVELS:
        raise ValueError(f"ISA level must be one of {LEVELS}, got {level!r}")
    return LEVELS.index(level)


def set_isa(str level):
    """Make `level` the active ISA level; raises ValueError if this CPU cannot run it."""
    global _active
    cdef int idx = isa_index(level)
    if idx > _best:
        raise ValueError(f"ISA level {level!r} is not available on this CPU (best: {LEVELS[_best]!r})")
    _active = idx


def vector_width(bint f64):
    """Elements per vector register of the active level's BRGEMM table (1 at the ref level)."""
    return level(active_isa()).brgemm[PYTPP_F64 if f64 else PYTPP_F32].vl


def get_num_threads():
    """pytpp's thread setting."""
    return _threads


def effective_num_threads():
    """Threads the next kernel call from this thread uses: the setting, or fewer when OpenMP's
    own limit was lowered since import."""
    return num_threads()


def set_num_threads(int n):
    global _threads
    if n < 1:
        raise ValueError(f"number of threads must be >= 1, got {n}")
    _threads = n


def set_cache_info(int64_t l1, int64_t l2, int64_t l3):
    _cache.l1, _cache.l2, _cache.l3 = l1, l2, l3


def get_cache_info():
    return {"l1d": _cache.l1, "l2": _cache.l2, "l3": _cache.l3}


ctypedef double (*peak_fn)(int64_t, double *) noexcept nogil


cdef peak_fn _peak_kernel(str kind) except? NULL:
    if kind == "f64":
        if _best >= PYTPP_ISA_AVX512:
            return pytpp_peak_fma_f64_avx512
        if _best >= PYTPP_ISA_AVX2:
            return pytpp_peak_fma_f64_avx2
    elif kind == "f32":
        if _best >= PYTPP_ISA_AVX512:
            return pytpp_peak_fma_f32_avx512
        if _best >= PYTPP_ISA_AVX2:
            return pytpp_peak_fma_f32_avx2
    elif kind == "bf16":
        if _best >= PYTPP_ISA_AVX512 and _features & PYTPP_FEAT_AVX512_BF16:
            return pytpp_peak_bf16_dot_avx512
    elif kind == "int8":
        # the instruction the 8-bit kernels of the best level run: vpdpbusd, else vpmaddwd
        if _best >= PYTPP_ISA_AVX512 and _features & PYTPP_FEAT_AVX512_VNNI:
            return pytpp_peak_int8_dot_avx512
        if _best >= PYTPP_ISA_AVX512:
            return pytpp_peak_int8_madd_avx512
        if _best >= PYTPP_ISA_AVX2 and _features & PYTPP_FEAT_AVX_VNNI:
            return pytpp_peak_int8_dot_avx_vnni
        if _best >= PYTPP_ISA_AVX2:
            return pytpp_peak_int8_madd_avx2
    elif kind == "int8_7bit":
        # the AVX2 level's 7-bit kernels (vpmaddubsw); the AVX-512 levels have none
        if _best == PYTPP_ISA_AVX2:
            return pytpp_peak_int8_u7_avx2
    else:
        raise ValueError(f"unknown peak kind {kind!r}")
    return NULL


def measure_peak(str kind, int threads=1, int64_t iters=2000000, int repeats=5):
    """Best-of-`repeats` rate (GFLOP/s or GOP/s) of an FMA/dot-product loop on `threads` threads,
    or None when this CPU has no such instruction."""
    cdef peak_fn fn = _peak_kernel(kind)
    if fn == NULL:
        return None
    cdef double flops = 0.0, sink = 0.0
    cdef int t
    best = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        with nogil:
            if threads == 1:
                flops = fn(iters, &sink)
            else:
                flops = 0.0
                for t in prange(threads, num_threads=threads, schedule="static"):
                    flops += fn(iters, &sink)
        dt = time.perf_counter() - t0
        best = max(best, flops / dt / 1e9)
    return best


def measure_bandwidth(int64_t nbytes=256 * 1024 * 1024, int threads=1, int repeats=5):
    """Best-of-`repeats` memory bandwidth in GB/s over two buffers of `nbytes` each (choose them
    well beyond L3), as (read, copy with ordinary stores, copy with streaming stores); a copy
    counts the bytes read plus the bytes written. Buffers are backed like numpy's large arrays
    (huge pages); each thread works on its own slice, first touched by that thread."""
    cdef int64_t n = nbytes // 8
    cdef double *x = <double *>pytpp_stream_alloc(n * 8)
    cdef double *y = <double *>pytpp_stream_alloc(n * 8)
    cdef double sink = 0.0, moved = 0.0
    cdef int64_t i, lo, hi
    cdef int t, which
    if x == NULL or y == NULL:
        free(x); free(y)
        raise MemoryError()
    try:
        with nogil:
            for i in prange(n, num_threads=threads, schedule="static"):
                x[i] = 1.0
                y[i] = 0.0
        # kinds interleaved, so a moment of slow memory (host contention) spoils one run of
        # each kind rather than every run of one
        rates = [0.0, 0.0, 0.0]
        for _ in range(repeats):
            for which in range(3):
                t0 = time.perf_counter()
                with nogil:
                    moved = 0.0
                    for t in prange(threads, num_threads=threads, schedule="static"):
                        lo = n * t // threads
                        hi = n * (t + 1) // threads
                        if which == 0:
                            moved += pytpp_stream_read(x + lo, hi - lo, &sink)
                        elif which == 1:
                            moved += pytpp_stream_copy(x + lo, y + lo, hi - lo)
                        else:
                            moved += pytpp_stream_copy_nt(x + lo, y + lo, hi - lo)
                dt = time.perf_counter() - t0
                rates[which] = max(rates[which], moved / dt / 1e9)
        return tuple(rates)
    finally:
        free(x)
        free(y)


cdef dict table_info(const pytpp_table_info *info):
    cdef int i = 0
    kernels = []
    while info.kernels[i] != NULL:
        kernels.append(info.kernels[i].decode())
        i += 1
    return {"symbol": info.symbol.decode(), "source": info.source.decode(), "kernels": kernels}


def kernel_tables(int isa):
    """The tables level `isa` runs, from the dispatch table: {family: {dtype: info}} with each
    table's symbol, template, kernel symbols, and the register block or op slots that name its
    main kernels (for show_config and `python -m pytpp info --kernels`)."""
    if not 0 <= isa < PYTPP_NISA:
        raise ValueError(f"no ISA level {isa}")
    cdef const pytpp_level_kernels *lv = level(isa)   # (data only: nothing of it runs here)
    cdef int dt, f, op
    res = {"brgemm": {}, "gemm": {}, "matmul": {}, "eltwise": {}, "norm": {}, "optim": {},
           "embedding": {}, "equation": {}, "pool": {}}
    for dt, name in ((PYTPP_F64, "f64"), (PYTPP_F32, "f32")):
        info = table_info(&lv.brgemm[dt].info)
        nv = lv.brgemm[dt].nv_main
        info["main"] = (lv.brgemm[dt].mr_max[nv], nv)
        res["brgemm"][name] = info
        res["gemm"][name] = [table_info(&lv.smm[dt][f].info) for f in range(lv.smm_flavours)]
        info = table_info(&lv.packed[dt].info)
        info["main"] = (lv.packed[dt].mr_main, lv.packed[dt].nv_main)
        res["matmul"][name] = info
        ew = lv.eltwise[dt]
        info = table_info(&ew.info)
        info["unary"] = [ew.unary_symbols[op].decode() for op in range(PYTPP_EW_N_UNARY)]
        info["binary"] = [ew.binary_symbols[op].decode() for op in range(PYTPP_EW_N_BINARY)]
        res["eltwise"][name] = info
        res["norm"][name] = table_info(&lv.norm[dt].info)
        res["optim"][name] = table_info(&lv.optim[dt].info)
        res["embedding"][name] = table_info(&lv.embedding[dt].info)
        res["equation"][name] = table_info(&lv.equation[dt].info)
        res["pool"][name] = table_info(&lv.pool[dt].info)
    bf16 = pytpp_bf16_select(isa, _features, PYTPP_BF16_AUTO)
    info = table_info(&bf16.info)
    info["main"] = (bf16.mr_main, bf16.nv_main)
    res["matmul"]["bf16"] = info
    return res


def missing_kernels(int isa):
    """Required kernel slots of level `isa` that are empty (0 for a sound dispatch table)."""
    return pytpp_dispatch_missing(isa)


def bf16_tables():
    """{name: info} of every bf16 GEMM table (dispatch.h's list), whatever this CPU runs."""
    cdef int i
    res = {}
    for i in range(1, PYTPP_BF16_NKERNELS):
        res[pytpp_bf16_kernels[i].name.decode()] = table_info(&pytpp_bf16_kernels[i].kt.info)
    return res


def i8_tables():
    """{name: info} of every lane GEMM table (dispatch.h's 8-bit list, the levels' bf16 lane
    tables), whatever this CPU runs."""
    cdef int i
    res = {}
    for i in range(1, PYTPP_I8_NKERNELS):
        res[pytpp_i8_kernel_list[i].name.decode()] = table_info(&pytpp_i8_kernel_list[i].kt.info)
    for i in range(PYTPP_NISA):   # the bf16 lane tables of the levels that have them
        if pytpp_levels[i].bf16_lanes != NULL:
            res[f"bf16 lanes {pytpp_levels[i].name.decode()}"] = table_info(
                &pytpp_levels[i].bf16_lanes.info)
    return res
