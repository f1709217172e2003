"""Contractions: batch-reduce GEMM (and, as the engine grows, matmul and small-GEMM stacks)."""
from pytpp.linalg._brgemm import brgemm

__all__ = ["brgemm"]
