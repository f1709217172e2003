"""Types of pytpp._core._eltwise (Cython): the element-wise TPP engine behind ``pytpp.nn`` and
the ``pytpp.tpp.unary/binary/ternary`` handles."""
from typing import Any

import numpy as np
from numpy.typing import NDArray

F64: int
F32: int
BF16: int
KIND_UNARY: int
KIND_BINARY: int
KIND_TERNARY: int
KIND_CMP: int
KIND_BLEND: int
KIND_RAND: int
KIND_SOFTMAX: int
KIND_DROPOUT: int
KIND_DROPOUT_INV: int
Q_U8: int
Q_S8: int
Q_I32: int
Q_PER_TENSOR: int
Q_PER_COLUMN: int
Q_PER_ROW: int
UNARY_CODES: dict[str, int]
BINARY_CODES: dict[str, int]
TERNARY_CODES: dict[str, int]
CMP_CODES: dict[str, int]
REDUCE_CODES: dict[str, int]
APPROX_OF: dict[str, str]

def table_name(isa: int, cdt: int) -> str: ...
def table_slots(isa: int, cdt: int) -> dict[str, list[tuple[str, bool]]]: ...
def check_buffer(arr: Any, name: str, dtype: np.dtype[Any], need: int, fn: str,
                 writable: bool = False) -> NDArray[Any]: ...
def run(kind: int, op: int, m: int, n: int, ins: tuple[Any, ...], out: Any, cdt: int, isa: int,
        bits: NDArray[Any] | None = None, ldm: int = 0, seed: int = 0, base: int = 0,
        thresh: int = 0, scale: float = 1.0, approx: int = 0,
        threads: int | None = None) -> None: ...
def reduce(x: NDArray[Any], m: int, n: int, ldx: int, x_dt: int, out: NDArray[Any], out_dt: int,
           axis: int, op: int, squared: bool, cdt: int, isa: int) -> None: ...
def transpose(x: NDArray[Any], m: int, n: int, ldx: int, y: NDArray[Any], ldy: int, esz: int,
              isa: int) -> None: ...
def quantize(x: NDArray[Any], m: int, n: int, ldx: int, x_dt: int, q: NDArray[Any], ldq: int,
             q_signed: bool, s: NDArray[np.float64], z: NDArray[np.float64], pmode: int,
             period: int, isa: int, threads: int | None = None) -> bool: ...
def dequantize(q: NDArray[Any], m: int, n: int, ldq: int, q_dt: int, y: NDArray[Any], ldy: int,
               y_dt: int, s: NDArray[np.float64], z: NDArray[np.float64], pmode: int,
               period: int, isa: int, threads: int | None = None) -> None: ...
def vnni(x: NDArray[Any], k: int, n: int, ldx: int, y: NDArray[Any], esz: int,
         alpha: int) -> None: ...
def vnni_transpose(x: NDArray[Any], k: int, n: int, y: NDArray[Any], esz: int,
                   alpha: int) -> None: ...
def gather_rows(x: NDArray[Any], ldx: int, idx: NDArray[Any], n: int, y: NDArray[Any], ldy: int,
                esz: int) -> None: ...
def scatter_rows(x: NDArray[Any], ldx: int, idx: NDArray[Any], n: int, y: NDArray[Any], ldy: int,
                 esz: int) -> None: ...
def unpack_f32(x: NDArray[Any], hi: NDArray[Any], lo: NDArray[Any]) -> None: ...
def pack_f32(hi: NDArray[Any], lo: NDArray[Any], x: NDArray[Any]) -> None: ...
