/* The engine's tuning constants in one place: cache sizes assumed when the OS reports none, and
 * the sizes below which work stays on one thread (a parallel region, about 2-5 us on these
 * machines, costs more than it saves) or takes another path. Each says what set it. */
#ifndef PYTPP_TUNING_H
#define PYTPP_TUNING_H
#include <stdint.h>

/* Cache sizes when sysfs says nothing (pytpp._config reads these too): Zen 3/Zen 4 L1d, a
 * 512 KiB L2 (the smaller of the two; blocking for a larger L2 than the real one costs more
 * than the reverse), 32 MiB L3. */
#define PYTPP_DEFAULT_L1 ((int64_t)32 << 10)
#define PYTPP_DEFAULT_L2 ((int64_t)512 << 10)
#define PYTPP_DEFAULT_L3 ((int64_t)32 << 20)

/* One thread below these (flops = 2 m n k per product, summed over the call): */
/* BRGEMM tiles (frame/brgemm.c): a 1 MFLOP reduction runs ~10-20 us on one core. */
#define PYTPP_BRGEMM_PAR_MIN_FLOPS ((double)(1 << 20))
/* Goto GEMM (frame/gemm_goto.c): 3 MFLOP, where 2 threads first beat 1 in paired runs of
 * square f32/f64 products on Zen 4 and Zen 3 (docs/matmul.md). */
#define PYTPP_MATMUL_PAR_MIN_FLOPS ((double)(3 << 20))
/* Products of rows (frame/gemm_goto.c run_dot): x @ w.T with at most this many rows of x and
 * at least this long rows go without packing w; threads take the rows of w in units of 24 (a
 * multiple of every register block's width: 8, 4, 3) and chunks of about half of L2. 16 rows:
 * where packing started to win or tie, float32, one Zen 4 core (4096 -> 1024 at 24 rows: 3.46
 * ms packed, 3.51 by rows; 4096 -> 4096 at 48 rows: 24.2 / 25.6). */
#define PYTPP_MM_DOT_MAX_M 16
#define PYTPP_MM_DOT_MIN_K 128
#define PYTPP_MM_DOT_N_UNIT 24
#define PYTPP_MM_DOT_CHUNK_BYTES ((int64_t)512 << 10)
/* x @ W (B with unit column stride) by slices of W's rows up to 32 rows of x (float32, one Zen 4
 * core, medians over three processes, 4096 x 4096: 1 row ties numpy, 4 rows 1.4-2.1x it; past
 * 6 rows the rows go in groups of 4 over 3 vectors of columns: 8 / 12 / 16 / 24 / 32 rows
 * 4.8 / 6.6 / 8.1 / 11.8-12.5 / 15.7-16.7 ms against numpy's 7.8 / 8.9 / 10.7 / 13.6 / 16.9
 * and, before, 6.4 (one group over one vector) / 11.0 / 12.6 / 15.4 / 19.2 (the packed path;
 * past 32 rows it runs at 1.00-1.02x numpy, fetching the next B block during the tiles). W from
 * this size on (the L3 of these machines) is prefetched two slices ahead by the first group of
 * rows (1 row 2.9 -> 2.4-2.6 ms, 4 rows 3.4 -> 2.6; a 16 MiB W that L3 held lost a third at
 * one row). */
#define PYTPP_MM_DOT_NN_MAX_M 32
#define PYTPP_MM_DOT_NN_PREFETCH_BYTES ((int64_t)32 << 20)
/* The products of rows stream B two ways, by the machine's L2 (the one difference between the
 * machines measured that the engine sees): from 1 MiB (Zen 4, Zen 5) x @ w.T prefetches the next
 * rows of w itself and x @ W reads slices of 8 rows (the figures above); on a 512 KiB L2 (Zen 3)
 * the hardware prefetchers alone stream w faster, and x @ W with up to 8 rows of x takes slices
 * of 4 rows (4096 x 4096 float32, one core, in-process A/B: w @ v 17.6 -> 21-25 GB/s; v @ W 1 /
 * 2 / 4 / 8 rows 4.09 / 5.18 / 5.91 / 7.86 -> 3.23 / 4.00 / 5.12 / 7.31 ms, numpy 2.88 / 8.09 /
 * 7.38 / 8.77; at 16 and 32 rows slices of 4 took 9-18% longer than of 8). */
#define PYTPP_MM_DOT_BIG_L2 ((int64_t)1 << 20)
#define PYTPP_MM_DOT_NN_SLICE4_MAX_M 8
/* A PackedMatrix (f32/f64) by rows (run_dot_packed) up to this many rows of A (PackedLinear
 * 4096 -> 4096, one Zen 4 core, AVX2: 1 row 2.95 -> 2.22 ms f32, 7.9 -> 4.9 f64; 4 rows 4.1 ->
 * 3.8 f32, 9.6 -> 8.3 f64; at 8 rows the packed GEMM is ahead, 5.5 against 7.7 f32). */
