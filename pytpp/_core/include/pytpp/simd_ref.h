/* "Vector" shim for the portable reference level: one element per vector, no masks needed.
 * The same micro-kernel template then yields plain C that any compiler can build. V_FMA is
 * fused (one rounding) as on the vector levels. */
#include <math.h>

#define PYTPP_ISA_NAME ref
#if defined(PYTPP_DT_F32)
typedef float elem_t;
#elif defined(PYTPP_DT_F64)
typedef double elem_t;
#endif
typedef elem_t vec_t;
typedef int mask_t;
#define VL 1
#define V_ZERO() ((elem_t)0)
#define V_LOAD(p) (*(p))
#define V_LOADM(p, m) (*(p))
#define V_STORE(p, v) (*(p) = (v))
#define V_STOREM(p, m, v) (*(p) = (v))
#define V_SET1(x) ((elem_t)(x))
#if defined(PYTPP_DT_F32)
#define V_FMA(a, b, c) fmaf((a), (b), (c))
#else
#define V_FMA(a, b, c) fma((a), (b), (c))
#endif
#define V_MUL(a, b) ((a) * (b))
#define V_ADD(a, b) ((a) + (b))
#define MASK_FIRST(r) (r)

#define PYTPP_SHAPES(X) \
    PYTPP_ROWS_4(X, 1) PYTPP_ROWS_4(X, 2) PYTPP_ROWS_4(X, 3) PYTPP_ROWS_4(X, 4)
#define PYTPP_MR_MAX_BY_NV {0, 4, 4, 4, 4}
#define PYTPP_NV_MAIN 4
