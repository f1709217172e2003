"""prune: magnitude block pruning of a dense matrix into a BSR."""
import numpy as np

from pytpp import _validate
from pytpp._typing import ArrayLike
from pytpp.sparse._containers import BSR, _compress, dense_blocks


def prune(w: ArrayLike, block: tuple[int, int], density: float) -> BSR:
    """The ``round(density * number of blocks)`` blocks of `w` of largest Frobenius norm, as a
    :class:`BSR` (magnitude block pruning: make a block-sparse layer from a dense one).

    Ties keep the block that comes first in row-major block order. Kept blocks are stored even
    if they are all zero (the count is exact).

    Parameters
    ----------
    w : array_like, 2-D
        float32, float64 or bfloat16 (other real dtypes become float64).
    block : (int, int)
        (bm, bk), dividing w's shape.
    density : float
        Fraction of blocks to keep, in [0, 1].

    Examples
    --------
    >>> import numpy as np
    >>> from pytpp.sparse import prune
    >>> w = np.arange(16, dtype=np.float32).reshape(4, 4)
    >>> p = prune(w, (2, 2), 0.5)
    >>> p.nblocks, p.indptr.tolist(), p.indices.tolist()
    (2, [0, 0, 2], [0, 1])
    """
    fn = "pytpp.sparse.prune"
    _, (m, k), (bm, bk), blocks = dense_blocks(w, "w", block, fn)
    dens = _validate.real_arg(density, "density", fn, lo=0.0)
    if dens > 1.0:
        raise ValueError(f"{fn}: density={density!r} is outside [0, 1]")
    nbr, nbc = m // bm, k // bk
    norms = np.square(blocks.astype(np.float64)).sum(axis=(2, 3)).ravel()
    keep = round(dens * nbr * nbc)
    # stable sort on -norm: equal norms keep row-major order
    chosen = np.sort(np.argsort(-norms, kind="stable")[:keep])
    r, c = np.divmod(chosen, nbc) if nbc else (chosen, chosen)
    indptr, indices, _ = _compress(r, c, nbr, order=np.arange(r.size))
    data = np.ascontiguousarray(blocks[r, c])
    return BSR((m, k), (bm, bk), indptr, indices, data, check=False)
