"""pytpp.quant: affine quantization, exact 8-bit matrix products, quantized dense layers.

>>> import numpy as np, pytpp
>>> x = np.array([-1.0, 0.5, 2.0])
>>> s, z = pytpp.quant.choose_qparams(x, np.uint8)
>>> q = pytpp.quant.quantize(x, s, z)
>>> bool(np.abs(pytpp.quant.dequantize(q, s, z) - x).max() <= s / 2)
True
"""
from pytpp.quant._linear import QuantizedLinear, QuantizedMLP
from pytpp.quant._matmul import matmul_int8
from pytpp.quant._qparams import choose_qparams, dequantize, quantize

__all__ = ["quantize", "dequantize", "choose_qparams", "matmul_int8", "QuantizedLinear",
           "QuantizedMLP"]
