"""Types of pytpp._core._lowp (Cython): the bf16 and 8-bit BRGEMM driver's glue."""
from typing import Any

from numpy.typing import NDArray
from typing_extensions import disjoint_base

U8: int
S8: int
BF16: int
I32: int
F32: int
I8_KERNELS: tuple[str, ...]
BF16_KERNELS: tuple[str, ...]

def i8_kernels_available(a_signed: bool = False, b_signed: bool = True,
                         a7: bool = False) -> tuple[str, ...]: ...
def kernel_name(isa: int, which: int, a_type: int, b_type: int) -> str: ...
def run(isa: int, which: int, a: Any, b: Any, c: NDArray[Any], geom: tuple[int, ...], mode: int,
        count: int, stride_a: int, stride_b: int, off_a: NDArray[Any] | None,
        off_b: NDArray[Any] | None, comp: NDArray[Any] | None,
        b_colsum: NDArray[Any] | None = ...) -> None: ...
def packed_colsums(isa: int, which: int, a_type: int, k: int, n: int,
                   packed: NDArray[Any]) -> NDArray[Any] | None: ...
def packed_bytes(isa: int, which: int, a_type: int, b_type: int, k: int, n: int) -> int: ...
def pack_b(isa: int, which: int, geom: tuple[int, ...], b: NDArray[Any], dst: NDArray[Any]) -> None: ...
def qlinear(isa: int, which: int, x: NDArray[Any], packed: NDArray[Any], colsum: NDArray[Any],
            w_scale: NDArray[Any], bias: NDArray[Any] | None, relu: bool, qmax: int,
            y: NDArray[Any]) -> tuple[float, int]: ...
def qlinear_u8(isa: int, which: int, q: NDArray[Any], scale: float, zp: int,
               packed: NDArray[Any], colsum: NDArray[Any], w_scale: NDArray[Any],
               bias: NDArray[Any] | None, relu: bool, y: NDArray[Any]) -> None: ...

@disjoint_base
class LowpHandle:
    """The C side of a low-precision handle (cimport it from pytpp/_core/_lowp.pxd)."""
    m: int
    n: int
    k: int
    stride_a: int
    stride_b: int
    descriptor: dict[str, Any]
    def __init__(self, isa: int, which: int, m: int, n: int, k: int, g: int, a_type: int,
                 b_type: int, c_type: int, accumulate: bool, descriptor: dict[str, Any]) -> None: ...
    def pack_b(self, b: NDArray[Any]) -> NDArray[Any]: ...
    def fast_call(self, a: object, b: object, c: object, count: object = None) -> bool: ...
