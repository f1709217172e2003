"""Optimizer steps as single fused passes, updating parameters and state in place.

Every array is read and written once per step and nothing is allocated (a gradient of another
dtype than the parameter's is the one exception: it is converted first). Parameters and state
must be C-contiguous and writable; checks run before anything is written."""
import math

import numpy as np

from pytpp import _validate
from pytpp._core import _optim
from pytpp._typing import Array, ArrayLike

__all__ = ["sgd_step", "adamw_step", "split_sgd_step"]

U16 = np.dtype(np.uint16)


def _state(a, name, fn, shape, dtypes):
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{fn}: {name} must be a numpy.ndarray (updated in place), got "
                        f"{type(a).__name__}")
    if a.dtype not in dtypes or not a.dtype.isnative:
        raise TypeError(f"{fn}: {name} has dtype {a.dtype}; expected "
                        f"{' or '.join(str(d) for d in dtypes)} in native byte order")
    if shape is not None and a.shape != shape:
        raise ValueError(f"{fn}: {name} has shape {a.shape}; expected {shape}")
    if not a.flags.c_contiguous:
        raise ValueError(f"{fn}: {name} must be C-contiguous (it is updated in place)")
    if not a.flags.writeable:
        raise ValueError(f"{fn}: {name} is read-only")
    return a


def _grad(g, fn, shape, dtype, allowed=None):
    arr = _validate.as_array(g, "grad", fn)
    if arr.shape != shape:
        raise ValueError(f"{fn}: grad has shape {arr.shape}; expected {shape}")
    if allowed is not None and arr.dtype in allowed:
        return np.ascontiguousarray(arr)
    return np.ascontiguousarray(arr, dtype=dtype)


def _disjoint(fn, **arrays):
    items = [(k, a) for k, a in arrays.items() if a is not None]
    for i, (ka, a) in enumerate(items):
        for kb, b in items[i + 1:]:
            if np.shares_memory(a, b):
                raise ValueError(f"{fn}: {ka} and {kb} share memory")


def sgd_step(param: Array, grad: ArrayLike, momentum_buffer: Array | None = None, *, lr: float,
             momentum: float = 0.0, weight_decay: float = 0.0) -> Array:
    """One ``torch.optim.SGD`` step in place (dampening 0, no Nesterov).

    ``d = grad + weight_decay * param``; with momentum ``buf = momentum * buf + d`` and
    ``param -= lr * buf``, else ``param -= lr * d``.

    Parameters
    ----------
    param : ndarray
        float32 or float64, C-contiguous, updated in place.
    grad : array_like
        Of param's shape (converted to param's dtype when it differs).
    momentum_buffer : ndarray, optional
        Of param's shape and dtype, updated in place; required when momentum is not 0. A buffer
        of zeros gives torch's first step (which starts the buffer at ``d``).
    lr : float
    momentum, weight_decay : float, optional
        Both >= 0.

    Returns
    -------
    ndarray
        param.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> p = np.ones(3, np.float32)
    >>> pytpp.nn.sgd_step(p, np.full(3, 0.5, np.float32), lr=0.1)
    array([0.95, 0.95, 0.95], dtype=float32)
    """
    fn = "pytpp.nn.sgd_step"
    p = _state(param, "param", fn, None, _validate.FLOAT_TYPES)
    g = _grad(grad, fn, p.shape, p.dtype)
    lr = _validate.real_arg(lr, "lr", fn, 0.0)
    momentum = _validate.real_arg(momentum, "momentum", fn, 0.0)
    weight_decay = _validate.real_arg(weight_decay, "weight_decay", fn, 0.0)
    buf = None
    if momentum != 0.0:
        if momentum_buffer is None:
            raise ValueError(f"{fn}: momentum={momentum} needs a momentum_buffer (zeros for the "
                             f"first step)")
        buf = _state(momentum_buffer, "momentum_buffer", fn, p.shape, (p.dtype,))
    _disjoint(fn, param=p, grad=g, momentum_buffer=buf)
    if p.size:
        _optim.sgd(p, g, buf, lr, momentum, weight_decay)
    return p


