/* Memory-bandwidth probes for `python -m pytpp info`: a read (sum), a copy with ordinary stores
 * and a copy with streaming stores, all vectorised (SSE2 is in every x86-64 baseline: 16-byte
 * vectors saturate memory as well as wider ones do). The copies are written out, not memcpy:
 * glibc's memcpy picks ordinary or streaming stores by a size threshold of its own, so its rate
 * would depend on the buffer size instead of on the store kind we ask for. */
#include "pytpp/peak.h"
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

double pytpp_stream_copy_nt(const double *x, double *y, int64_t n)
{
    return stream_copy(x, y, n, 1);
}
