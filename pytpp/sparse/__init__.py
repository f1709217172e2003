"""pytpp.sparse: block-sparse x dense products (paper 001, III-C) with scipy interop.

Containers :class:`BSR` (block rows) and :class:`BCSC` (block columns), ``spmm`` for sparse x
dense and dense x sparse (also ``A @ b`` and ``x @ A``), magnitude block pruning (``prune``)
and ``SparseLinear`` for inference. Definitions and rules: docs/sparse.md."""
from pytpp.sparse._containers import BCSC, BSR
from pytpp.sparse._linear import SparseLinear
from pytpp.sparse._prune import prune
from pytpp.sparse._spmm import spmm

__all__ = ["BCSC", "BSR", "SparseLinear", "prune", "spmm"]
