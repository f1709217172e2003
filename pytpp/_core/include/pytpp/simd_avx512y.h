/* Vector shim for AVX-512VL at 256 bits ("avx512y"): ymm vectors with AVX-512 masks and all 32
 * registers. Zen 4 runs a zmm FMA as two 256-bit halves, so on small shapes whose rows fill a
 * ymm better than a zmm (n = 4, 12, 20 ... in f64) this flavour does the same work with fewer
 * wasted lanes. Included by kernels/avx512/ sources after PYTPP_DT_F32 or PYTPP_DT_F64. */
#include <immintrin.h>

#define PYTPP_ISA_NAME avx512y
#if defined(PYTPP_DT_F32)
typedef float elem_t;
typedef __m256 vec_t;
typedef __mmask8 mask_t;
#define VL 8
#define V_ZERO() _mm256_setzero_ps()
#define V_LOAD(p) _mm256_loadu_ps(p)
#define V_LOADM(p, m) _mm256_maskz_loadu_ps((m), (p))
#define V_STORE(p, v) _mm256_storeu_ps((p), (v))
#define V_STOREM(p, m, v) _mm256_mask_storeu_ps((p), (m), (v))
#define V_SET1(x) _mm256_set1_ps(x)
#define V_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define V_MUL(a, b) _mm256_mul_ps((a), (b))
#define V_ADD(a, b) _mm256_add_ps((a), (b))
#define MASK_FIRST(r) ((__mmask8)((1u << (r)) - 1u))
#elif defined(PYTPP_DT_F64)
typedef double elem_t;
typedef __m256d vec_t;
typedef __mmask8 mask_t;
#define VL 4
#define V_ZERO() _mm256_setzero_pd()
#define V_LOAD(p) _mm256_loadu_pd(p)
#define V_LOADM(p, m) _mm256_maskz_loadu_pd((m), (p))
#define V_STORE(p, v) _mm256_storeu_pd((p), (v))
#define V_STOREM(p, m, v) _mm256_mask_storeu_pd((p), (m), (v))
#define V_SET1(x) _mm256_set1_pd(x)
#define V_FMA(a, b, c) _mm256_fmadd_pd((a), (b), (c))
#define V_MUL(a, b) _mm256_mul_pd((a), (b))
#define V_ADD(a, b) _mm256_add_pd((a), (b))
#define MASK_FIRST(r) ((__mmask8)((1u << (r)) - 1u))
#endif
