"""Contractions: batch-reduce GEMM (and, as the engine grows, matmul and small-GEMM stacks)."""
from pytpp.linalg._brgemm import brgemm
from pytpp.linalg._matmul import matmul
from pytpp.linalg._packed import PackedMatrix, pack
from pytpp.linalg._smallgemm import matmul_stack

__all__ = ["brgemm", "matmul", "matmul_stack", "PackedMatrix", "pack"]
