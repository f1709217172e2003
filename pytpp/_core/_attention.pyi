"""Glue of the tiled attention (pytpp/_core/_attention.pyx)."""
from numpy import ndarray

def sdpa_forward(q: ndarray, k: ndarray, v: ndarray, o: ndarray, mask: ndarray | None,
                 msb: int, msl: int, mss: int, causal: bool, scale: float, seed: int = 0,
                 thresh: int = 0, keep: float = 1.0, path: int = 0) -> None: ...
def sdpa_backward(go: ndarray, q: ndarray, k: ndarray, v: ndarray, dq: ndarray, dk: ndarray,
                  dv: ndarray, mask: ndarray | None, msb: int, msl: int, mss: int, causal: bool,
                  scale: float, seed: int = 0, thresh: int = 0, keep: float = 1.0) -> None: ...
