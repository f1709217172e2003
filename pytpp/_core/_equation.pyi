"""Types of pytpp._core._equation (Cython): the TPP matrix-equation engine."""
from typing import Any

from numpy import ndarray
from typing_extensions import disjoint_base

UNARY: int
BINARY: int
TERNARY: int
REDUCE: int
MATMUL: int
OUT: int
MAX_VTEMPS: int
F64: int
F32: int
BF16: int

@disjoint_base
class Program:
    def __new__(cls, instrs: list[tuple[int, int, int, int, int, int, int, int]], ntemps: int,
                ninputs: int, dtype: int) -> Program: ...
    def run_dense(self, inputs: tuple[Any, ...], in_types: tuple[Any, ...],
                  in_codes: tuple[int, ...], consts: list[ndarray[Any, Any]], out: Any,
                  out_type: Any, out_code: int, m: int, n: int,
                  strategy: int) -> ndarray[Any, Any] | None: ...
    def run(self, inputs: list[ndarray[Any, Any]], specs: list[tuple[int, int, int]],
            out: ndarray[Any, Any], out_dtype: int, strategy: int) -> None: ...
