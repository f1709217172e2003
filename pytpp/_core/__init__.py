"""The engine: C kernels per ISA level, loop drivers, and the thin Cython glue over them."""
