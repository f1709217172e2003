"""Glue of the normalisation kernels (pytpp/_core/_norm.pyx)."""
from numpy import ndarray

LAYER: int
RMS: int

def forward(kind: int, x: ndarray, w: ndarray | None, b: ndarray | None, eps: float,
            y: ndarray, mean: ndarray | None, rstd: ndarray) -> None: ...
def backward(kind: int, g: ndarray, x: ndarray, mean: ndarray | None, rstd: ndarray,
             w: ndarray | None, dx: ndarray, gw: ndarray | None, gb: ndarray | None) -> None: ...
def group_forward(x: ndarray, n: int, c: int, hw: int, groups: int, w: ndarray | None,
                  b: ndarray | None, eps: float, y: ndarray, mean: ndarray,
                  rstd: ndarray) -> None: ...
def group_backward(g: ndarray, x: ndarray, n: int, c: int, hw: int, groups: int, mean: ndarray,
                   rstd: ndarray, w: ndarray | None, dx: ndarray, gw: ndarray | None,
                   gb: ndarray | None) -> None: ...
def batch_forward(nhwc: bool, training: bool, x: ndarray, n: int, c: int, hw: int,
                  w: ndarray | None, b: ndarray | None, eps: float, y: ndarray, mean: ndarray,
                  var: ndarray, rstd: ndarray) -> None: ...
def batch_backward(nhwc: bool, g: ndarray, x: ndarray, n: int, c: int, hw: int, mean: ndarray,
                   rstd: ndarray, w: ndarray | None, dx: ndarray, gw: ndarray | None,
                   gb: ndarray | None) -> None: ...
