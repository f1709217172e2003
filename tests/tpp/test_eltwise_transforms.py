"""Transform TPPs: reductions, transpose (shuffle networks), VNNI formatting, gather/scatter rows,
replicate column, unpack/pack. Data movement is exact; reductions within k * eps * sum|x|."""
import ml_dtypes
import numpy as np
import pytest

from pytpp.tpp import binary, unary

BF16 = np.dtype(ml_dtypes.bfloat16)
SHAPES = [(1, 1), (7, 17), (17, 33), (33, 63), (65, 7), (16, 16), (64, 65), (130, 129)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16, np.int8, np.int64])
def test_transpose(isa, rng, threads, dtype):
    for m, n in SHAPES:
        x = (rng.standard_normal((m, n + 3)) * 50).astype(dtype)
        out = np.full((n, m + 2), 7, dtype)
        unary("transpose", m, n, dtype, ldi=n + 3, ldo=m + 2)(x, out)
        np.testing.assert_array_equal(out[:, :m], x[:, :n].T)
        assert (out[:, m:] == 7).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16, np.int64])
@pytest.mark.parametrize("out_row_bytes", [2048, 4096, 8192, 12288])
def test_transpose_output_rows_on_aliasing_strides(isa, rng, threads, dtype, out_row_bytes):
    """Output rows a multiple of 2 KiB apart (in cache): up to 8 KiB apart each 64 x 64 tile
    goes through the thread's two buffers, farther apart tiles of 16 columns; odd sizes leave
    partial tiles at both edges, and the padding past m in each output row stays untouched."""
    ldo = out_row_bytes // np.dtype(dtype).itemsize
    for m, n in [(ldo - 3, 67), (min(ldo, 200) - 1, 130), (65, 1), (1, 129)]:
        x = (rng.standard_normal((m, n + 5)) * 50).astype(dtype)
        out = np.full((n, ldo), 7, dtype)
        unary("transpose", m, n, dtype, ldi=n + 5, ldo=ldo)(x, out)
        np.testing.assert_array_equal(out[:, :m], x[:, :n].T)
        assert (out[:, m:] == 7).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16, np.int8])
@pytest.mark.parametrize("offset", [0, 1, 5, 13])
def test_transpose_of_rows_starting_inside_a_line(isa, rng, threads, dtype, offset):
    """Rows of x a whole number of 64-byte lines apart, all starting `offset` elements into a
    line: the columns before the first line boundary go as a strip of their own (the tiles
    then read whole lines); odd shapes, padding untouched, blocks of the in-cache grid."""
    esz = np.dtype(dtype).itemsize
    ldi = 1024 // esz
    for m, n in [(37, ldi - 20), (130, 200), (16, 3), (5, 129), (64, 64)]:
        n = min(n, ldi - offset)
        buf = (rng.standard_normal(m * ldi + 64 + offset) * 50).astype(dtype)
        flat = buf[(-buf.ctypes.data % 64) // esz + offset:]
        out = np.full((n, m + 2), 7, dtype)
        unary("transpose", m, n, dtype, ldi=ldi, ldo=m + 2)(flat, out)
        x = np.lib.stride_tricks.as_strided(flat, (m, n), (ldi * esz, esz))
        np.testing.assert_array_equal(out[:, :m], x.T)
        assert (out[:, m:] == 7).all()


@pytest.mark.parametrize("op,ref", [("sum", np.sum), ("mul", np.prod), ("max", np.max), ("min", np.min)])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16])
def test_reduce(isa, rng, op, ref, axis, dtype):
    for m, n in SHAPES:
        x = (rng.uniform(0.5, 1.5, (m, n)) * rng.choice([-1, 1], (m, n))).astype(dtype)
        for squared in (False, True):
            out = np.empty(n if axis == 0 else m, dtype)
            unary("reduce", m, n, dtype, axis=axis, reduce_op=op, squared=squared)(x, out)
            xv = x.astype(np.float64)
            want = ref(xv * xv if squared else xv, axis=axis)
            k = m if axis == 0 else n
            eps = 2 ** -8 if dtype == BF16 else np.finfo(dtype).eps
            np.testing.assert_allclose(out.astype(np.float64), want, rtol=2 * k * eps + eps,
                                       atol=k * eps * 2.25)


