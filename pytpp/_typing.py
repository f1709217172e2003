"""Names of the types in pytpp's annotations, defined once (numpy.typing's, and pytpp's own).

``Array`` is an ndarray of any dtype; ``ArrayLike`` and ``DTypeLike`` are numpy's (anything
``np.asarray`` / ``np.dtype`` takes); ``Approx`` is what an ``approx=`` argument takes: False,
True or the name of an approximation; ``Seed`` what a dropout ``seed=`` takes.
"""
from typing import Any, Union

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

Array = NDArray[Any]
Approx = Union[bool, str, None]
Seed = Union[int, np.integer[Any], np.random.Generator, np.random.SeedSequence, None]

__all__ = ["Array", "ArrayLike", "DTypeLike", "Approx", "Seed"]
