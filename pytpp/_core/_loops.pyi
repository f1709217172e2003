"""Types of pytpp._core._loops (Cython): loop nests run in C with a C body."""
from typing import Any

from numpy import ndarray

from pytpp._core._equation import Program
from typing_extensions import disjoint_base

MAX_LOOPS: int
MAX_LEVELS: int

def gemm_panel_width(f64: bool, bn: int) -> int: ...

@disjoint_base
class CNest:
    def __new__(cls, levels: list[tuple[int, int, int, int, int, int]], starts: list[int],
                ends: list[int], sched: int, chunk: int, grid_r: int, grid_c: int) -> CNest: ...
    def trace(self, nthreads: int, cap: int) -> ndarray[Any, Any]: ...
    def gemm(self, nthreads: int, a: ndarray[Any, Any], b: ndarray[Any, Any],
             c: ndarray[Any, Any], m: int, n: int, kb: int, bm: int, bn: int, bk: int,
             k_step: int, pw: int) -> None: ...
    def equation(self, nthreads: int, prog: Program, inputs: list[ndarray[Any, Any]],
                 specs: list[tuple[int, int, int]], out: ndarray[Any, Any], out_dtype: int,
                 strategy: int, row_loop: int, col_loop: int, bm: int, bn: int) -> None: ...
