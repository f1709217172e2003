"""Arrays beyond the caches take the streaming-store kernels (unary ops and softmax from 16 MiB of
output, transpose from 8 MiB): heads and tails up to whole cache lines, prefetching, row-pipelined
softmax. They must give the same bits as the cached kernels, which run on pieces below the
thresholds, for misaligned views and odd sizes."""
import ml_dtypes
import numpy as np
import pytest

from pytpp import nn
from pytpp.tpp import unary

BF16 = np.dtype(ml_dtypes.bfloat16)
MIB = 1 << 20


@pytest.fixture
def streaming_isa(isa):
    """ISA levels with streaming stores (the portable one stores plainly: nothing to compare)."""
    if isa == "ref":
        pytest.skip("the portable level has no streaming kernels")
    return isa


def view(n, dtype, offset, fill=np.nan):
    """n elements of dtype starting `offset` elements into a fresh buffer (misaligned)."""
    return np.full(n + offset, fill, dtype)[offset:]


@pytest.mark.parametrize("dtype", [np.float32, BF16, np.float64])
@pytest.mark.parametrize("op,approx", [("exp", True), ("gelu", False), ("relu", False)])
@pytest.mark.parametrize("offset", [0, 7])
def test_unary_streaming_same_bits(streaming_isa, threads, dtype, op, approx, offset):
    n = 17 * MIB // np.dtype(dtype).itemsize + 13          # > 16 MiB out (the threshold), odd
    rng = np.random.default_rng(offset)
    x = view(n, dtype, offset)
    x[:] = (rng.standard_normal(n) * 3).astype(dtype)
    y = view(n, dtype, offset + 3)
    unary(op, 1, n, dtype, approx=approx)(x, y)            # one long row: streaming
    want = np.empty(n, dtype)
    k = n // 3                                             # pieces below the threshold
    for a, b in ((0, k), (k, 2 * k), (2 * k, n)):
        unary(op, 1, b - a, dtype, approx=approx)(x[a:b], want[a:b])
    np.testing.assert_array_equal(y.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("shape,offset", [((4100, 1030), 3), ((2049, 2064), 0), ((4097, 1024), 16)])
@pytest.mark.parametrize("approx", [False, True])
def test_softmax_streaming_same_bits(streaming_isa, threads, shape, offset, approx):
    m, n = shape
    rng = np.random.default_rng(m)
    x = view(m * n, np.float32, offset).reshape(m, n)
    x[:] = rng.standard_normal((m, n)).astype(np.float32) * 4
    x[5, :7] = -np.inf                                     # masked entries stay exact zeros
    y = view(m * n, np.float32, 1).reshape(m, n)
    nn.softmax(x, approx=approx, out=y)
    want = np.empty((m, n), np.float32)
    h = m // 3
    for a, b in ((0, h), (h, m)):
        nn.softmax(x[a:b], approx=approx, out=want[a:b])
    np.testing.assert_array_equal(y, want)
    assert (y[5, :7] == 0).all()


@pytest.mark.parametrize("ld,yoff", [(1024, 0), (1024, 16), (1024, 512), (1061, 5)])
def test_softmax_streaming_page_offsets(streaming_isa, ld, yoff):
    """x and y at every relation of page offsets (the kernel places its row buffers and orders
    the streamed blocks by them), rows of x strided by ld, the ring of blocks wrapping."""
    m, n = 4200, 1024
    rng = np.random.default_rng(ld + yoff)
    x = np.empty((m, ld), np.float32)[:, 3:3 + n] if ld != n else np.empty((m, n), np.float32)
    x[:] = rng.standard_normal((m, n)).astype(np.float32) * 4
    y = view(m * n, np.float32, yoff).reshape(m, n)
    nn.softmax(x, out=y)
    want = np.empty((m, n), np.float32)
    h = m // 3
    for a, b in ((0, h), (h, 2 * h), (2 * h, m)):
        nn.softmax(x[a:b], out=want[a:b])
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("dtype,m,n", [(np.float32, 1088, 2050), (np.float64, 544, 2049),
                                       (BF16, 2176, 2052), (np.float32, 1040, 2064),
                                       (np.float32, 1037, 2053), (np.float64, 517, 2051),
                                       (BF16, 2175, 2051),
                                       # rows a multiple of 4 KiB apart: strips staged
                                       (np.float32, 1090, 2048), (np.float64, 547, 2048),
                                       (BF16, 2180, 2048), (BF16, 2179, 4096)])
@pytest.mark.parametrize("xoff,yoff", [(0, 0), (4, 12), (1, 3)])
def test_transpose_streaming_blocks(streaming_isa, threads, dtype, m, n, xoff, yoff):
    """Beyond 8 MiB. Output rows a whole number of 64-byte lines (m * size % 64 == 0): the
    blocked streaming path, with the tile grid shifted to the lines of x and of y; other rows
    (the last three cases): the same blocks, each row's whole lines streamed and the partial
    lines at its ends stored. Columns past the last block,
    rows past the last 64-row block, and the prefetch two blocks ahead stopping at a row's end.
    Rows a multiple of 4 KiB apart (n = 2048, 4096): each strip copied into a row buffer first,
    the last strip short."""
    rng = np.random.default_rng(m + xoff)
    x = view(m * n, dtype, xoff).reshape(m, n)
    x[:] = rng.standard_normal((m, n)).astype(dtype)
    out = view(n * m, dtype, yoff).reshape(n, m)
    unary("transpose", m, n, dtype)(x, out)
    np.testing.assert_array_equal(out.view(np.uint8), np.ascontiguousarray(x.T).view(np.uint8))



@pytest.mark.parametrize("yoff", [0, 5])
def test_transpose_staged_strips_of_a_wider_buffer(streaming_isa, threads, yoff):
    """x's rows lie 16 KiB apart in a wider buffer (ldi = 4096 > n): the staged strips copy
    only the n columns of each row, and strips of 64 rows end short (m = 1100)."""
    m, n, ld = 1100, 3001, 4096
    rng = np.random.default_rng(yoff)
    buf = rng.standard_normal(m * ld).astype(np.float32)
    out = view(n * m, np.float32, yoff).reshape(n, m)
    unary("transpose", m, n, np.float32, ldi=ld)(buf, out)
    np.testing.assert_array_equal(out, buf.reshape(m, ld)[:, :n].T)
