# C declarations of the element-wise engine (pytpp/_core/include/pytpp/eltwise.h).
from libc.stdint cimport int64_t, uint64_t, uint32_t, uint16_t, uint8_t
from pytpp._core.cengine cimport pytpp_table_info

cdef extern from "pytpp/eltwise.h" nogil:
    enum:
        PYTPP_EW_F64
        PYTPP_EW_F32
        PYTPP_EW_BF16
        PYTPP_EW_FAM_UNARY
        PYTPP_EW_FAM_BINARY
        PYTPP_EW_FAM_TERNARY
        PYTPP_EW_FAM_CMP
        PYTPP_EW_FAM_REDUCE
        PYTPP_EW_KIND_UNARY
        PYTPP_EW_KIND_BINARY
        PYTPP_EW_KIND_TERNARY
        PYTPP_EW_KIND_CMP
        PYTPP_EW_KIND_BLEND
        PYTPP_EW_KIND_DROPOUT
        PYTPP_EW_KIND_DROPOUT_INV
        PYTPP_EW_KIND_RAND
        PYTPP_EW_KIND_SOFTMAX
        PYTPP_EW_N_UNARY
        PYTPP_EW_N_BINARY
        PYTPP_EW_N_TERNARY
        PYTPP_Q_U8
        PYTPP_Q_S8
        PYTPP_Q_I32
        PYTPP_Q_PER_TENSOR
        PYTPP_Q_PER_COLUMN
        PYTPP_Q_PER_ROW

    const char *pytpp_ew_op_name(int family, int op)
    int pytpp_ew_approx_of(int op)

    ctypedef struct pytpp_ew_kernels:
        const char *name
        pytpp_table_info info
        const char *unary_symbols[PYTPP_EW_N_UNARY]
        const char *binary_symbols[PYTPP_EW_N_BINARY]
        int dtype
        int vl
        void *unary[PYTPP_EW_N_UNARY]
        void *binary[PYTPP_EW_N_BINARY]
        void *ternary[PYTPP_EW_N_TERNARY]
        void *cmp
        void *blend
        void *dropout
        void *dropout_inv
        void *rand
        void *softmax
        void *reduce_row
        void *reduce_acc
        void *transpose
        void *quantize
        void *quantize_f32
        void *dequantize
        void *load_cvt[3]
        void *store_cvt[3]

    ctypedef struct pytpp_ew_operand:
        void *p
        int64_t ld
        int dtype
        int bcast

    ctypedef struct pytpp_ew_call:
        int kind, op, nin
        int64_t m, n
        pytpp_ew_operand in_ "in"[3]
        pytpp_ew_operand out
        uint8_t *bits
        int64_t ldm
        uint64_t seed, base
        uint32_t thresh
        double scale
        int approx

    int pytpp_ew_run(const pytpp_ew_kernels *kt, const pytpp_ew_call *c, int nthreads)
    int pytpp_ew_reduce(const pytpp_ew_kernels *kt, int64_t m, int64_t n, const void *x,
                        int64_t ldx, int x_dt, void *out, int out_dt, int axis, int op,
                        int squared, int nthreads)
    int pytpp_ew_transpose(const pytpp_ew_kernels *kt32, const pytpp_ew_kernels *kt64, int esz,
                           int64_t m, int64_t n, const void *x, int64_t ldx, void *y,
                           int64_t ldy, int nthreads)
    int pytpp_ew_quantize(const pytpp_ew_kernels *kt32, const pytpp_ew_kernels *kt64,
                          int64_t m, int64_t n, const void *x, int64_t ldx, int x_dt, uint8_t *q,
                          int64_t ldq, int q_signed, const double *s, const double *z, int pmode,
                          int64_t period, int nthreads)
    int pytpp_ew_dequantize(const pytpp_ew_kernels *kt, int64_t m, int64_t n, const void *q,
                            int64_t ldq, int q_dt, void *y, int64_t ldy, int y_dt,
                            const double *s, const double *z, int pmode, int64_t period,
                            int nthreads)
    void pytpp_ew_vnni(int esz, int alpha, int64_t k, int64_t n, const void *x, int64_t ldx,
                       void *y)
    void pytpp_ew_vnni_transpose(int esz, int alpha, int64_t k, int64_t n, const void *x, void *y)
    void pytpp_ew_gather_rows(int esz, int64_t count, int64_t n, const void *x, int64_t ldx,
                              const int64_t *idx, void *y, int64_t ldy, int nthreads)
    void pytpp_ew_scatter_rows(int esz, int64_t count, int64_t n, const void *x, int64_t ldx,
                               const int64_t *idx, void *y, int64_t ldy)
    void pytpp_ew_unpack_f32(int64_t n, const uint32_t *x, uint16_t *hi, uint16_t *lo)
    void pytpp_ew_pack_f32(int64_t n, const uint16_t *hi, const uint16_t *lo, uint32_t *x)

    const pytpp_ew_kernels pytpp_ew_f64_ref, pytpp_ew_f32_ref
    const pytpp_ew_kernels pytpp_ew_f64_avx2, pytpp_ew_f32_avx2
    const pytpp_ew_kernels pytpp_ew_f64_avx512, pytpp_ew_f32_avx512
