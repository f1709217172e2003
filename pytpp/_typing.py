"""Names of the types in pytpp's annotations, defined once (numpy.typing's, and pytpp's own).

``Array`` is an ndarray of any dtype; ``ArrayLike`` and ``DTypeLike`` are numpy's (anything
``np.asarray`` / ``np.dtype`` takes); ``Approx`` is what an ``approx=`` argument takes: False,
True or the name of an approximation; ``Seed`` what a dropout ``seed=`` takes;
``PackedOperand`` a pre-packed matrix operand.
"""
from typing import Any, Protocol, Union

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

Array = NDArray[Any]
Approx = Union[bool, str, None]
Seed = Union[int, np.integer[Any], np.random.Generator, np.random.SeedSequence, None]



class PackedOperand(Protocol):
    """What pytpp.matmul takes as a pre-packed right operand (a pytpp.linalg.PackedMatrix),
    named structurally so that the contraction code needs no import of the packed type."""
    _pytpp_packed: bool


__all__ = ["Array", "ArrayLike", "DTypeLike", "Approx", "Seed", "PackedOperand"]
