/* The one dispatch table: every kernel family's table per ISA level. It is constant data (no
 * run-time filling, nothing to race on); a call picks a row by the active level
 * (pytpp._core._runtime: the CPU's best level, capped by PYTPP_ISA or pytpp.use_isa), and a row
 * only ever names kernels of its own level, which the cpuid check admitted.
 *
 * To find the kernel of an op: the row's table for the family and dtype, then the table's
 * `info` (its symbol, the template it comes from, every kernel symbol it holds); `python -m
 * pytpp info --kernels` prints what this machine runs and docs/kernels.md lists them all. */
#ifndef PYTPP_DISPATCH_H
#define PYTPP_DISPATCH_H
#include <stdint.h>
#include "pytpp/cpu.h"
#include "pytpp/gemm.h"
#include "pytpp/gemm_goto.h"
#include "pytpp/gemm_lowp.h"
#include "pytpp/smallgemm.h"
#include "pytpp/eltwise.h"
#include "pytpp/norm.h"
#include "pytpp/optim.h"
#include "pytpp/embedding.h"
#include "pytpp/equation.h"
#include "pytpp/pool.h"

/* bf16 GEMM kernels: the level's default (AUTO) or one named for tests and tuning. */
enum pytpp_bf16_kernel {
    PYTPP_BF16_AUTO = 0, PYTPP_BF16_REF, PYTPP_BF16_AVX2, PYTPP_BF16_AVX512, PYTPP_BF16_NATIVE,
    PYTPP_BF16_AVX2_WIDENED, PYTPP_BF16_NKERNELS
};

typedef struct pytpp_level_kernels {
    const char *name;                                   /* "ref", "avx2", "avx512" */
    const pytpp_gemm_kernels *brgemm[PYTPP_NDTYPES];    /* [enum pytpp_dtype]: gemm_ukr.inc */
    const pytpp_pk_kernels *packed[PYTPP_NDTYPES];      /* Goto GEMM panels: gemm_packed.inc */
    const pytpp_smm_kernels *smm[PYTPP_NDTYPES][2];     /* small GEMM: gemm_small.inc, the
                                                         * widest vectors first, then narrower */
    int smm_flavours;
    const pytpp_ew_kernels *eltwise[PYTPP_NDTYPES];     /* element-wise: eltwise_ukr.inc */
    const pytpp_norm_kernels *norm[PYTPP_NDTYPES];      /* layer/RMS norm: norm_rows.inc */
    const pytpp_optim_kernels *optim[PYTPP_NDTYPES];    /* optimizer steps: optim_rows.inc */
    const pytpp_embedding_kernels *embedding[PYTPP_NDTYPES]; /* bags: embedding_rows.inc */
    const pytpp_eqn_kernels *equation[PYTPP_NDTYPES];   /* fused equations: equation_rows.inc */
    const pytpp_pool_kernels *pool[PYTPP_NDTYPES];      /* pooling: pool_rows.inc */
    int bf16_default;                                   /* AUTO without AVX512_BF16 */
    /* bf16 BRGEMM handles without AVX512_BF16: lane kernels reading A by rows (NULL: the
     * packed-panel bf16 kernel above) */
    const pytpp_i8_kernels *bf16_lanes;
} pytpp_level_kernels;

extern const pytpp_level_kernels pytpp_levels[PYTPP_NISA];

typedef struct pytpp_bf16_entry {
    const char *name;              /* "ref", "avx2", "avx512", "avx512_bf16", "avx2_widened" */
    const pytpp_pk_kernels *kt;
    int isa;                       /* lowest level that runs it */
    uint32_t features;             /* feature bits it needs beyond the level's */
} pytpp_bf16_entry;

extern const pytpp_bf16_entry pytpp_bf16_kernels[PYTPP_BF16_NKERNELS];

/* The bf16 kernel a call at level `isa` runs on a CPU with `features`: `which`, or for AUTO the
 * best that level has (native vdpbf16ps where present). NULL when `which` cannot run there. */
const pytpp_pk_kernels *pytpp_bf16_select(int isa, uint32_t features, int which);
/* The table whose bf16 products of rows (a few rows of x, B read as given, the same bits as
 * every bf16 kernel) a call at level `isa` runs: for w in torch's layout (`bt`, dot_bt) the
 * native AVX512_BF16 table where the CPU has it, else and for W as given (dot_bn) the widened
 * AVX2 table, on every level from AVX2 up. NULL below. */
const pytpp_pk_kernels *pytpp_bf16_rows_select(int isa, uint32_t features, int bt);

/* 8-bit GEMM kernels (u8/s8 x u8/s8 -> int32): the level's default (AUTO) or one named for tests. */
enum pytpp_i8_kernel {
    PYTPP_I8_AUTO = 0, PYTPP_I8_REF, PYTPP_I8_AVX2, PYTPP_I8_AVX512, PYTPP_I8_VNNI,
    PYTPP_I8_AVX2_U7, PYTPP_I8_AVX_VNNI, PYTPP_I8_NKERNELS
};

typedef struct pytpp_i8_entry {
    const char *name;              /* "ref", "avx2", "avx512", "avx512_vnni", "avx_vnni" */
    const pytpp_i8_kernels *kt;
    int isa;                       /* lowest level that runs it */
    uint32_t features;             /* feature bits it needs beyond the level's */
    int s8_b_only;                 /* B must be s8 (vpmaddubsw's signed operand; the vpdpbusd
                                    * tables take every type, flipped: gemm_lowp.h) */
    int a7_only;                   /* A must be u8 with values in [0, 127]: never chosen by
                                    * AUTO */
} pytpp_i8_entry;

extern const pytpp_i8_entry pytpp_i8_kernel_list[PYTPP_I8_NKERNELS];

/* The 8-bit kernels a call at level `isa` runs on a CPU with `features` for A of signedness
 * a_signed and B of b_signed: `which`, or for AUTO the best that level has (vpdpbusd where
 * AVX512_VNNI exists, or on ymm where AVX-VNNI does, else the level's int16 kernels). NULL when
 * `which` cannot run there or cannot take those types. */
const pytpp_i8_kernels *pytpp_i8_select(int isa, uint32_t features, int which, int a_signed,
                                        int b_signed);

/* Required kernel slots of level `isa` left empty (0 for a sound table; -1: no such level). */
int pytpp_dispatch_missing(int isa);

#endif
