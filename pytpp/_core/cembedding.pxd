# Declarations of the embedding-bag engine (pytpp/_core/include/pytpp/embedding.h).
from libc.stdint cimport int64_t
from pytpp._core.cengine cimport pytpp_table_info

cdef extern from "pytpp/embedding.h" nogil:
    enum:
        PYTPP_BAG_SUM
        PYTPP_BAG_MEAN
        PYTPP_BAG_MAX

    ctypedef struct pytpp_bag_index:
        const void *idx
        int idx64
        int64_t nidx
        const int64_t *offsets
        int64_t nbags
        int mode
        const void *psw

    ctypedef struct pytpp_embedding_kernels:
        const char *name
        pytpp_table_info info
        int esz
        int prefetch_bytes

    int pytpp_embedding_bag_forward(const pytpp_embedding_kernels *kt, const pytpp_bag_index *ix,
                                    int64_t dim, const void *w, int w_bf16, int64_t ldw, void *y,
                                    int y_bf16, int nthreads)
    int pytpp_embedding_bag_backward(const pytpp_embedding_kernels *kt, const pytpp_bag_index *ix,
                                     int64_t dim, const void *g, const void *w, int w_bf16,
                                     int64_t ldw, void *out, int out_bf16, int64_t nrows,
                                     int nthreads)
    int pytpp_embedding_bag_backward_rows(const pytpp_embedding_kernels *kt,
                                          const pytpp_bag_index *ix, int64_t dim, const void *g,
                                          const void *w, int w_bf16, int64_t ldw, int64_t nslots,
                                          const int64_t *ends, const int64_t *pos,
                                          const int64_t *pbag, void *out, int nthreads)
    void pytpp_embedding_gather(const void *w, int64_t row_bytes, int64_t ldw_bytes,
                                const void *idx, int idx64, int64_t n, void *out,
                                int64_t prefetch_bytes, int nthreads)
