/* What every kernel template shares: lists of register blocks, token pasting, unrolling, the
 * outer-product k step of the GEMM micro-kernels, and how a kernel table describes itself.
 * Included by the templates (gemm_ukr.inc, gemm_packed.inc, gemm_small.inc, gemm_bf16.inc,
 * eltwise_ukr.inc) and by the headers that declare their tables. */
#ifndef PYTPP_KERNEL_COMMON_H
#define PYTPP_KERNEL_COMMON_H

/* PYTPP_ROWS(N)(X, NV) applies X to the register blocks (1, NV) ... (N, NV). */
#define PYTPP_ROWS_1(X, NV) X(1, NV)
#define PYTPP_ROWS_2(X, NV) PYTPP_ROWS_1(X, NV) X(2, NV)
#define PYTPP_ROWS_3(X, NV) PYTPP_ROWS_2(X, NV) X(3, NV)
#define PYTPP_ROWS_4(X, NV) PYTPP_ROWS_3(X, NV) X(4, NV)
#define PYTPP_ROWS_5(X, NV) PYTPP_ROWS_4(X, NV) X(5, NV)
#define PYTPP_ROWS_6(X, NV) PYTPP_ROWS_5(X, NV) X(6, NV)
#define PYTPP_ROWS_7(X, NV) PYTPP_ROWS_6(X, NV) X(7, NV)
#define PYTPP_ROWS_8(X, NV) PYTPP_ROWS_7(X, NV) X(8, NV)
#define PYTPP_ROWS_9(X, NV) PYTPP_ROWS_8(X, NV) X(9, NV)
#define PYTPP_ROWS_10(X, NV) PYTPP_ROWS_9(X, NV) X(10, NV)
#define PYTPP_ROWS_11(X, NV) PYTPP_ROWS_10(X, NV) X(11, NV)
#define PYTPP_ROWS_12(X, NV) PYTPP_ROWS_11(X, NV) X(12, NV)
#define PYTPP_ROWS_13(X, NV) PYTPP_ROWS_12(X, NV) X(13, NV)
#define PYTPP_ROWS_14(X, NV) PYTPP_ROWS_13(X, NV) X(14, NV)
#define PYTPP_ROWS_(N) PYTPP_ROWS_##N
#define PYTPP_ROWS(N) PYTPP_ROWS_(N)

#define PYTPP_CAT_(a, b) a##b
#define PYTPP_CAT(a, b) PYTPP_CAT_(a, b)
#define PYTPP_STR_(x) #x
#define PYTPP_STR(x) PYTPP_STR_(x)
#define PYTPP_UNROLL _Pragma("GCC unroll 16")
#define PYTPP_INLINE static inline __attribute__((always_inline))

/* One k step of the outer-product micro-kernel (paper Fig. 2): the NV vectors of one B row
 * (B_OPERAND(v)) are loaded once, each of the MR rows' A element (A_OPERAND(i)) is broadcast,
 * and MR*NV accumulators take one multiply-add each, acc[i][v] = MADD(acc[i][v], a, b[v]).
 * MR and NV are constants at every use, so the loops unroll and acc[][] stays in registers.
 * BTYPE and ATYPE are the template's operand types: a vector, or the two fp32 halves of a bf16
 * pair. Every GEMM template (BRGEMM, packed panels, small GEMM, bf16) runs this step. */
#define PYTPP_KSTEP(MR, NV, NV_MAX, BTYPE, ATYPE, B_OPERAND, A_OPERAND, MADD, acc)            \
    do {                                                                                       \
        BTYPE b_[NV_MAX];                                                                      \
        PYTPP_UNROLL for (int v_ = 0; v_ < (NV); ++v_) b_[v_] = B_OPERAND(v_);                 \
        PYTPP_UNROLL for (int i_ = 0; i_ < (MR); ++i_) {                                       \
            const ATYPE a_ = A_OPERAND(i_);                                                    \
            PYTPP_UNROLL for (int v_ = 0; v_ < (NV); ++v_)                                     \
                (acc)[i_][v_] = MADD((acc)[i_][v_], a_, b_[v_]);                               \
        }                                                                                      \
    } while (0)

/* The multiply-add of the vector shims (V_FMA(a, b, c) = a * b + c) in PYTPP_KSTEP's order. */
#define V_MADD(acc, a, b) V_FMA((a), (b), (acc))

/* How a kernel table describes itself (show_config, `python -m pytpp info --kernels`, the
 * kernel map docs/kernels.md): its own symbol, the template it comes from, and every kernel
 * symbol it holds. The strings are made by the same token pasting that names the functions, so
 * they cannot disagree. */
typedef struct pytpp_table_info {
    const char *symbol;             /* e.g. "pytpp_gemm_f32_avx2" */
    const char *source;             /* template, e.g. "gemm_ukr.inc" */
    const char *const *kernels;     /* NULL-terminated */
} pytpp_table_info;

#endif
