"""pytpp._layout: copies between memory layouts by the transpose kernels, against numpy's copy
(every value moved, bit for bit), and the functions that bring a reduced axis last through it."""
import itertools

import ml_dtypes
import numpy as np
import pytest

import pytpp
from pytpp import _layout

BF16 = np.dtype(ml_dtypes.bfloat16)


def _layouts(rng, shape, dtype):
    """Arrays of `shape` in every axis order (dense), and a strided view (not dense)."""
    base = rng.standard_normal(shape).astype(dtype)
    for perm in itertools.permutations(range(len(shape))):
        mem = np.ascontiguousarray(base.transpose(perm))
        yield f"order {perm}", mem.transpose(np.argsort(perm))
    big = np.zeros(tuple(2 * n for n in shape), dtype)
    view = big[tuple(slice(None, None, 2) for _ in shape)]
    view[...] = base
    yield "strided", view


@pytest.mark.parametrize("dtype", [np.float64, np.float32, BF16, np.int8])
@pytest.mark.parametrize("shape", [(70, 90), (3, 1, 65, 80), (5, 64, 70), (2, 3, 40, 50), (4, 1)])
def test_copies_equal_numpys(isa, threads, rng, dtype, shape):
    arrays = list(_layouts(rng, shape, dtype))
    want = np.ascontiguousarray(arrays[0][1])
    for (sname, src), (dname, dst_like) in itertools.product(arrays, arrays):
        got = _layout.contiguous(src)
        assert got.flags.c_contiguous
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8), err_msg=sname)
        dst = np.zeros_like(dst_like)           # the same memory order as dst_like
        assert _layout.copy_into(dst, src) is dst
        np.testing.assert_array_equal(np.ascontiguousarray(dst).view(np.uint8),
                                      want.view(np.uint8), err_msg=f"{sname} -> {dname}")


def test_overlap_and_mixed_dtypes_go_to_numpy(rng):
    a = rng.standard_normal((100, 100))
    f = np.asfortranarray(a)
    f32 = np.empty((100, 100), np.float32)
    _layout.copy_into(f32, f)                     # another dtype: numpy's casting copy
    np.testing.assert_array_equal(f32, a.astype(np.float32))
    sq = np.asfortranarray(rng.standard_normal((64, 64)))
    want = sq.T.copy()
    _layout.copy_into(sq, sq.T)                   # overlapping: numpy's buffered copy
    np.testing.assert_array_equal(sq, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16])
def test_reductions_along_a_strided_axis_match_c_order(rng, dtype):
    """softmax, layer_norm and rms_norm of Fortran-ordered and moved-axis inputs: the bits of the
    C-ordered input (the same rows through the same kernel)."""
    x = rng.standard_normal((96, 130)).astype(dtype)
    f = np.asfortranarray(x)
    np.testing.assert_array_equal(pytpp.nn.softmax(f), pytpp.nn.softmax(x))
    np.testing.assert_array_equal(pytpp.nn.softmax(f, axis=0),
                                  pytpp.nn.softmax(np.ascontiguousarray(x.T)).T)
    np.testing.assert_array_equal(pytpp.nn.layer_norm(f, (130,)), pytpp.nn.layer_norm(x, (130,)))
    np.testing.assert_array_equal(pytpp.nn.rms_norm(f, (130,)), pytpp.nn.rms_norm(x, (130,)))
    out = np.zeros((96, 130), dtype, order="F")
    assert pytpp.nn.softmax(x, out=out) is out
    np.testing.assert_array_equal(out, pytpp.nn.softmax(x))
    x3 = rng.standard_normal((6, 70, 80)).astype(dtype)
    np.testing.assert_array_equal(pytpp.nn.softmax(x3, axis=1),
                                  np.moveaxis(pytpp.nn.softmax(np.moveaxis(x3, 1, -1).copy()),
                                              -1, 1))


def test_elementwise_results_keep_the_memory_order(rng):
    """As numpy's ufuncs (order 'K'): a Fortran-ordered input gives a Fortran-ordered result,
    computed as one long row."""
    x = np.asfortranarray(rng.standard_normal((50, 70)).astype(np.float32))
    y = pytpp.nn.gelu(x)
    assert y.flags.f_contiguous
    np.testing.assert_array_equal(y, pytpp.nn.gelu(np.ascontiguousarray(x)))
    g = pytpp.nn.relu_backward(x, x)
    assert g.flags.f_contiguous


