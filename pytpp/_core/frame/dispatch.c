/* The dispatch table (dispatch.h): constant, one row per ISA level. */
#include <stddef.h>
#include "pytpp/dispatch.h"

const pytpp_level_kernels pytpp_levels[PYTPP_NISA] = {
    [PYTPP_ISA_REF] = {
        .name = "ref",
        .brgemm = {[PYTPP_F64] = &pytpp_gemm_f64_ref, [PYTPP_F32] = &pytpp_gemm_f32_ref},
        .packed = {[PYTPP_F64] = &pytpp_mm_f64_ref, [PYTPP_F32] = &pytpp_mm_f32_ref},
        .smm = {[PYTPP_F64] = {&pytpp_smm_f64_ref}, [PYTPP_F32] = {&pytpp_smm_f32_ref}},
        .smm_flavours = 1,
        .eltwise = {[PYTPP_F64] = &pytpp_ew_f64_ref, [PYTPP_F32] = &pytpp_ew_f32_ref},
        .norm = {[PYTPP_F64] = &pytpp_norm_f64_ref, [PYTPP_F32] = &pytpp_norm_f32_ref},
        .optim = {[PYTPP_F64] = &pytpp_optim_f64_ref, [PYTPP_F32] = &pytpp_optim_f32_ref},
        .embedding = {[PYTPP_F64] = &pytpp_embedding_f64_ref,
                      [PYTPP_F32] = &pytpp_embedding_f32_ref},
        .equation = {[PYTPP_F64] = &pytpp_eqn_f64_ref, [PYTPP_F32] = &pytpp_eqn_f32_ref},
        .pool = {[PYTPP_F64] = &pytpp_pool_f64_ref, [PYTPP_F32] = &pytpp_pool_f32_ref},
        .bf16_default = PYTPP_BF16_REF,
    },
    [PYTPP_ISA_AVX2] = {
        .name = "avx2",
        .brgemm = {[PYTPP_F64] = &pytpp_gemm_f64_avx2, [PYTPP_F32] = &pytpp_gemm_f32_avx2},
        .packed = {[PYTPP_F64] = &pytpp_mm_f64_avx2, [PYTPP_F32] = &pytpp_mm_f32_avx2},
        /* ymm kernels, and xmm ones for rows narrower than a ymm vector */
        .smm = {[PYTPP_F64] = {&pytpp_smm_f64_avx2, &pytpp_smm_f64_avx2x},
                [PYTPP_F32] = {&pytpp_smm_f32_avx2, &pytpp_smm_f32_avx2x}},
        .smm_flavours = 2,
        .eltwise = {[PYTPP_F64] = &pytpp_ew_f64_avx2, [PYTPP_F32] = &pytpp_ew_f32_avx2},
        .norm = {[PYTPP_F64] = &pytpp_norm_f64_avx2, [PYTPP_F32] = &pytpp_norm_f32_avx2},
        .optim = {[PYTPP_F64] = &pytpp_optim_f64_avx2, [PYTPP_F32] = &pytpp_optim_f32_avx2},
        .embedding = {[PYTPP_F64] = &pytpp_embedding_f64_avx2,
                      [PYTPP_F32] = &pytpp_embedding_f32_avx2},
        .equation = {[PYTPP_F64] = &pytpp_eqn_f64_avx2, [PYTPP_F32] = &pytpp_eqn_f32_avx2},
        .pool = {[PYTPP_F64] = &pytpp_pool_f64_avx2, [PYTPP_F32] = &pytpp_pool_f32_avx2},
        /* operands widened to fp32 while packing: vdpbf16ps bits at fp32 FMA speed */
        .bf16_default = PYTPP_BF16_AVX2_WIDENED,
        .bf16_lanes = &pytpp_mm_bf16w_avx2,
    },
    [PYTPP_ISA_AVX512] = {
        .name = "avx512",
        .brgemm = {[PYTPP_F64] = &pytpp_gemm_f64_avx512, [PYTPP_F32] = &pytpp_gemm_f32_avx512},
        .packed = {[PYTPP_F64] = &pytpp_mm_f64_avx512, [PYTPP_F32] = &pytpp_mm_f32_avx512},
        /* zmm kernels, and ymm ones (smaller shapes, fewer lanes wasted) */
        .smm = {[PYTPP_F64] = {&pytpp_smm_f64_avx512, &pytpp_smm_f64_avx512y},
                [PYTPP_F32] = {&pytpp_smm_f32_avx512, &pytpp_smm_f32_avx512y}},
        .smm_flavours = 2,
        .eltwise = {[PYTPP_F64] = &pytpp_ew_f64_avx512, [PYTPP_F32] = &pytpp_ew_f32_avx512},
        .norm = {[PYTPP_F64] = &pytpp_norm_f64_avx512, [PYTPP_F32] = &pytpp_norm_f32_avx512},
        .optim = {[PYTPP_F64] = &pytpp_optim_f64_avx512, [PYTPP_F32] = &pytpp_optim_f32_avx512},
        .embedding = {[PYTPP_F64] = &pytpp_embedding_f64_avx512,
                      [PYTPP_F32] = &pytpp_embedding_f32_avx512},
        .equation = {[PYTPP_F64] = &pytpp_eqn_f64_avx512, [PYTPP_F32] = &pytpp_eqn_f32_avx512},
        .pool = {[PYTPP_F64] = &pytpp_pool_f64_avx512, [PYTPP_F32] = &pytpp_pool_f32_avx512},
        .bf16_default = PYTPP_BF16_AVX512,
    },
};

