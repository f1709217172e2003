"""The TPP layer: descriptors in, cached kernel handles out (dispatch once, call many times).

>>> import numpy as np, pytpp
>>> k = pytpp.tpp.brgemm(2, 3, 4, dtype=np.float64, beta=0.0)
>>> k is pytpp.tpp.brgemm(2, 3, 4, dtype="float64", beta=0)
True
>>> a = np.ones((5, 2, 4)); b = np.ones((5, 4, 3)); c = np.empty((2, 3))
>>> k(a, b, c, 5)
array([[20., 20., 20.],
       [20., 20., 20.]])
"""
from pytpp.tpp._cache import clear as clear_cache
from pytpp.tpp._gemm import brgemm
from pytpp.tpp._eltwise import (BINARY_OPS, TERNARY_OPS, UNARY_OPS, approx_choices,  # noqa: E402
                                binary, ternary, unary)
from pytpp.tpp._smallgemm import gemm  # noqa: E402
# the handle classes the factories return, by name for annotations and isinstance
from pytpp._core._brgemm import BrgemmKernel  # noqa: E402
from pytpp._core._smallgemm import GemmKernel  # noqa: E402
from pytpp.tpp._handles import EltwiseKernel, TransformKernel  # noqa: E402
from pytpp.tpp._lowp import LowpKernel  # noqa: E402
from pytpp.tpp._quant import QuantKernel  # noqa: E402

__all__ = ["brgemm", "gemm", "clear_cache", "unary", "binary", "ternary", "approx_choices",
           "UNARY_OPS", "BINARY_OPS", "TERNARY_OPS", "BrgemmKernel", "GemmKernel", "EltwiseKernel",
           "TransformKernel", "LowpKernel", "QuantKernel"]
