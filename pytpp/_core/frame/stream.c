/* Memory-bandwidth probes for `python -m pytpp info` (portable C; the compiler vectorises them). */
#include "pytpp/peak.h"
#include <string.h>

double pytpp_stream_read(const double *x, int64_t n, double *sink)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) { s0 += x[i]; s1 += x[i + 1]; s2 += x[i + 2]; s3 += x[i + 3]; }
    for (; i < n; ++i) s0 += x[i];
    *sink = s0 + s1 + s2 + s3;
    return (double)n * sizeof(double);
}

double pytpp_stream_copy(const double *x, double *y, int64_t n)
{
    memcpy(y, x, (size_t)n * sizeof(double));
    return 2.0 * (double)n * sizeof(double);
}