def test_reduce_zero_rows():
    out = np.empty(4, np.float32)
    unary("reduce", 0, 4, np.float32, axis=0, reduce_op="max")(np.empty(0, np.float32), out)
    assert (out == -np.inf).all()


@pytest.mark.parametrize("dtype,alpha", [(BF16, 2), (np.int8, 4), (np.uint8, 4), (np.float32, 2)])
def test_vnni(rng, dtype, alpha):
    for k, n in [(1, 1), (4, 8), (7, 5), (16, 33), (9, 64)]:
        x = (rng.standard_normal((k, n)) * 30).astype(dtype)
        kb = -(-k // alpha)
        out = np.empty((kb, n, alpha), dtype)
        unary("vnni", k, n, dtype, alpha=alpha)(x, out)
        pad = np.zeros((kb * alpha, n), dtype)
        pad[:k] = x
        np.testing.assert_array_equal(out, pad.reshape(kb, alpha, n).transpose(0, 2, 1))
        # VNNI -> VNNI-transpose: the VNNI form of x^T
        nb = -(-n // alpha)
        vt = np.empty((nb, kb * alpha, alpha), dtype)
        unary("vnni_transpose", k, n, dtype, alpha=alpha)(out, vt)
        padt = np.zeros((nb * alpha, kb * alpha), dtype)
        padt[:n, :k] = x.T
        np.testing.assert_array_equal(vt, padt.reshape(nb, alpha, kb * alpha).transpose(0, 2, 1))


def test_gather_scatter_replicate(isa, rng):
    x = rng.standard_normal((10, 7)).astype(np.float32)
    idx = np.array([3, 3, 0, 9])
    out = np.empty((4, 7), np.float32)
    unary("gather_rows", 10, 7, np.float32)(x, idx, out)
    np.testing.assert_array_equal(out, x[idx])
    y = np.zeros((10, 7), np.float32)
    unary("scatter_rows", 10, 7, np.float32)(out, np.array([1, 2, 5, 9]), y)
    want = np.zeros((10, 7), np.float32)
    want[[1, 2, 5, 9]] = x[idx]
    np.testing.assert_array_equal(y, want)
    with pytest.raises(ValueError, match="index entries"):
        unary("gather_rows", 10, 7, np.float32)(x, np.array([10]), out)
    col = np.arange(5, dtype=np.float32)
    rep = np.empty((5, 9), np.float32)
    unary("replicate_col", 5, 9, np.float32)(col, rep)
    np.testing.assert_array_equal(rep, np.repeat(col[:, None], 9, axis=1))


def test_unpack_pack(rng):
    x = rng.standard_normal((7, 9)).astype(np.float32)
    hi, lo = np.empty((7, 9), np.uint16), np.empty((7, 9), np.uint16)
    unary("unpack", 7, 9, np.float32)(x, hi, lo)
    np.testing.assert_array_equal(hi, (x.view(np.uint32) >> 16).astype(np.uint16))
    # the high half is x truncated to bfloat16
    np.testing.assert_array_equal(hi.view(BF16).astype(np.float32),
                                  (x.view(np.uint32) & 0xFFFF0000).view(np.float32))
    back = np.empty((7, 9), np.float32)
    binary("pack", 7, 9)(hi, lo, back)
    np.testing.assert_array_equal(back.view(np.uint32), x.view(np.uint32))


@pytest.mark.parametrize("dtype,m,n", [(np.float32, 1030, 2050), (np.float64, 515, 2049),
                                       (BF16, 2050, 2052), (BF16, 2049, 2051)])
@pytest.mark.parametrize("offset", [0, 1, 3])
def test_transpose_large_streaming(isa, dtype, m, n, offset):
    """Outputs of 8 MB and more take the streaming-store path: the tile grid is shifted to
    64-byte lines of the output (misaligned by `offset` elements here), odd m and n leave edges;
    the result is exact (a permutation)."""
    rng = np.random.default_rng(m + offset)
    x = rng.standard_normal((m, n)).astype(dtype)
    buf = np.full(n * m + offset, np.nan, dtype)
    out = buf[offset:].reshape(n, m)
    unary("transpose", m, n, dtype)(x, out)
    np.testing.assert_array_equal(out.view(np.uint8), np.ascontiguousarray(x.T).view(np.uint8))
