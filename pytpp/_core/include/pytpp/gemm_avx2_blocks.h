/* Cache blocks of the AVX2 Goto GEMM (6-row register blocks), measured on Zen 3 (32 KiB L1,
 * 512 KiB L2): the A micro-panel (6 x kc) in half of L1, the B block (kc x nc) in 3/4 of L2
 * (f32 2048^3: kc 640, nc 144). gemm_goto.c's defaults were measured for 12-row AVX-512 blocks.
 * The B block stays at most 384 KiB with a larger L2: on a Zen 4 core with AVX2 only (1 MiB L2)
 * nc 144 beat the 304 of 3/4 of L2 (paired against numpy, f32 2048^3 0.986x -> 0.995x,
 * 128x4096x4096 0.915x -> 0.948x; f64 1.064x -> 1.074x, 1.012x -> 1.034x).
 *
 * Small products skip packing while A and B together take at most L2/4 (f32) or L2/8 (f64):
 * beyond that, B rows read in place (power-of-two strides alias in L1) cost more than packing
 * (paired runs against numpy: f32 128^3 no-pack 1.01x vs packed 0.96x, 192^3 0.97x vs 1.00x,
 * 256^3 0.88x vs 0.98x; f64 128^3 0.97x vs 1.02x). */
#define PK_KC_L1_X8 4
#define PK_NC_L2_X8 6
#define PK_NC_MAX_KIB 384
#if defined(PYTPP_DT_F64)
#define PK_NOPACK_L2_X8 1
#else
#define PK_NOPACK_L2_X8 2
#endif
