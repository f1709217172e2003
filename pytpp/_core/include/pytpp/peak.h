/* Tiny throughput loops for `python -m pytpp info`: they tell what this machine can do. */
#ifndef PYTPP_PEAK_H
#define PYTPP_PEAK_H
#include <stdint.h>
#include <stddef.h>

/* Each runs `iters` iterations of independent FMA chains and returns the flop count done.
 * The result sink keeps the compiler from deleting the work. */
double pytpp_peak_fma_f64_avx512(int64_t iters, double *sink);
double pytpp_peak_fma_f32_avx512(int64_t iters, double *sink);
double pytpp_peak_fma_f64_avx2(int64_t iters, double *sink);
double pytpp_peak_fma_f32_avx2(int64_t iters, double *sink);
double pytpp_peak_bf16_dot_avx512(int64_t iters, double *sink);
double pytpp_peak_int8_dot_avx512(int64_t iters, double *sink);
/* 8-bit products the way the kernels without VNNI do them (int16 pairs, vpmaddwd + vpaddd). */
double pytpp_peak_int8_madd_avx2(int64_t iters, double *sink);
double pytpp_peak_int8_madd_avx512(int64_t iters, double *sink);
/* 7-bit A x 8-bit B quads on AVX2 (vpmaddubsw + vpmaddwd by ones + vpaddd): the 7-bit kernels. */
double pytpp_peak_int8_u7_avx2(int64_t iters, double *sink);
/* vpdpbusd on ymm, VEX-encoded (AVX-VNNI, no AVX-512): 32 u8 x s8 products per instruction. */
double pytpp_peak_int8_dot_avx_vnni(int64_t iters, double *sink);
/* Bytes moved by reading `n` doubles once (sum, added to *sink) or copying n doubles with
 * ordinary stores (copy) or streaming stores (copy_nt). */
double pytpp_stream_read(const double *x, int64_t n, double *sink);
double pytpp_stream_copy(const double *x, double *y, int64_t n);
double pytpp_stream_copy_nt(const double *x, double *y, int64_t n);
/* A probe buffer (free() it): aligned and backed like numpy's large arrays (huge pages). */
void *pytpp_stream_alloc(size_t bytes);

#endif
