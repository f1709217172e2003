/* The register-block sweep every convolution path runs (conv.h, pytpp_conv_sweep): a row of
 * near-equal register blocks down m rows for each chunk of one register block's columns. */
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
