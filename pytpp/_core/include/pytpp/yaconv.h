/* YaConv (thesis 002 ch. 5): a stride-1 convolution with no im2col and one packed image.
 *
 * The NHWC image of one sample, read as a matrix of H rows of W*C elements, is packed once into
 * tiles of T image rows, each tile [Wp][C][T] with the left/right zero padding inserted: the
 * micro-kernel's A operand for (tile, output column q, one kernel row) is then a contiguous
 * [S*C] x [T] run (k = S*C channels-and-taps, unit stride between the rows). One micro-kernel
 * call applies one kernel row r of nr filters to up to MR rows of a tile at output column q and
 * adds the result into output rows h - r + top: the sum over the R kernel rows happens in the
 * output (the thesis' "one-row convolutions"), not in the kernel. The image rows whose output
 * row falls outside [0, P) (the thesis' spill-over, for which it reserves an output spill buffer)
 * are never computed: the level's table has every smaller MR, so the calls are clipped to the
 * rows that land in the output (and cut into near-equal calls; T comes from a cost model of
 * those calls, yaconv.c).
 *
 * The weights are the conv engine's packed panels (conv.h, groups = 1): for kernel row r and a
 * channel block, the S taps are S runs of [channels][nr] in the panel. */
#ifndef PYTPP_YACONV_H
#define PYTPP_YACONV_H
#include <stdint.h>
#include "pytpp/conv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out (N, P, Q, K) C-contiguous = act(conv(x, w) + bias) at stride 1, dilation 1, one group.
 * s: H and W are the UNPADDED input sizes, P and Q the output sizes, sh = sw = dh = dw = 1;
 * pt and pl the top and left zero padding (bottom and right follow from P and Q). x is NHWC with
 * element strides (sn, sxh, sxw, 1); wpk the packed weight of pytpp_conv_pack_weight with panel
 * width nr (one group); bias K elements or NULL. Threads share one image at a time.
 * Returns 0, or -1 when the packed image cannot be allocated. */
int pytpp_yaconv_forward(const pytpp_gemm_kernels *gk, const pytpp_ew_kernels *ew,
                         const pytpp_conv_shape *s, int64_t pt, int64_t pl, const void *x,
                         int64_t sn, int64_t sxh, int64_t sxw, const void *wpk, int64_t nr,
                         const void *bias, int act, void *out, int nthreads);

#ifdef __cplusplus
}
#endif
#endif