const pytpp_bf16_entry pytpp_bf16_kernels[PYTPP_BF16_NKERNELS] = {
    [PYTPP_BF16_AUTO] = {"auto", NULL, PYTPP_ISA_REF, 0},
    [PYTPP_BF16_REF] = {"ref", &pytpp_mm_bf16_ref, PYTPP_ISA_REF, 0},
    [PYTPP_BF16_AVX2] = {"avx2", &pytpp_mm_bf16_avx2, PYTPP_ISA_AVX2, 0},
    [PYTPP_BF16_AVX512] = {"avx512", &pytpp_mm_bf16_avx512, PYTPP_ISA_AVX512, 0},
    [PYTPP_BF16_NATIVE] = {"avx512_bf16", &pytpp_mm_bf16_avx512_bf16, PYTPP_ISA_AVX512,
                           PYTPP_FEAT_AVX512_BF16},
    [PYTPP_BF16_AVX2_WIDENED] = {"avx2_widened", &pytpp_mm_f32_bf16w_avx2, PYTPP_ISA_AVX2, 0},
};

const pytpp_i8_entry pytpp_i8_kernel_list[PYTPP_I8_NKERNELS] = {
    [PYTPP_I8_AUTO] = {"auto", NULL, PYTPP_ISA_REF, 0, 0, 0},
    [PYTPP_I8_REF] = {"ref", &pytpp_mm_i8_ref, PYTPP_ISA_REF, 0, 0, 0},
    [PYTPP_I8_AVX2] = {"avx2", &pytpp_mm_i8_avx2, PYTPP_ISA_AVX2, 0, 0, 0},
    [PYTPP_I8_AVX512] = {"avx512", &pytpp_mm_i8_avx512, PYTPP_ISA_AVX512, 0, 0, 0},
    [PYTPP_I8_VNNI] = {"avx512_vnni", &pytpp_mm_i8_avx512_vnni, PYTPP_ISA_AVX512,
                       PYTPP_FEAT_AVX512_VNNI, 0, 0},
    /* 7-bit activations (reduce_range quantization) x s8 weights: vpmaddubsw, exact there */
    [PYTPP_I8_AVX2_U7] = {"avx2_u7", &pytpp_mm_i8_avx2_u7, PYTPP_ISA_AVX2, 0, 1, 1},
    /* VEX vpdpbusd on ymm, on CPUs with AVX-VNNI, AVX-512 or not */
    [PYTPP_I8_AVX_VNNI] = {"avx_vnni", &pytpp_mm_i8_avx_vnni, PYTPP_ISA_AVX2,
                           PYTPP_FEAT_AVX_VNNI, 0, 0},
};

