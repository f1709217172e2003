"""Contractions: batch-reduce GEMM (and, as the engine grows, matmul and small-GEMM stacks)."""
from pytpp.linalg._brgemm import brgemm
from pytpp.linalg._smallgemm import matmul_stack

__all__ = ["brgemm", "matmul_stack"]