def adamw_step(param: Array, grad: ArrayLike, exp_avg: Array, exp_avg_sq: Array, *, step: int,
               lr: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
               weight_decay: float = 1e-2) -> Array:
    """One ``torch.optim.AdamW`` step in place (no amsgrad).

    ``param *= 1 - lr * weight_decay``; ``exp_avg += (1 - beta1) * (grad - exp_avg)``;
    ``exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * grad**2``;
    ``param -= lr / (1 - beta1**step) * exp_avg / (sqrt(exp_avg_sq) / sqrt(1 - beta2**step) + eps)``.

    Parameters
    ----------
    param : ndarray
        float32 or float64, C-contiguous, updated in place.
    grad : array_like
        Of param's shape (converted to param's dtype when it differs).
    exp_avg, exp_avg_sq : ndarray
        Of param's shape and dtype, updated in place (zeros before the first step).
    step : int
        The step number, counting from 1.
    lr, beta1, beta2, eps, weight_decay : float, optional
        torch's defaults; 0 <= beta < 1, eps and lr and weight_decay >= 0.

    Returns
    -------
    ndarray
        param.

    Examples
    --------
    >>> import numpy as np, pytpp
    >>> p, m, v = np.ones(2), np.zeros(2), np.zeros(2)
    >>> pytpp.nn.adamw_step(p, np.array([1.0, -1.0]), m, v, step=1, lr=0.1, weight_decay=0.0)
    array([0.9, 1.1])
    """
    fn = "pytpp.nn.adamw_step"
    p = _state(param, "param", fn, None, _validate.FLOAT_TYPES)
    g = _grad(grad, fn, p.shape, p.dtype)
    m = _state(exp_avg, "exp_avg", fn, p.shape, (p.dtype,))
    v = _state(exp_avg_sq, "exp_avg_sq", fn, p.shape, (p.dtype,))
    step = _validate.nonneg_int(step, "step", fn)
    if step < 1:
        raise ValueError(f"{fn}: step counts from 1, got {step}")
    lr = _validate.real_arg(lr, "lr", fn, 0.0)
    beta1 = _validate.real_arg(beta1, "beta1", fn, 0.0, 1.0)
    beta2 = _validate.real_arg(beta2, "beta2", fn, 0.0, 1.0)
    eps = _validate.real_arg(eps, "eps", fn, 0.0)
    weight_decay = _validate.real_arg(weight_decay, "weight_decay", fn, 0.0)
    _disjoint(fn, param=p, grad=g, exp_avg=m, exp_avg_sq=v)
    bc1 = 1.0 - beta1 ** step
    bc2_sqrt = math.sqrt(1.0 - beta2 ** step)
    if p.size:
        _optim.adamw(p, g, m, v, lr, beta1, beta2, eps, weight_decay, bc1, bc2_sqrt)
    return p


def split_sgd_step(param_hi: Array, param_lo: Array, grad: ArrayLike, *, lr: float) -> Array:
    """The bf16 split-SGD step of the TPP paper (5.1.3), in place: the float32 master weight is
    kept as two 16-bit halves, ``param_hi`` (bfloat16: the weight the model reads) and
    ``param_lo`` (uint16: the low bits), and updated as ``master -= lr * grad`` in float32.

    Parameters
    ----------
    param_hi : ndarray
        bfloat16 (ml_dtypes) or uint16 bits, C-contiguous, updated in place.
    param_lo : ndarray
        uint16 of the same shape, updated in place.
    grad : array_like
        float32 or bfloat16 of the same shape (other dtypes are converted to float32).
    lr : float

    Returns
    -------
    ndarray
        param_hi.

    Examples
    --------
    >>> import numpy as np, ml_dtypes, pytpp
    >>> master = np.array([1.0, 2.0], np.float32)
    >>> bits = master.view(np.uint32)
    >>> hi = (bits >> 16).astype(np.uint16).view(ml_dtypes.bfloat16)
    >>> lo = (bits & 0xFFFF).astype(np.uint16)
    >>> _ = pytpp.nn.split_sgd_step(hi, lo, np.array([1e-3, 1e-3], np.float32), lr=1.0)
    >>> ((hi.view(np.uint16).astype(np.uint32) << 16) | lo).view(np.float32)
    array([0.999, 1.999], dtype=float32)
    """
    fn = "pytpp.nn.split_sgd_step"
    hi = _state(param_hi, "param_hi", fn, None, (_validate.BF16, U16))
    lo = _state(param_lo, "param_lo", fn, hi.shape, (U16,))
    g = _grad(grad, fn, hi.shape, _validate.F32, allowed=(_validate.F32, _validate.BF16))
    lr = _validate.real_arg(lr, "lr", fn, 0.0)
    _disjoint(fn, param_hi=hi, param_lo=lo, grad=g)
    if hi.size:
        _optim.split_sgd(hi, lo, g, g.dtype == _validate.BF16, lr)
    return hi
