/* Vector shim for AVX-512 (F/BW/DQ/VL): one vector type and its few operations, per dtype.
 * Included by kernels/avx512/ sources after PYTPP_DT_F32 or PYTPP_DT_F64 is defined. */
#include <immintrin.h>

#define PYTPP_ISA_NAME avx512
#if defined(PYTPP_DT_F32)
typedef float elem_t;
typedef __m512 vec_t;
typedef __mmask16 mask_t;
#define VL 16
#define V_ZERO() _mm512_setzero_ps()
#define V_LOAD(p) _mm512_loadu_ps(p)
#define V_LOADM(p, m) _mm512_maskz_loadu_ps((m), (p))
#define V_STORE(p, v) _mm512_storeu_ps((p), (v))
#define V_STOREM(p, m, v) _mm512_mask_storeu_ps((p), (m), (v))
#define V_SET1(x) _mm512_set1_ps(x)
#define V_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define V_MUL(a, b) _mm512_mul_ps((a), (b))
#define V_ADD(a, b) _mm512_add_ps((a), (b))
#define MASK_FIRST(r) ((__mmask16)((1u << (r)) - 1u))
#elif defined(PYTPP_DT_F64)
typedef double elem_t;
typedef __m512d vec_t;
typedef __mmask8 mask_t;
#define VL 8
#define V_ZERO() _mm512_setzero_pd()
#define V_LOAD(p) _mm512_loadu_pd(p)
#define V_LOADM(p, m) _mm512_maskz_loadu_pd((m), (p))
#define V_STORE(p, v) _mm512_storeu_pd((p), (v))
#define V_STOREM(p, m, v) _mm512_mask_storeu_pd((p), (m), (v))
#define V_SET1(x) _mm512_set1_pd(x)
#define V_FMA(a, b, c) _mm512_fmadd_pd((a), (b), (c))
#define V_MUL(a, b) _mm512_mul_pd((a), (b))
#define V_ADD(a, b) _mm512_add_pd((a), (b))
#define MASK_FIRST(r) ((__mmask8)((1u << (r)) - 1u))
#endif

/* 32 zmm registers: MR x NV accumulators + NV B vectors + 1 broadcast. */
#define PYTPP_SHAPES(X) \
    PYTPP_ROWS_12(X, 1) PYTPP_ROWS_12(X, 2) PYTPP_ROWS_8(X, 3) PYTPP_ROWS_6(X, 4)
#define PYTPP_MR_MAX_BY_NV {0, 12, 12, 8, 6}
/* Main register block, measured on BRGEMM 16 x 64^3 in L2 (interleaved A/B): fp32 6x4v,
 * fp64 8x3v (+8% over 6x4v; 12x2v in between). */
#if defined(PYTPP_DT_F64)
#define PYTPP_NV_MAIN 3
#else
#define PYTPP_NV_MAIN 4
#endif
