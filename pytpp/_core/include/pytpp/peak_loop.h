/* The FMA throughput loop behind `python -m pytpp info`, for any vector type: CHAINS independent
 * accumulator chains (enough to cover FMA latency x throughput) and a horizontal sum at the end. */
#ifndef PYTPP_PEAK_LOOP_H
#define PYTPP_PEAK_LOOP_H
#define PYTPP_PEAK_LOOP(NAME, CHAINS, VEC, SET1, FMA, ADD, HSUM, FLOPS_PER_OP)         \
    double NAME(int64_t iters, double *sink)                                           \
    {                                                                                  \
        VEC acc[CHAINS];                                                               \
        const VEC x = SET1(0.999999), y = SET1(1e-7);                                  \
        _Pragma("GCC unroll 16") for (int j = 0; j < CHAINS; ++j) acc[j] = SET1(j);    \
        for (int64_t i = 0; i < iters; ++i) {                                          \
            _Pragma("GCC unroll 16") for (int j = 0; j < CHAINS; ++j)                  \
                acc[j] = FMA(acc[j], x, y);                                            \
        }                                                                              \
        VEC s = acc[0];                                                                \
        for (int j = 1; j < CHAINS; ++j) s = ADD(s, acc[j]);                           \
        *sink = HSUM(s);                                                               \
        return (double)iters * CHAINS * (FLOPS_PER_OP);                                \
    }
#endif