@pytest.mark.parametrize("training", [False, True])
def test_batch_norm_of_channels_last_memory_runs_the_nhwc_kernels(rng, training):
    """An NCHW array whose memory is NHWC (torch's channels_last, seen through numpy) runs as
    NHWC: the NHWC call's bits, the result in the same memory order, the running statistics
    updated alike."""
    nhwc = rng.standard_normal((4, 9, 11, 24)).astype(np.float32)
    x = nhwc.transpose(0, 3, 1, 2)                  # NCHW axes over NHWC memory
    w, b = rng.standard_normal(24), rng.standard_normal(24)
    rm1, rv1, rm2, rv2 = np.zeros(24), np.ones(24), np.zeros(24), np.ones(24)
    y = pytpp.nn.batch_norm(x, rm1, rv1, w, b, training=training)
    want = pytpp.nn.batch_norm(nhwc, rm2, rv2, w, b, training=training, data_format="NHWC")
    np.testing.assert_array_equal(y, want.transpose(0, 3, 1, 2))
    assert np.moveaxis(y, 1, -1).flags.c_contiguous
    np.testing.assert_array_equal(rm1, rm2)
    np.testing.assert_array_equal(rv1, rv2)
    ref = pytpp.nn.batch_norm(np.ascontiguousarray(x), np.zeros(24), np.ones(24), w, b,
                              training=training)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    g = pytpp.nn.group_norm(x, 4)
    np.testing.assert_array_equal(g, pytpp.nn.group_norm(np.ascontiguousarray(x), 4))


def test_scratch_is_per_thread_and_reused(rng):
    """A slot's buffer is the calling thread's own, kept for its next call; larger than the
    limit, a fresh array each time."""
    import threading
    a = _layout.scratch("test", (100, 3), np.float32)
    b = _layout.scratch("test", (50, 2), np.float64)
    assert a.flags.c_contiguous and b.shape == (50, 2) and np.shares_memory(a, b)
    seen = []
    t = threading.Thread(target=lambda: seen.append(_layout.scratch("test", (100, 3), np.float32)))
    t.start()
    t.join()
    assert not np.shares_memory(seen[0], a)
    big = (_layout._SCRATCH_MAX // 8 + 1,)
    assert not np.shares_memory(_layout.scratch("test", big, np.float64),
                                _layout.scratch("test", big, np.float64))


def test_attention_of_transposed_heads_uses_scratch_copies_safely(rng):
    """q, k, v of shape (B, L, H, E) seen as (B, H, L, E) (the usual head split): the bits of
    the contiguous inputs, call after call with new data (the copies reuse buffers), forward
    and backward, from two threads at once."""
    import threading

    def heads(seed):
        r = np.random.default_rng(seed)
        return [r.standard_normal((2, 33, 3, 16)).astype(np.float32).transpose(0, 2, 1, 3)
                for _ in range(3)]
    errors = []

    def run(seed):
        for s in range(seed, seed + 4):
            q, k, v = heads(s)
            got = pytpp.nn.scaled_dot_product_attention(q, k, v)
            want = pytpp.nn.scaled_dot_product_attention(*(np.ascontiguousarray(a)
                                                           for a in (q, k, v)))
            if not np.array_equal(got, want):
                errors.append(s)
            g = np.ones_like(got)
            gq = pytpp.nn.scaled_dot_product_attention_backward(g, q, k, v)[0]
            wq = pytpp.nn.scaled_dot_product_attention_backward(
                g, *(np.ascontiguousarray(a) for a in (q, k, v)))[0]
            if not np.array_equal(gq, wq):
                errors.append(-s)
    threads = [threading.Thread(target=run, args=(100 * i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_conv_and_pooling_of_channels_last_memory_run_the_nhwc_kernels(rng):
    """conv2d, max_pool2d and avg_pool2d of an NCHW view over NHWC memory: the NHWC call's bits,
    returned in C order (as for any NCHW input); close to the C-ordered NCHW call."""
    nhwc = rng.standard_normal((2, 13, 11, 16)).astype(np.float32)
    x = nhwc.transpose(0, 3, 1, 2)
    w = rng.standard_normal((24, 16, 3, 3)).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    y = pytpp.nn.conv2d(x, w, b, padding=1, activation="relu")
    want = pytpp.nn.conv2d(nhwc, w, b, padding=1, activation="relu", data_format="NHWC")
    np.testing.assert_array_equal(y, want.transpose(0, 3, 1, 2))
    assert y.flags.c_contiguous
    ref = pytpp.nn.conv2d(np.ascontiguousarray(x), w, b, padding=1, activation="relu")
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-4)
    for pool in (pytpp.nn.max_pool2d, pytpp.nn.avg_pool2d):
        got = pool(x, 3, 2, 1)
        assert got.flags.c_contiguous
        np.testing.assert_array_equal(got, pool(nhwc, 3, 2, 1, data_format="NHWC")
                                      .transpose(0, 3, 1, 2))
        np.testing.assert_allclose(got, pool(np.ascontiguousarray(x), 3, 2, 1), rtol=1e-6)