const pytpp_i8_kernels *pytpp_i8_select(int isa, uint32_t features, int which, int a_signed,
                                        int b_signed)
{
    if (isa < 0 || isa >= PYTPP_NISA || which < 0 || which >= PYTPP_I8_NKERNELS) return NULL;
    if (which == PYTPP_I8_AUTO) {
        /* vpdpbusd, on zmm where the level has them, else on ymm (an s8 A or a u8 B runs
         * flipped: gemm_lowp.h) */
        static const int dots[] = {PYTPP_I8_VNNI, PYTPP_I8_AVX_VNNI};
        for (int i = 0; i < 2; ++i) {
            const pytpp_i8_entry *e = &pytpp_i8_kernel_list[dots[i]];
            if (isa >= e->isa && (features & e->features) == e->features) return e->kt;
        }
        which = isa == PYTPP_ISA_AVX512 ? PYTPP_I8_AVX512
              : isa == PYTPP_ISA_AVX2 ? PYTPP_I8_AVX2 : PYTPP_I8_REF;
    }
    const pytpp_i8_entry *e = &pytpp_i8_kernel_list[which];
    if (e->isa > isa || (features & e->features) != e->features) return NULL;
    if ((e->s8_b_only && !b_signed) || (e->a7_only && a_signed)) return NULL;
    return e->kt;
}

const pytpp_pk_kernels *pytpp_bf16_select(int isa, uint32_t features, int which)
{
    if (isa < 0 || isa >= PYTPP_NISA || which < 0 || which >= PYTPP_BF16_NKERNELS) return NULL;
    if (which == PYTPP_BF16_AUTO) {
        const pytpp_bf16_entry *native = &pytpp_bf16_kernels[PYTPP_BF16_NATIVE];
        which = isa >= native->isa && (features & native->features) == native->features
                    ? PYTPP_BF16_NATIVE : pytpp_levels[isa].bf16_default;
    }
    const pytpp_bf16_entry *e = &pytpp_bf16_kernels[which];
    if (e->isa > isa || (features & e->features) != e->features) return NULL;
    return e->kt;
}

const pytpp_pk_kernels *pytpp_bf16_rows_select(int isa, uint32_t features, int bt)
{
    const pytpp_bf16_entry *n = &pytpp_bf16_kernels[PYTPP_BF16_NATIVE];
    if (bt && isa >= n->isa && isa < PYTPP_NISA && (features & n->features) == n->features &&
        n->kt->dot_bt)
        return n->kt;
    const pytpp_bf16_entry *e = &pytpp_bf16_kernels[PYTPP_BF16_AVX2_WIDENED];
    if (isa < e->isa || isa >= PYTPP_NISA || (features & e->features) != e->features) return NULL;
    return e->kt;
}

/* Required kernel slots of level `isa` that are empty (0 for a sound table): every register
 * block a table declares (mr_max per vector count, or up to its main block) in every variant
 * the drivers call, and every element-wise op. For the consistency tests. */
