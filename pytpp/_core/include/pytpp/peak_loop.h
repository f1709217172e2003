/* The FMA throughput loop behind `python -m pytpp info`, for any vector type: CHAINS independent
 * accumulator chains (enough to cover FMA latency x throughput) and a horizontal sum at the end. */
#ifndef PYTPP_PEAK_LOOP_H
#define PYTPP_PEAK_LOOP_H
#include <stdint.h>
#include <string.h>
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

/* The 8-bit GEMM step's throughput: a ROWS x COLS block of accumulators run over 64 steps of
 * operands in L1, each step broadcasting a 32-bit lane per row and loading COLS vectors (as the
 * kernels do). The operands are filled at run time with values like the kernels' (A_LANE(j),
 * B_LANE(j): the j-th 32-bit lane of A and B): a loop on constant operands lets the compiler
 * hoist (or, with a zero operand, delete) the multiply and then reports the rate of the adds
 * alone, and the multiplier's rate depends on the data (Zen 3: vpmaddwd on int16 values near
 * 2^15 ran 25% slower than on widened 8-bit ones). */
#define PYTPP_PEAK_BCAST_STEPS 64
#define PYTPP_PEAK_BCAST_LOOP(NAME, ROWS, COLS, VEC, VL, LOAD, STORE, SET1_EPI32, MADD, ADD,   \
                              HSUM, OPS_PER_OP, A_LANE, B_LANE)                              \
    static __attribute__((noinline)) void NAME##_block(int64_t steps, const int32_t *a,       \
                                                       int64_t lda, const int32_t *b,       \
                                                       int32_t *c)                          \
    {                                                                                       \
        VEC acc[ROWS][COLS];                                                                \
        _Pragma("GCC unroll 16") for (int r = 0; r < (ROWS); ++r)                           \
            _Pragma("GCC unroll 16") for (int v = 0; v < (COLS); ++v)                       \
                acc[r][v] = SET1_EPI32(0);                                                  \
        for (int64_t s = 0; s < steps; ++s) {                                               \
            VEC bv[COLS];                                                                   \
            _Pragma("GCC unroll 16") for (int v = 0; v < (COLS); ++v)                       \
                bv[v] = LOAD(b + v * (VL));                                                 \
            _Pragma("GCC unroll 16") for (int r = 0; r < (ROWS); ++r) {                     \
                const VEC x = SET1_EPI32(a[r * lda]);                                       \
                _Pragma("GCC unroll 16") for (int v = 0; v < (COLS); ++v)                   \
                    acc[r][v] = MADD(acc[r][v], x, bv[v]);                                  \
            }                                                                               \
            a += 1;                                                                         \
            b += (COLS) * (VL);                                                             \
        }                                                                                   \
        _Pragma("GCC unroll 16") for (int r = 0; r < (ROWS); ++r)                           \
            _Pragma("GCC unroll 16") for (int v = 0; v < (COLS); ++v)                       \
                STORE(c + (r * (COLS) + v) * (VL), acc[r][v]);                              \
    }                                                                                       \
    double NAME(int64_t iters, double *sink)                                                \
    {                                                                                       \
        enum { S = PYTPP_PEAK_BCAST_STEPS, NB = S * (COLS) * (VL), NC = (ROWS) * (COLS) * (VL) }; \
        _Alignas(64) int32_t a[(ROWS) * S], b[NB], c[NC];                                   \
        for (int j = 0; j < (ROWS) * S; ++j) a[j] = A_LANE((uint32_t)j + (uint32_t)iters);  \
        for (int j = 0; j < NB; ++j) b[j] = B_LANE((uint32_t)j);                            \
        const int64_t blocks = iters / S;                                                   \
        double total = 0.0;                                                                 \
        /* run-time sizes: a copy of the block specialised to constants (GCC's constprop)     \
         * schedules the broadcasts early and spills accumulators (-40%) */                 \
        volatile int64_t steps_rt = S;                                                      \
        const int64_t steps = steps_rt;                                                     \
        for (int64_t i = 0; i < blocks; ++i) {                                              \
            NAME##_block(steps, a, steps, b, c);                                            \
            total += (double)c[i % NC];                                                     \
        }                                                                                   \
        VEC s = LOAD(c);                                                                    \
        for (int j = 1; j < (ROWS) * (COLS); ++j) s = ADD(s, LOAD(c + j * (VL)));           \
        *sink = HSUM(s) + total;                                                            \
        return (double)blocks * S * (ROWS) * (COLS) * (OPS_PER_OP);                         \
    }
#endif
