/* What every convolution path runs (conv.h): the register-block sweep (pytpp_conv_sweep: a row
 * of near-equal register blocks down m rows for each chunk of one register block's columns),
 * the bias + activation epilogue on output rows (pytpp_conv_epilogue) and the transpose of
 * elements of any width (pytpp_conv_transpose). */
#include "pytpp/conv.h"
#include "pytpp/partition.h"

void pytpp_conv_sweep(const pytpp_gemm_kernels *gk, int64_t esz, int64_t m, int64_t ncol,
                      int64_t k, int64_t nb, const void *const *ap, int64_t rsa, int64_t csa,
                      const void *const *bp, int64_t ldb, int64_t bstep, char *c, int64_t ldc,
                      double beta)
{
    const int64_t vl = gk->vl, nvec = cdiv(ncol, vl);
    for (int64_t v0 = 0; v0 < nvec; v0 += gk->nv_main) {
        const int64_t nv = imin(gk->nv_main, nvec - v0);
        const int masked = (v0 + nv) * vl > ncol;
        const int64_t n_last = ncol - (v0 + nv - 1) * vl;
        const int64_t mr = gk->mr_max[nv], nib = cdiv(m, mr);
        for (int64_t ib = 0, i0 = 0; ib < nib; ++ib) {
            /* near-equal row blocks: 56 rows on 6-row blocks are 6 x 6 + 4 x 5, never a 2 */
            const int64_t mi = m / nib + (ib < m % nib);
            gk->ukr[nv - 1][mi - 1][masked](k, nb, ap, i0 * rsa, rsa, csa, bp,
                                            v0 / gk->nv_main * bstep, ldb,
                                            c + (i0 * ldc + v0 * vl) * esz, ldc, 1.0, beta,
                                            n_last);
            i0 += mi;
        }
    }
}

void pytpp_conv_epilogue(const pytpp_ew_kernels *ew, int64_t esz, int64_t m, int64_t n,
                         char *rows, int64_t ld, const char *bias, int act)
{
    if (!bias && act == PYTPP_CONV_ACT_NONE) return;
    for (int64_t i = 0; i < m; ++i) {
        char *r = rows + i * ld * esz;
        if (bias) ew->binary[PYTPP_EW_ADD](n, r, bias, r, 0);
        if (act == PYTPP_CONV_ACT_RELU) ew->unary[PYTPP_EW_RELU](n, r, r);
        else if (act == PYTPP_CONV_ACT_GELU) ew->unary[PYTPP_EW_GELU](n, r, r);
    }
}

void pytpp_conv_transpose(const pytpp_ew_kernels *ew, int64_t esz, int64_t m, int64_t n,
                          const void *x, int64_t ldx, void *y, int64_t ldy)
{
    if (esz != 2) {
        ew->transpose(m, n, x, ldx, y, ldy);
    } else if (ew->transpose16) {
        ew->transpose16(m, n, x, ldx, y, ldy);
    } else {
        const uint16_t *xs = (const uint16_t *)x;
        uint16_t *ys = (uint16_t *)y;
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) ys[j * ldy + i] = xs[i * ldx + j];
    }
}
