/* Scaled dot-product attention, forward, fused (paper 003's MHA with the softmax fused between
 * two BRGEMMs). Two loop structures (pytpp_sdpa_forward's path):
 * - full rows (up to S = 16384 by default): per register block of queries, the scores against
 *   every key (micro-kernel calls on K^T packed into panels once per batch entry), the softmax
 *   numerators of each row in one pass while it is in L1, and P @ V as one product over all
 *   keys (V packed alike) written once into o, divided by the sums;
 * - tiles (flash-attention style): per block of 64 queries, the scores against one block of 128
 *   keys at a time, the running row maximum and sum rescaling the output accumulator (the
 *   online softmax), and P @ V accumulated block by block.
 * No (L, S) matrix is formed: per thread, the packed K and V (or K^T) of one batch entry and one
 * block's scores. */
#ifndef PYTPP_ATTENTION_H
#define PYTPP_ATTENTION_H
#include <stdint.h>
#include "pytpp/gemm.h"
#include "pytpp/eltwise.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Dropout of the probabilities (training): element (b, i, j) of the (batch, L, S) matrix is
 * kept, times keep = 1 / (1 - p), when word (b * L + i) * S + j of the Philox stream of `seed`
 * (philox.h) is at least thresh = p * 2^32: the mask pytpp.nn.dropout draws for that matrix. The
 * softmax denominators are taken before dropping. */
typedef struct pytpp_sdpa_dropout {
    uint64_t seed;
    uint32_t thresh;
    double keep;
} pytpp_sdpa_dropout;

/* q (batch, L, E), k (batch, S, E), v (batch, S, Ev), o (batch, L, Ev): C-contiguous, of the
 * tables' dtype. mask: additive scores (NULL for none) read at
 * mask[b * msb + i * msl + j * mss] (element strides; 0 broadcasts). causal: key j is kept for
 * query i when j <= i. A row whose every key is masked gives zeros (torch's safe softmax).
 * path: PYTPP_SDPA_AUTO, or one of the two loop structures (tests run both on small shapes):
 * PYTPP_SDPA_TILES (keys in tiles of 128, online softmax; per thread K^T of one batch entry) or
 * PYTPP_SDPA_FULL_ROWS (a register block of queries against all keys at once, one P @ V product;
 * per thread K and V of one batch entry, packed; auto picks it up to S = 16384).
 * Returns 0, or -1 when a thread's buffers cannot be allocated. */
enum pytpp_sdpa_path { PYTPP_SDPA_AUTO = 0, PYTPP_SDPA_TILES = 1, PYTPP_SDPA_FULL_ROWS = 2 };
int pytpp_sdpa_forward(const pytpp_gemm_kernels *gk, const pytpp_ew_kernels *ew, int64_t batch,
                       int64_t L, int64_t S, int64_t E, int64_t Ev, const void *q, const void *k,
                       const void *v, void *o, const void *mask, int64_t msb, int64_t msl,
                       int64_t mss, int causal, double scale, const pytpp_sdpa_dropout *drop,
                       int path, int nthreads);

/* Backward: go = dO (batch, L, Ev); dq (batch, L, E), dk (batch, S, E), dv (batch, S, Ev)
 * written (C-contiguous); the rest as pytpp_sdpa_forward (the same mask, causal, scale and
 * dropout stream). P is recomputed; D = rowsum(dO * O) is taken as rowsum(dP * P). Per thread:
 * K^T, V^T, K, Q, dO of one batch entry in panels and P, dS of one block of queries (about
 * 256 KiB), never (L, S). Threads take whole batch entries, or query blocks of each entry
 * (partial dK, dV per thread, summed). Returns 0, or -1 when buffers cannot be allocated. */
int pytpp_sdpa_backward(const pytpp_gemm_kernels *gk, const pytpp_ew_kernels *ew, int64_t batch,
                        int64_t L, int64_t S, int64_t E, int64_t Ev, const void *q,
                        const void *k, const void *v, const void *go, void *dq, void *dk,
                        void *dv, const void *mask, int64_t msb, int64_t msl, int64_t mss,
                        int causal, double scale, const pytpp_sdpa_dropout *drop, int nthreads);

#ifdef __cplusplus
}
#endif
#endif
