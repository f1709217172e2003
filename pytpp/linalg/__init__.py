"""Contractions: matmul, batch-reduce GEMM, small-GEMM stacks, pre-packed weights."""
from pytpp.linalg._brgemm import brgemm
from pytpp.linalg._lowp import vnni_pack
from pytpp.linalg._matmul import matmul
from pytpp.linalg._packed import PackedMatrix, pack
from pytpp.linalg._smallgemm import batched_matmul, matmul_stack

__all__ = ["brgemm", "matmul", "matmul_stack", "batched_matmul", "PackedMatrix", "pack",
           "vnni_pack"]
