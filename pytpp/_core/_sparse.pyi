"""Glue of the block-sparse x dense driver (pytpp/_core/_sparse.pyx)."""
from numpy import ndarray

PLAIN: int
BF16_WIDENED: int
BF16_PAIRS: int

def bf16_mode() -> int: ...
def spmm_rows(indptr: ndarray, idx: ndarray, data: ndarray, b: ndarray, c: ndarray, mode: int,
              kb: int) -> None: ...
def spmm_cols(x: ndarray, indptr: ndarray, idx: ndarray, data: ndarray, c: ndarray,
              mode: int) -> None: ...
