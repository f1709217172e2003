"""BSR / BCSC: construction from dense and scipy (every input format, sparray and spmatrix,
explicit zeros, unsorted indices, duplicates), round trips, .T, pickling, validation."""
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sparse_helpers import BF16, DTYPES, block_sparse

from pytpp.sparse import BCSC, BSR

CLASSES = [BSR, BCSC]


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("block", [(1, 1), (1, 4), (4, 1), (2, 3), (8, 8)])
def test_from_dense_round_trip(rng, cls, dtype, block):
    bm, bk = block
    a = block_sparse(rng, (5 * bm, 4 * bk), block, 0.4, dtype, empty_rows=(2,))
    S = cls.from_dense(a, block=block)
    assert S.shape == a.shape and S.block == block and S.dtype == dtype
    np.testing.assert_array_equal(S.to_dense(), a)
    nz = (np.abs(a.astype(np.float64)).reshape(5, bm, 4, bk).max(axis=(1, 3)) > 0)
    assert S.nblocks == nz.sum()
    assert S.nnz == nz.sum() * bm * bk
    assert S.density == nz.sum() / 20
    assert S.indptr.dtype == np.int64 and S.indices.dtype == np.int32
    m = S.to_scipy()
    assert isinstance(m, sp.bsr_array) and m.blocksize == block
    assert m.nnz == S.nnz and m.has_sorted_indices
    np.testing.assert_array_equal(m.toarray(), a.astype(np.float32 if dtype == BF16 else dtype))


def test_from_dense_threshold():
    a = np.zeros((4, 4), np.float32)
    a[0, 0], a[2, 3] = 0.5, 2.0
    assert BSR.from_dense(a, block=(2, 2)).nblocks == 2
    assert BSR.from_dense(a, block=(2, 2), threshold=0.5).nblocks == 1  # strictly exceeds
    assert BSR.from_dense(a, block=(2, 2), threshold=2.0).nblocks == 0


def test_block_order_is_canonical(rng):
    a = block_sparse(rng, (12, 12), (3, 3), 0.6, np.float64)
    R, C = BSR.from_dense(a, block=(3, 3)), BCSC.from_dense(a, block=(3, 3))
    rows = np.repeat(np.arange(4), np.diff(R.indptr))
    assert list(zip(rows, R.indices)) == sorted(zip(rows, R.indices))
    cols = np.repeat(np.arange(4), np.diff(C.indptr))
    assert list(zip(cols, C.indices)) == sorted(zip(cols, C.indices))
    # the same blocks, in each other's order
    assert R.nblocks == C.nblocks
    for p in range(C.nblocks):
        r, c = C.indices[p], cols[p]
        np.testing.assert_array_equal(C.data[p], a[3 * r:3 * r + 3, 3 * c:3 * c + 3])


@pytest.mark.parametrize("cls", CLASSES)
def test_transpose_shares_values(rng, cls):
    a = block_sparse(rng, (8, 12), (2, 3), 0.5, np.float32)
    S = cls.from_dense(a, block=(2, 3))
    T = S.T
    assert type(T) is (BCSC if cls is BSR else BSR)
    assert T.shape == (12, 8) and T.block == (3, 2)
    assert np.shares_memory(T.data, S.data) and T.indptr is S.indptr
    np.testing.assert_array_equal(T.to_dense(), a.T)
    np.testing.assert_array_equal(T.T.to_dense(), a)


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_pickle(rng, cls, dtype):
    a = block_sparse(rng, (8, 8), (4, 2), 0.5, dtype)
    S = cls.from_dense(a, block=(4, 2))
    _ = S @ np.ones((8, 3), dtype)  # fills the kernel-form cache, which is not pickled
    S2 = pickle.loads(pickle.dumps(S.T))
    assert type(S2) is type(S.T)
    np.testing.assert_array_equal(S2.to_dense(), a.T)
    assert S2.dtype == dtype


FORMATS = ["bsr", "csr", "csc", "coo"]


def _scipy(kind, fmt, a, block):
    cls = {"array": {"bsr": sp.bsr_array, "csr": sp.csr_array, "csc": sp.csc_array,
                     "coo": sp.coo_array},
           "matrix": {"bsr": sp.bsr_matrix, "csr": sp.csr_matrix, "csc": sp.csc_matrix,
                      "coo": sp.coo_matrix}}[kind][fmt]
    return cls(a, blocksize=block) if fmt == "bsr" else cls(a)


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", ["array", "matrix"])
def test_from_scipy_formats(rng, cls, fmt, kind):
    a = block_sparse(rng, (12, 8), (3, 2), 0.5, np.float32)
    m = _scipy(kind, fmt, a, (3, 2))
    before = m.copy()
    S = cls.from_scipy(m, block=(3, 2))
    np.testing.assert_array_equal(S.to_dense(), a)
    back = S.to_scipy()
    assert back.blocksize == (3, 2)
    np.testing.assert_array_equal(back.toarray(), a)
    # m untouched
    assert m.format == before.format and (m != before).nnz == 0
    if fmt == "bsr":
        np.testing.assert_array_equal(m.data, before.data)


