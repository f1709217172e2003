/* Panel packing of the Goto GEMM (frame/pack.c), for frame/gemm_goto.c. dtype: enum
 * pytpp_dtype or PYTPP_MM_BF16; widen: bf16 operands become fp32 panels in vdpbf16ps order. */
#ifndef PYTPP_PACK_H
#define PYTPP_PACK_H
#include <stdint.h>

/* A block rows [0, mcb) x k [0, kcb) into mr-row panels (bf16: k pairs per row). */
void pytpp_pack_a(int dtype, int widen, const void *a, int64_t rsa, int64_t csa, int64_t mcb,
                  int64_t kcb, int64_t mr, void *dst);
/* B block k [0, kcb) x columns [0, ncb) into nr-column panels, zero-padded to nr. */
void pytpp_pack_b(int dtype, int widen, const void *b, int64_t rsb, int64_t csb, int64_t kcb,
                  int64_t ncb, int64_t nr, void *dst);
/* A bf16 B block kept in bf16 in the widened (pair-swapped) panel order: PackedMatrix storage. */
void pytpp_pack_b_bf16_kept(const uint16_t *b, int64_t rsb, int64_t csb, int64_t kcb, int64_t ncb,
                            int64_t nr, uint16_t *dst);
/* count bf16 values of such a block widened to fp32 (exact). */
void pytpp_pack_widen(const uint16_t *src, int64_t count, float *dst);
/* bf16 rows (element (i, p) at a[i*rsa + p*csa]) as fp32 rows of ld values, each k pair odd
 * element first (value p at p ^ 1), k zero-padded to even: the widened kernels' A side. */
void pytpp_pack_rows_bf16w(const uint16_t *a, int64_t rsa, int64_t csa, int64_t rows, int64_t k,
                           float *dst, int64_t ld);

#endif
