/* Vector shim for AVX2 + FMA: masked tails through vmaskmov with lane masks from a table. */
#include <immintrin.h>

#define PYTPP_ISA_NAME avx2
#if defined(PYTPP_DT_F32)
typedef float elem_t;
typedef __m256 vec_t;
typedef __m256i mask_t;
#define VL 8
#define V_ZERO() _mm256_setzero_ps()
#define V_LOAD(p) _mm256_loadu_ps(p)
#define V_LOADM(p, m) _mm256_maskload_ps((p), (m))
#define V_STORE(p, v) _mm256_storeu_ps((p), (v))
#define V_STOREM(p, m, v) _mm256_maskstore_ps((p), (m), (v))
#define V_SET1(x) _mm256_set1_ps(x)
#define V_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define V_MUL(a, b) _mm256_mul_ps((a), (b))
#define V_ADD(a, b) _mm256_add_ps((a), (b))
static const int32_t pytpp_avx2_mask32[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
#define MASK_FIRST(r) _mm256_loadu_si256((const __m256i *)(pytpp_avx2_mask32 + 8 - (r)))
#elif defined(PYTPP_DT_F64)
typedef double elem_t;
typedef __m256d vec_t;
typedef __m256i mask_t;
#define VL 4
#define V_ZERO() _mm256_setzero_pd()
#define V_LOAD(p) _mm256_loadu_pd(p)
#define V_LOADM(p, m) _mm256_maskload_pd((p), (m))
#define V_STORE(p, v) _mm256_storeu_pd((p), (v))
#define V_STOREM(p, m, v) _mm256_maskstore_pd((p), (m), (v))
#define V_SET1(x) _mm256_set1_pd(x)
#define V_FMA(a, b, c) _mm256_fmadd_pd((a), (b), (c))
#define V_MUL(a, b) _mm256_mul_pd((a), (b))
#define V_ADD(a, b) _mm256_add_pd((a), (b))
static const int64_t pytpp_avx2_mask64[8] = {-1, -1, -1, -1, 0, 0, 0, 0};
#define MASK_FIRST(r) _mm256_loadu_si256((const __m256i *)(pytpp_avx2_mask64 + 4 - (r)))
#endif

/* 16 ymm registers: MR x NV accumulators + NV B vectors + 1 broadcast. */
#define PYTPP_SHAPES(X) PYTPP_ROWS_8(X, 1) PYTPP_ROWS_6(X, 2) PYTPP_ROWS_4(X, 3)
#define PYTPP_MR_MAX_BY_NV {0, 8, 6, 4, 0}
#define PYTPP_NV_MAIN 2
