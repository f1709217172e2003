/* Vector shim for AVX2 + FMA at 128 bits ("avx2x"): xmm vectors, for small-GEMM rows narrower
 * than a ymm vector (4..7 floats, 2..3 doubles), which a ymm kernel could only cover with slow
 * masked stores. Masked tails through vmaskmov with lane masks from a table. Included by
 * kernels/avx2/ sources after PYTPP_DT_F32 or PYTPP_DT_F64. */
#include <immintrin.h>

#define PYTPP_ISA_NAME avx2x
#if defined(PYTPP_DT_F32)
typedef float elem_t;
typedef __m128 vec_t;
typedef __m128i mask_t;
#define VL 4
#define V_ZERO() _mm_setzero_ps()
#define V_LOAD(p) _mm_loadu_ps(p)
#define V_LOADM(p, m) _mm_maskload_ps((p), (m))
#define V_STORE(p, v) _mm_storeu_ps((p), (v))
#define V_STOREM(p, m, v) _mm_maskstore_ps((p), (m), (v))
#define V_SET1(x) _mm_set1_ps(x)
#define V_FMA(a, b, c) _mm_fmadd_ps((a), (b), (c))
#define V_MUL(a, b) _mm_mul_ps((a), (b))
#define V_ADD(a, b) _mm_add_ps((a), (b))
static const int32_t pytpp_avx2x_mask32[8] = {-1, -1, -1, -1, 0, 0, 0, 0};
#define MASK_FIRST(r) _mm_loadu_si128((const __m128i *)(pytpp_avx2x_mask32 + 4 - (r)))
#elif defined(PYTPP_DT_F64)
typedef double elem_t;
typedef __m128d vec_t;
typedef __m128i mask_t;
#define VL 2
#define V_ZERO() _mm_setzero_pd()
#define V_LOAD(p) _mm_loadu_pd(p)
#define V_LOADM(p, m) _mm_maskload_pd((p), (m))
#define V_STORE(p, v) _mm_storeu_pd((p), (v))
#define V_STOREM(p, m, v) _mm_maskstore_pd((p), (m), (v))
#define V_SET1(x) _mm_set1_pd(x)
#define V_FMA(a, b, c) _mm_fmadd_pd((a), (b), (c))
#define V_MUL(a, b) _mm_mul_pd((a), (b))
#define V_ADD(a, b) _mm_add_pd((a), (b))
static const int64_t pytpp_avx2x_mask64[4] = {-1, -1, 0, 0};
#define MASK_FIRST(r) _mm_loadu_si128((const __m128i *)(pytpp_avx2x_mask64 + 2 - (r)))
#endif
