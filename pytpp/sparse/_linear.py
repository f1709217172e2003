"""SparseLinear: inference with a block-sparse weight, y = x @ weight.T + bias."""
from pytpp import _validate
from pytpp._typing import Array, ArrayLike
from pytpp.sparse._containers import _BlockSparse
from pytpp.sparse._spmm import prepare_right, spmm


class SparseLinear:
    """A linear layer with a block-sparse weight, for inference: ``lin(x) = x @ weight.T + bias``.

    Parameters
    ----------
    weight : BSR or BCSC
        (out_features, in_features), torch's layout. ``weight.T`` is the right operand of a
        dense x sparse product walked by its block columns (the weight's block rows); the form
        the kernel reads is made once, here.
    bias : array_like, optional
        (out_features,), added in the result dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from pytpp.sparse import SparseLinear, prune
    >>> w = np.arange(32, dtype=np.float32).reshape(4, 8)
    >>> lin = SparseLinear(prune(w, (2, 4), 0.5), bias=np.ones(4, np.float32))
    >>> x = np.ones((3, 8), np.float32)
    >>> lin(x).shape, bool(np.allclose(lin(x), x @ lin.weight.to_dense().T + 1))
    ((3, 4), True)
    """

    def __init__(self, weight: _BlockSparse, bias: ArrayLike | None = None) -> None:
        fn = "pytpp.sparse.SparseLinear"
        if not isinstance(weight, _BlockSparse):
            raise TypeError(f"{fn}: weight must be a pytpp.sparse BSR or BCSC, got "
                            f"{type(weight).__name__}")
        self.weight = weight
        self.out_features, self.in_features = weight.shape
        self._wt = weight.T  # type: ignore[attr-defined]
        prepare_right(self._wt)  # the kernels' forms of weight.T, once
        rdt = _validate.F32 if weight.dtype == _validate.BF16 else weight.dtype
        if bias is not None:
            bias = _validate.as_array(bias, "bias", fn)
            if bias.shape != (self.out_features,):
                raise ValueError(f"{fn}: bias must have shape ({self.out_features},), got "
                                 f"{bias.shape}")
            bias = bias.astype(rdt)
        self.bias = bias

    def __call__(self, x: ArrayLike) -> Array:
        """x (..., in_features) of the weight's dtype -> (..., out_features)."""
        fn = "pytpp.sparse.SparseLinear"
        x = _validate.as_array(x, "x", fn)
        if x.ndim < 1 or x.shape[-1] != self.in_features:
            raise ValueError(f"{fn}: x must have shape (..., {self.in_features}), got {x.shape}")
        lead = x.shape[:-1]
        y = spmm(x.reshape(-1, self.in_features), self._wt)
        if self.bias is not None:
            y += self.bias
        return y.reshape(*lead, self.out_features)

    def __repr__(self) -> str:
        return (f"SparseLinear(in_features={self.in_features}, out_features="
                f"{self.out_features}, block={self.weight.block}, density="
                f"{self.weight.density:.3g}, bias={self.bias is not None})")
