"""pytpp: Tensor Processing Primitives for Python.

SIMD kernels (BRGEMM, GEMM, element-wise TPPs) with a numpy-style API, dispatched at run time to
the best ISA level this CPU has.

>>> import numpy as np, pytpp
>>> a = np.ones((4, 3, 5)); b = np.ones((4, 5, 2))
>>> pytpp.brgemm(a, b)
array([[20., 20.],
       [20., 20.],
       [20., 20.]])
"""
from pytpp._version import __version__

from pytpp import _config
from pytpp._config import (available_isas, get_include, get_isa, get_num_threads, set_isa,
                           set_num_threads, use_isa)

_config._init()

from pytpp import tpp, linalg, nn, quant, sparse  # noqa: E402
from pytpp.linalg import brgemm, matmul  # noqa: E402
from pytpp._info import show_config  # noqa: E402
from pytpp import _threadpool  # noqa: E402

_threadpool.register()

__all__ = ["brgemm", "matmul", "tpp", "linalg", "nn", "quant", "sparse", "show_config", "get_include", "get_isa", "set_isa", "use_isa",
           "available_isas", "get_num_threads", "set_num_threads", "__version__"]
