/* bf16 shim for the portable reference level: one lane, C's fmaf (one rounding) and explicit
 * denormal flushing in and out, so the result has the bits vdpbf16ps would give. */
#define PYTPP_DT_F32   /* C and its accumulators are fp32: the fp32 shim's V_* */
#include "pytpp/simd_ref.h"
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef float bvec_t;
#define V_BF16_ENTER() ((void)0)
#define V_BF16_LEAVE() ((void)0)

static inline float bf16_ref_daz(uint32_t bits)
{
    if ((bits & 0x7F800000u) == 0) bits &= 0x80000000u; /* denormal in: signed zero */
    float x;
    memcpy(&x, &bits, 4);
    return x;
}
static inline float bf16_ref_ftz(float x)
{
    return (x != 0.0f && fabsf(x) < 1.17549435e-38f) ? copysignf(0.0f, x) : x;
}
#define V_BF16_PREP_B(p, o, e) ((o) = bf16_ref_daz((uint32_t)(p)[1] << 16), (e) = bf16_ref_daz((uint32_t)(p)[0] << 16))
#define V_BF16_PREP_A(p, o, e) V_BF16_PREP_B(p, o, e)
#define V_BF16_PREP_BM(p, m, o, e) V_BF16_PREP_B((const uint16_t *)(p), o, e)   /* one lane */
#define V_BF16_DOT(acc, ao, ae, bo, be) bf16_ref_ftz(fmaf((ae), (be), bf16_ref_ftz(fmaf((ao), (bo), (acc)))))

#define BF16_SHAPES(X) PYTPP_ROWS(4)(X, 1) PYTPP_ROWS(4)(X, 2)
#define BF16_MR_MAIN PYTPP_PK_MR_REF
#define BF16_NV_MAIN PYTPP_PK_NV
