/* Memory-bandwidth probes for `python -m pytpp info`: a read (sum), a copy with ordinary stores
 * and a copy with streaming stores, all vectorised (SSE2, in every x86-64 baseline; the streaming
 * copy with AVX where present, as the kernels store). The copies are written out, not memcpy:
 * glibc's memcpy picks ordinary or streaming stores by a size threshold of its own, so its rate
 * would depend on the buffer size instead of on the store kind we ask for. */
#include "pytpp/peak.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>
#endif

/* Probe buffers as numpy allocates large arrays on Linux: 2 MiB aligned, transparent huge pages
 * requested. With 4 KiB pages the probe pays TLB misses the arrays it is compared with do not
 * (streaming copy 22-25 GB/s instead of 26-32 on one Zen 3 core). */
void *pytpp_stream_alloc(size_t bytes)
{
    const size_t huge = (size_t)2 << 20;
    void *p = NULL;
    bytes = (bytes + huge - 1) / huge * huge;
    if (posix_memalign(&p, huge, bytes) != 0) return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

/* elements before x reaches a 16-byte boundary (at most n) */
static int64_t head_to_16(const double *x, int64_t n)
{
    int64_t h = (int64_t)(((16 - (uintptr_t)x % 16) % 16) / sizeof(double));
    return h < n ? h : n;
}

double pytpp_stream_read(const double *x, int64_t n, double *sink)
{
    double s = 0;
    int64_t i = head_to_16(x, n);
    for (int64_t k = 0; k < i; ++k) s += x[k];
#if defined(__SSE2__)
    /* four independent sums: one add chain would be latency-bound below memory speed */
    __m128d a0 = _mm_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    for (; i + 8 <= n; i += 8) {
        a0 = _mm_add_pd(a0, _mm_load_pd(x + i));
        a1 = _mm_add_pd(a1, _mm_load_pd(x + i + 2));
        a2 = _mm_add_pd(a2, _mm_load_pd(x + i + 4));
        a3 = _mm_add_pd(a3, _mm_load_pd(x + i + 6));
    }
    double lanes[2];
    _mm_storeu_pd(lanes, _mm_add_pd(_mm_add_pd(a0, a1), _mm_add_pd(a2, a3)));
    s += lanes[0] + lanes[1];
#endif
    for (; i < n; ++i) s += x[i];
    *sink += s;
    return (double)n * sizeof(double);
}

/* y = x; streaming != 0: non-temporal stores (no read-for-ownership of y, which ordinary stores
 * pay: the line is read before it is overwritten), then a fence. */
static double stream_copy(const double *x, double *y, int64_t n, int streaming)
{
    int64_t i = head_to_16(y, n);
    for (int64_t k = 0; k < i; ++k) y[k] = x[k];
#if defined(__SSE2__)
    if (streaming) {
        for (; i + 8 <= n; i += 8) {
            const __m128d a = _mm_loadu_pd(x + i), b = _mm_loadu_pd(x + i + 2);
            const __m128d c = _mm_loadu_pd(x + i + 4), d = _mm_loadu_pd(x + i + 6);
            _mm_stream_pd(y + i, a);
            _mm_stream_pd(y + i + 2, b);
            _mm_stream_pd(y + i + 4, c);
            _mm_stream_pd(y + i + 6, d);
        }
        _mm_sfence();
    } else {
        for (; i + 8 <= n; i += 8) {
            const __m128d a = _mm_loadu_pd(x + i), b = _mm_loadu_pd(x + i + 2);
            const __m128d c = _mm_loadu_pd(x + i + 4), d = _mm_loadu_pd(x + i + 6);
            _mm_store_pd(y + i, a);
            _mm_store_pd(y + i + 2, b);
            _mm_store_pd(y + i + 4, c);
            _mm_store_pd(y + i + 6, d);
        }
    }
#else
    (void)streaming;
#endif
    for (; i < n; ++i) y[i] = x[i];
    return 2.0 * (double)n * sizeof(double);
}

double pytpp_stream_copy(const double *x, double *y, int64_t n)
{
    return stream_copy(x, y, n, 0);
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The element-wise kernels stream 32-byte vectors; 16-byte streaming stores copy ~10% slower
 * here. A target region (DESIGN.md 4), run only after the cpu check. */
__attribute__((target("avx"))) static void stream_copy_nt_avx(const double *x, double *y, int64_t n)
{
    int64_t i = (int64_t)(((32 - (uintptr_t)y % 32) % 32) / sizeof(double));
    if (i > n) i = n;
    for (int64_t k = 0; k < i; ++k) y[k] = x[k];
    for (; i + 8 <= n; i += 8) {
        const __m256d a = _mm256_loadu_pd(x + i), b = _mm256_loadu_pd(x + i + 4);
        _mm256_stream_pd(y + i, a);
        _mm256_stream_pd(y + i + 4, b);
    }
    _mm_sfence();
    for (; i < n; ++i) y[i] = x[i];
}
#endif

double pytpp_stream_copy_nt(const double *x, double *y, int64_t n)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx")) {
        stream_copy_nt_avx(x, y, n);
        return 2.0 * (double)n * sizeof(double);
    }
#endif
    return stream_copy(x, y, n, 1);
}
