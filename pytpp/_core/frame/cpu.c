/* CPU feature detection: cpuid for what the core implements, xgetbv for what the OS saves on a
 * context switch. A level is usable only when both say yes. */
#include <string.h>
#include "pytpp/cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t read_xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

uint32_t pytpp_cpu_features(void)
{
    unsigned a, b, c, d;
    uint32_t f = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    const int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
    if (c & (1u << 12)) f |= PYTPP_FEAT_FMA;
    if (c & (1u << 29)) f |= PYTPP_FEAT_F16C;
    if (osxsave && avx) {
        const uint64_t xcr0 = read_xcr0();
        if ((xcr0 & 0x6) == 0x6) f |= PYTPP_FEAT_OS_AVX;            /* xmm + ymm state */
        if ((xcr0 & 0xe6) == 0xe6) f |= PYTPP_FEAT_OS_AVX512;       /* + opmask, zmm */
    }
    if (__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        if (b & (1u << 5)) f |= PYTPP_FEAT_AVX2;
        if (b & (1u << 16)) f |= PYTPP_FEAT_AVX512F;
        if (b & (1u << 17)) f |= PYTPP_FEAT_AVX512DQ;
        if (b & (1u << 30)) f |= PYTPP_FEAT_AVX512BW;
        if (b & (1u << 31)) f |= PYTPP_FEAT_AVX512VL;
        if (c & (1u << 11)) f |= PYTPP_FEAT_AVX512_VNNI;
        __cpuid_count(7, 1, a, b, c, d);
        if (a & (1u << 4)) f |= PYTPP_FEAT_AVX_VNNI;
        if (a & (1u << 5)) f |= PYTPP_FEAT_AVX512_BF16;
    }
    return f;
}

void pytpp_cpu_brand(char *buf)
{
    unsigned r[12];
    buf[0] = 0;
    if (__get_cpuid_max(0x80000000u, NULL) < 0x80000004u) return;
    for (unsigned i = 0; i < 3; ++i)
        __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
    memcpy(buf, r, 48);
    buf[48] = 0;
}
#else
uint32_t pytpp_cpu_features(void) { return 0; }
void pytpp_cpu_brand(char *buf) { buf[0] = 0; }
#endif

int pytpp_cpu_best_isa(uint32_t f)
{
    const uint32_t avx2 = PYTPP_FEAT_AVX2 | PYTPP_FEAT_FMA | PYTPP_FEAT_F16C | PYTPP_FEAT_OS_AVX;
    const uint32_t avx512 = avx2 | PYTPP_FEAT_AVX512F | PYTPP_FEAT_AVX512BW | PYTPP_FEAT_AVX512DQ |
                            PYTPP_FEAT_AVX512VL | PYTPP_FEAT_OS_AVX512;
    if ((f & avx512) == avx512) return PYTPP_ISA_AVX512;
    if ((f & avx2) == avx2) return PYTPP_ISA_AVX2;
    return PYTPP_ISA_REF;
}
