"""The functions dask tasks run on workers: one pytpp call per block (or per pair of blocks).

Each task first makes sure its process runs pytpp with the threads its dask worker was given
(`worker_threads`), so a host with several worker processes never runs workers x cores threads.
"""
import numpy as np

import pytpp

_configured = {}


def worker_threads():
    """Set pytpp's threads to the calling dask worker's thread count, once per process. Outside a
    worker (the local and threaded schedulers) nothing changes."""
    try:
        from distributed import get_worker
        worker = get_worker()
    except (ImportError, ValueError):
        return
    nthreads = worker.state.nthreads
    if _configured.get("nthreads") != nthreads:
        pytpp.set_num_threads(nthreads)
        _configured["nthreads"] = nthreads


def matmul_partial(a, b):
    """One k chunk's product for dask's matmul layout: the contraction axis put back (length 1)
    in the second-to-last place, where the tree sum over k chunks expects it."""
    worker_threads()
    return pytpp.matmul(a, b)[..., np.newaxis, :]


def _k_slab(blocks, axis):
    """The k slab of one operand from its blocks along k (a list, as blockwise passes them
    without concatenating): the block itself when k is one chunk, no copy."""
    if not isinstance(blocks, list):
        return blocks
    return blocks[0] if len(blocks) == 1 else np.concatenate(blocks, axis=axis)


def matmul_slab(a, b):
    """A whole output block from the full k slabs of a and b (lists of their k blocks): one GEMM,
    no partial products."""
    worker_threads()
    return pytpp.matmul(_k_slab(a, -1), _k_slab(b, -2))


def sum_blocks(blocks, axis=None, keepdims=False):
    """Sum of partial results (a list, or one array) over `axis`, accumulated in place."""
    if not isinstance(blocks, list):
        return blocks.sum(axis=axis, keepdims=keepdims)
    total = blocks[0].sum(axis=axis, keepdims=keepdims)
    for blk in blocks[1:]:
        total += blk.sum(axis=axis, keepdims=keepdims)
    return total


def brgemm_partial(a, b):
    """sum_i a[i] @ b[i] of one batch chunk (k blocks as lists, as matmul_slab's), with a
    leading length-1 axis for the tree sum."""
    worker_threads()
    return pytpp.brgemm(_k_slab(a, -1), _k_slab(b, -2))[np.newaxis]


def elementwise(*arrays, op, **kwargs):
    """pytpp.nn.<op> of one block (or of the blocks of grad and x for a backward form)."""
    worker_threads()
    return getattr(pytpp.nn, op)(*arrays, **kwargs)


def linear(x, w, bias, residual=None, *, activation=None):
    """pytpp.nn.linear of one block of rows."""
    worker_threads()
    return pytpp.nn.linear(x, w, bias, activation=activation, residual=residual)


def conv2d(x, w, bias, **kwargs):
    """pytpp.nn.conv2d of one chunk of the batch (w: the PackedConvWeight sent once)."""
    worker_threads()
    return pytpp.nn.conv2d(x, w, bias, **kwargs)
