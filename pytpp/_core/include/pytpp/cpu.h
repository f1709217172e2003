/* CPU feature detection (cpuid + xgetbv) and the ISA levels the engine can run. */
#ifndef PYTPP_CPU_H
#define PYTPP_CPU_H
#include <stdint.h>

enum pytpp_isa { PYTPP_ISA_REF = 0, PYTPP_ISA_AVX2 = 1, PYTPP_ISA_AVX512 = 2, PYTPP_NISA = 3 };

enum pytpp_feature {
    PYTPP_FEAT_AVX2 = 1 << 0, PYTPP_FEAT_FMA = 1 << 1, PYTPP_FEAT_F16C = 1 << 2,
    PYTPP_FEAT_AVX512F = 1 << 3, PYTPP_FEAT_AVX512BW = 1 << 4, PYTPP_FEAT_AVX512DQ = 1 << 5,
    PYTPP_FEAT_AVX512VL = 1 << 6, PYTPP_FEAT_AVX512_BF16 = 1 << 7, PYTPP_FEAT_AVX512_VNNI = 1 << 8,
    PYTPP_FEAT_OS_AVX = 1 << 9, PYTPP_FEAT_OS_AVX512 = 1 << 10,
    PYTPP_FEAT_AVX_VNNI = 1 << 11   /* vpdpbusd on ymm, VEX-encoded (no AVX-512 needed) */
};

/* Feature bits of this CPU, including whether the OS saves the ymm/zmm state. */
uint32_t pytpp_cpu_features(void);
/* Highest ISA level all of whose features are present. */
int pytpp_cpu_best_isa(uint32_t features);
/* CPU brand string into buf (>= 49 bytes). */
void pytpp_cpu_brand(char *buf);

#endif
