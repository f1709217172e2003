/* MXCSR denormal modes for the kernels that emulate vdpbf16ps on fp32 FMAs (inputs and results
 * flushed to zero, DAZ + FTZ). Set once per thread around a whole block of kernel calls; MXCSR
 * belongs to baseline x86-64, so the ISA-free driver may touch it. */
#ifndef PYTPP_FPMODE_H
#define PYTPP_FPMODE_H

#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64)
#include <xmmintrin.h>
static inline unsigned pytpp_ftz_enter(void)
{
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u); /* FTZ (bit 15) | DAZ (bit 6) */
    return csr;
}
static inline void pytpp_ftz_leave(unsigned csr) { _mm_setcsr(csr); }
#else
static inline unsigned pytpp_ftz_enter(void) { return 0; }
static inline void pytpp_ftz_leave(unsigned csr) { (void)csr; }
#endif

#endif