#define PYTPP_MM_DOT_PK_MAX_M 4
/* bf16 x @ w.T on the widened kernels by rows (run_dot_bf16) up to this many rows of x: where
 * the packed GEMM started to tie (4096 x 4096 w, one Zen 4 core, AVX2: 12 rows 8.4 ms by rows,
 * 8.8 packed; 16 rows 10.7 / 10.4). */
#define PYTPP_MM_DOT_BF16_MAX_M 12
/* Small-GEMM stacks (frame/smallgemm.c): 256 kflop, the stack size where 2 threads first beat 1
 * for 5^3 and 8^3 f64 products. */
#define PYTPP_SMM_PAR_MIN_FLOPS ((double)(1 << 18))
/* Small-GEMM handles (pytpp.tpp.gemm, _smallgemm.pyx): products under 64 kflop (up to 31^3)
 * keep the GIL: they end before another thread could take it, and releasing and re-acquiring
 * would double the ~0.2 us call. */
#define PYTPP_HANDLE_NOGIL_FLOPS 65536.0
/* Element-wise calls (frame/eltwise.c): 32 Ki elements (128 KiB of float32), ~5-10 us of the
 * cheapest ops. */
#define PYTPP_EW_PAR_MIN_ELEMS ((int64_t)1 << 15)

/* Element-wise outputs of at least this many bytes (with their inputs: a 32 MiB L3 and more)
 * are written by streaming stores, in rows of at least PYTPP_EW_STREAM_MIN_ROW bytes; smaller
 * ones stay in cache for whatever reads them next. Transposes stream from 8 MiB (their reads
 * and writes do not share lines). */
#define PYTPP_EW_STREAM_MIN_BYTES ((int64_t)16 << 20)
#define PYTPP_EW_STREAM_MIN_ROW 2048
#define PYTPP_EW_TRANSPOSE_STREAM_MIN_BYTES ((int64_t)8 << 20)
/* The streaming transpose's blocks read one line of each of 64 rows; the lines this many blocks
 * ahead are prefetched into L2 (the rows of a power-of-two matrix share a few L2 sets and are
 * more streams than the hardware prefetcher follows). 4096^2 float32, one core of the Zen 4
 * guest, in alternating builds: 8.0 -> 5.9 ms; 1 block ahead 6.5 ms, 4 like 2, into L1 no gain. */
#define PYTPP_EW_TRANSPOSE_PREFETCH_BLOCKS 2
/* The streaming transpose of rows a multiple of 4 KiB apart copies each strip of rows of x
 * (64, or 128 16-bit ones) into a buffer before moving it, when the strip's whole rows fit
 * this many bytes. One Zen 5 core, float32, ms before -> after (as a fraction of numpy's copy
 * of the same array): 4096^2 5.7 -> 4.6 (0.54 -> 0.71), 8192 x 2048 5.5 -> 4.7 (0.57 -> 0.69),
 * 2048 x 8192 5.8 -> 5.3 (0.56 -> 0.62); the AVX2 level on 4096^2 5.6-5.8 -> 4.4-4.7. Strips
 * cut into column chunks (rows of 1024 or 2048 float32 of 4096) lost the gain. */
#define PYTPP_EW_TRANSPOSE_STAGE_BYTES (2 * 1024 * 1024)
/* The scattering transpose of the convolution weight pack prefetches each source row this many
 * bytes ahead: a 3x3 512x512 float32 weight packed between two convolutions (its source out of
 * the caches), Zen 4 guest, one core: 1.81 -> 1.33 ms. */
#define PYTPP_EW_SCATTER_PREFETCH_BYTES 256

/* Embedding bags (embedding_rows.inc, frame/embedding.c): the table row this many bytes of
 * rows ahead (at least ROWS index positions, at most 4x) is prefetched into L2 while a bag is
 * summed: random rows of a table beyond the caches, the bytes in flight that cover the memory
 * latency, per ISA level (a proxy for the core's memory parallelism). AVX2: rows of 64 values,
 * float32 (256 bytes) 16 rows ahead, as measured best on Zen 3 (8 and 32 slower there, 16-32
 * alike on Zen 4), bfloat16 (128 bytes) 32 rows (a Zen 4 core: 1.79 -> 1.38 ms for 2048 bags
 * of 32-100 rows of a 1M-row table, torch 1.79). AVX-512, where the rows go into L1
 * (embedding_rows.inc): 8 KiB, 32 float32 rows or 64 bfloat16 ones (a Zen 5 core, the same
 * bags from memory: float32 1324 us at 32 rows, 1337 at 64, 1649 at 16, torch 1488; bfloat16
 * 1121 at 64, 1247 at 32, torch 1854; bags in cache: 32 float32 rows 99 us, 64 118). */
#define PYTPP_BAG_PREFETCH_BYTES_AVX2 4096
#define PYTPP_BAG_PREFETCH_BYTES_AVX512 8192
#define PYTPP_BAG_PREFETCH_ROWS 16

#endif
