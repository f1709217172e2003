"""Types of pytpp._core._brgemm (Cython): the BRGEMM kernel handle of ``pytpp.tpp.brgemm``."""
from typing import Any, Sequence

from numpy.typing import ArrayLike, NDArray
from typing_extensions import disjoint_base

MODES: tuple[str, ...]

@disjoint_base
class BrgemmKernel:
    """A dispatched BRGEMM: ``C = alpha * sum_i op(A_i) @ op(B_i) + beta * C``."""

    @property
    def mode(self) -> int: ...
    @property
    def stride_a(self) -> int: ...
    @property
    def stride_b(self) -> int: ...
    @property
    def descriptor(self) -> dict[str, Any]: ...
    @property
    def isa(self) -> str: ...
    def __init__(self, m: int, n: int, k: int, dtype: int, isa: int, mode: int, lda: int,
                 ldb: int, ldc: int, trans_a: bool, trans_b: bool, alpha: float, beta: float,
                 stride_a: int, stride_b: int, descriptor: dict[str, Any]) -> None: ...
    def __call__(self, a: NDArray[Any] | Sequence[NDArray[Any]],
                 b: NDArray[Any] | Sequence[NDArray[Any]], c: NDArray[Any],
                 *batch: int | ArrayLike) -> NDArray[Any]: ...

def brgemm_strided(a: NDArray[Any], b: NDArray[Any], out: NDArray[Any], alpha: float,
                   beta: float, isa: int) -> NDArray[Any]: ...
def brgemm_fast(a: Any, b: Any, c: Any, beta: float, out: Any, isa: int) -> NDArray[Any] | None: ...
