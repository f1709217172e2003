"""Glue of the normalisation kernels (pytpp/_core/_norm.pyx)."""
from numpy import ndarray

LAYER: int
RMS: int

def forward(kind: int, x: ndarray, w: ndarray | None, b: ndarray | None, eps: float,
            y: ndarray, mean: ndarray | None, rstd: ndarray) -> None: ...
def backward(kind: int, g: ndarray, x: ndarray, mean: ndarray | None, rstd: ndarray,
             w: ndarray | None, dx: ndarray, gw: ndarray | None, gb: ndarray | None) -> None: ...