int pytpp_dispatch_missing(int isa)
{
    if (isa < 0 || isa >= PYTPP_NISA) return -1;
    const pytpp_level_kernels *lv = &pytpp_levels[isa];
    int missing = 0;
    for (int dt = 0; dt < PYTPP_NDTYPES; ++dt) {
        const pytpp_gemm_kernels *g = lv->brgemm[dt];
        const pytpp_norm_kernels *nk = lv->norm[dt];
        const pytpp_optim_kernels *ok = lv->optim[dt];
        const pytpp_embedding_kernels *ek = lv->embedding[dt];
        missing += !g || !lv->packed[dt] || !lv->eltwise[dt] || !nk || !ok || !ek ||
                   !lv->equation[dt] || !lv->pool[dt] || !lv->pool[dt]->rows ||
                   !lv->pool[dt]->backward || !lv->pool[dt]->argmax_rows ||
                   !lv->pool[dt]->scatter;
        if (!g || !lv->packed[dt] || !lv->eltwise[dt] || !nk || !ok || !ek) continue;
        missing += !nk->layer_fwd + !nk->rms_fwd + !nk->layer_bwd + !nk->rms_bwd +
                   !nk->plane_sums + !nk->plane_apply + !nk->plane_bwd_sums +
                   !nk->plane_bwd_apply + !nk->col_sums + !nk->col_apply + !nk->col_bwd_sums +
                   !nk->col_bwd_apply;
        missing += !ok->sgd + !ok->adamw + (dt == PYTPP_F32 && !ok->split_sgd);
        missing += !ek->bag_fwd + !ek->bag_bwd;
        for (int nv = 1; nv <= PYTPP_NV_MAX; ++nv)
            for (int mr = 1; mr <= g->mr_max[nv]; ++mr)
                for (int t = 0; t < 2; ++t)
                    missing += !g->ukr[nv - 1][mr - 1][t] + !g->ukr_pf[nv - 1][mr - 1][t] +
                               !g->ukr_lpf[nv - 1][mr - 1][t];
        const pytpp_pk_kernels *p = lv->packed[dt];
        for (int nv = 1; nv <= p->nv_main; ++nv)
            for (int mr = 1; mr <= p->mr_main; ++mr)
                missing += !p->ukr[nv - 1][mr - 1][0] + !p->ukr[nv - 1][mr - 1][1];
        for (int f = 0; f < lv->smm_flavours; ++f) {
            const pytpp_smm_kernels *s = lv->smm[dt][f];
            missing += !s;
            if (!s) continue;
            for (int nv = 1; nv <= PYTPP_SMM_NV_MAX; ++nv)
                for (int mr = 1; mr <= s->mr_max[nv]; ++mr)
                    missing += !s->stack[nv - 1][mr - 1][PYTPP_SMM_TAIL_NONE][0] +
                               !s->stack[nv - 1][mr - 1][PYTPP_SMM_TAIL_NONE][1] +
                               !s->reduce[nv - 1][mr - 1][PYTPP_SMM_TAIL_NONE];
        }
        const pytpp_ew_kernels *e = lv->eltwise[dt];
        for (int op = 0; op < PYTPP_EW_N_UNARY; ++op) missing += !e->unary[op];
        for (int op = 0; op < PYTPP_EW_N_BINARY; ++op) missing += !e->binary[op];
        for (int op = 0; op < PYTPP_EW_N_TERNARY; ++op) missing += !e->ternary[op];
        missing += !e->cmp + !e->blend + !e->dropout + !e->dropout_inv + !e->rand + !e->softmax +
                   !e->reduce_row + !e->reduce_acc + !e->transpose;
    }
    for (int k = 1; k < PYTPP_BF16_NKERNELS; ++k) missing += !pytpp_bf16_kernels[k].kt;
    for (int k = 1; k < PYTPP_I8_NKERNELS; ++k) {
        const pytpp_i8_kernels *t = pytpp_i8_kernel_list[k].kt;
        missing += !t;
        if (!t || pytpp_i8_kernel_list[k].isa != isa) continue;
        missing += !t->pack_a + !t->pack_b + !t->gemv;   /* gemv: the small-m kernel */
        for (int nv = 1; nv <= t->nv_main; ++nv)
            for (int mr = 1; mr <= t->mr_main; ++mr)
                missing += !t->ukr[nv - 1][mr - 1][0] + !t->ukr[nv - 1][mr - 1][1];
    }
    return missing;
}
