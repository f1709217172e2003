/* Cache blocks of the AVX2 Goto GEMM (6-row register blocks), measured on Zen 3 (32 KiB L1,
 * 512 KiB L2): the A micro-panel (6 x kc) in half of L1, the B block (kc x nc) in 3/4 of L2
 * (f32 2048^3: kc 640, nc 144). gemm_goto.c's defaults were measured for 12-row AVX-512 blocks. */
#define PK_KC_L1_X8 4
#define PK_NC_L2_X8 6