def test_from_scipy_keeps_explicit_zero_blocks():
    data = np.zeros((2, 2, 2), np.float32)
    data[1] = 1.0
    m = sp.bsr_array((data, np.array([1, 0]), np.array([0, 1, 2])), shape=(4, 4))
    S = BSR.from_scipy(m)
    assert S.nblocks == 2 and S.nnz == 8
    back = S.to_scipy()
    assert back.nnz == 8
    np.testing.assert_array_equal(back.data, m.data)
    np.testing.assert_array_equal(back.indices, m.indices)


def test_from_scipy_unsorted_and_duplicates():
    # bsr with unsorted block columns inside a block row
    data = np.arange(12, dtype=np.float64).reshape(3, 2, 2)
    m = sp.bsr_array((data, np.array([2, 0, 1]), np.array([0, 3, 3])), shape=(4, 6))
    assert not m.has_sorted_indices
    S = BSR.from_scipy(m)
    assert S.indices.tolist() == [0, 1, 2]
    np.testing.assert_array_equal(S.to_dense(), m.toarray())
    assert not m.has_sorted_indices  # m not modified
    C = BCSC.from_scipy(m)
    np.testing.assert_array_equal(C.to_dense(), m.toarray())
    # coo with duplicates: summed
    coo = sp.coo_array((np.array([1.0, 2.0, 5.0]), (np.array([0, 0, 3]), np.array([1, 1, 2]))),
                       shape=(4, 4))
    S = BSR.from_scipy(coo, block=(2, 2))
    assert S.to_dense()[0, 1] == 3.0 and S.to_dense()[3, 2] == 5.0
    assert coo.nnz == 3  # m not modified
    # csr with an explicit zero and unsorted column indices
    csr = sp.csr_array((np.array([0.0, 4.0]), np.array([3, 0]), np.array([0, 2, 2])),
                       shape=(2, 4))
    S = BSR.from_scipy(csr, block=(1, 2))
    assert S.nblocks == 2  # the explicit zero's block is kept, as tobsr keeps it
    np.testing.assert_array_equal(S.to_dense(), csr.toarray())


@pytest.mark.parametrize("cls", CLASSES)
def test_bad_blocks(cls):
    a = np.ones((4, 6), np.float32)
    with pytest.raises(ValueError, match="block"):
        cls.from_dense(a, block=(3, 3))
    with pytest.raises(ValueError, match="block"):
        cls.from_dense(a, block=(0, 3))
    with pytest.raises(ValueError, match="block"):
        cls.from_dense(a, block=(-2, 3))
    with pytest.raises(TypeError, match="block"):
        cls.from_dense(a, block=2)
    with pytest.raises(ValueError, match="block"):
        cls.from_scipy(sp.csr_array(a), block=(4, 4))
    with pytest.raises(ValueError, match="block"):
        cls.from_scipy(sp.csr_array(a))
    with pytest.raises(ValueError, match="blocksize"):
        cls.from_scipy(sp.bsr_array(a, blocksize=(2, 2)), block=(1, 2))
    with pytest.raises(TypeError):
        cls.from_scipy(a)


@pytest.mark.parametrize("cls", CLASSES)
def test_check_validates_user_arrays(cls):
    d = np.ones((2, 2, 2), np.float32)
    ok = cls((4, 4), (2, 2), [0, 1, 2], [1, 0], d)
    assert ok.nblocks == 2
    with pytest.raises(ValueError, match="indices"):
        cls((4, 4), (2, 2), [0, 1, 2], [1, 2], d)  # out of range
    with pytest.raises(ValueError, match="indices"):
        cls((4, 4), (2, 2), [0, 2, 2], [1, 0], d)  # unsorted in a group
    with pytest.raises(ValueError, match="indices"):
        cls((4, 4), (2, 2), [0, 2, 2], [1, 1], d)  # duplicate block
    with pytest.raises(ValueError, match="indices"):
        cls((4, 4), (2, 2), [0, 1, 2], [-1, 0], d)
    with pytest.raises(ValueError, match="indptr"):
        cls((4, 4), (2, 2), [0, 2, 1], [1, 0], d)
    with pytest.raises(ValueError, match="indptr"):
        cls((4, 4), (2, 2), [0, 1], [1, 0], d)
    with pytest.raises(ValueError, match="indptr"):
        cls((4, 4), (2, 2), [1, 1, 2], [1, 0], d)
    with pytest.raises(ValueError, match="data"):
        cls((4, 4), (2, 2), [0, 1, 2], [1, 0], np.ones((2, 2, 3), np.float32))
    with pytest.raises(TypeError, match="data"):
        cls((4, 4), (2, 2), [0, 1, 2], [1, 0], np.ones((2, 2, 2), np.int32))
    with pytest.raises(ValueError, match="block"):
        cls((4, 5), (2, 2), [0, 1, 2], [1, 0], d)
    # check=False trusts the structure (but still checks shapes)
    cls((4, 4), (2, 2), [0, 2, 2], [1, 0], d, check=False)
