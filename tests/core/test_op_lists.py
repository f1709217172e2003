"""The element-wise op lists (pytpp/_core/include/pytpp/eltwise_ops.h) are the one source of op
codes: Python reads them by name, so the tables cannot drift from C. These tests check that what
Python exposes is exactly what C lists, that every required kernel slot is filled at every level,
and that each op computes what its name says."""
import math
import warnings

import numpy as np
import pytest
from scipy import special

import pytpp
from pytpp._core import _eltwise as _ew
from pytpp.tpp import _eltwise as E


def test_codes_are_the_c_list_order():
    for codes in (_ew.UNARY_CODES, _ew.BINARY_CODES, _ew.TERNARY_CODES, _ew.CMP_CODES,
                  _ew.REDUCE_CODES):
        assert sorted(codes.values()) == list(range(len(codes)))
        assert len(set(codes)) == len(codes)


def test_python_tables_are_views_of_the_c_lists():
    assert set(E.MATH_CODES) | set(_ew.APPROX_OF) == set(_ew.UNARY_CODES)
    for name, code in E.MATH_CODES.items():
        assert _ew.UNARY_CODES[name] == code
    for name, code in E.BACKWARD_CODES.items():
        assert _ew.BINARY_CODES[name] == code
    for name, exact in _ew.APPROX_OF.items():
        assert exact in E.MATH_CODES and name.startswith(exact + "_")
    # every public op name the TPP layer takes is a C op or a transform
    transforms = {"dropout", "dropout_inv", "rand", "reduce", "transpose", "vnni",
                  "vnni_transpose", "gather_rows", "scatter_rows", "replicate_col", "unpack",
                  "compare", "pack", "blend", "quantize", "dequantize"}
    for op in pytpp.tpp.UNARY_OPS + pytpp.tpp.BINARY_OPS + pytpp.tpp.TERNARY_OPS:
        assert (op in _ew.UNARY_CODES or op in _ew.BINARY_CODES or op in _ew.TERNARY_CODES
                or op in transforms), op


@pytest.mark.parametrize("level", pytpp.available_isas())
@pytest.mark.parametrize("cdt", [0, 1], ids=["f64", "f32"])
def test_every_required_slot_is_filled(level, cdt):
    slots = _ew.table_slots(pytpp._core._runtime.isa_index(level), cdt)
    missing = [(family, name) for family, names in slots.items() for name, ok in names if not ok]
    assert not missing


# float64 references of the unary math ops
REF = {
    "identity": lambda x: x, "zero": np.zeros_like, "square": np.square,
    "increment": lambda x: x + 1, "decrement": lambda x: x - 1, "negate": np.negative,
    "abs": np.abs, "sqrt": lambda x: np.sqrt(np.abs(x)), "reciprocal": lambda x: 1 / x,
    "rsqrt": lambda x: 1 / np.sqrt(np.abs(x)), "relu": lambda x: np.maximum(x, 0),
    "exp": np.exp, "tanh": np.tanh, "sigmoid": special.expit,
    "gelu": lambda x: x * 0.5 * (1 + special.erf(x / math.sqrt(2))),
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
}


@pytest.mark.parametrize("op", sorted(E.MATH_CODES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_each_op_computes_its_name(op, dtype, isa):
    x = np.linspace(-3, 3, 101).astype(dtype)
    if op in ("sqrt", "rsqrt"):
        x = np.abs(x) + 0.5
    if op == "reciprocal":
        x = x + 0.013
    out = np.empty_like(x)
    pytpp.tpp.unary(op, 1, x.size, dtype)(x, out)
    # exact forms: within a few ulp of the float64 reference (scaled by the value)
    tol = 8 * np.finfo(dtype).eps
    np.testing.assert_allclose(out, REF[op](x.astype(np.float64)), rtol=tol, atol=tol)
    for approx in E.approx_choices(op)[1:]:
        pytpp.tpp.unary(op, 1, x.size, dtype, approx=approx)(x, out)
        np.testing.assert_allclose(out, REF[op](x.astype(np.float64)), rtol=2e-4, atol=2e-4)


def test_approx_vocabulary():
    x = np.linspace(-2, 2, 64).astype(np.float32)
    assert E.approx_choices("tanh") == (False, True, "pade", "minimax")
    assert E.approx_choices("relu") == (False,)
    with pytest.raises(ValueError, match="no approximation"):
        pytpp.tpp.unary("relu", 1, 4, approx=True)
    with pytest.raises(ValueError, match="approx must be one of"):
        pytpp.nn.tanh(x, approx="fastest")
    for old in (None, "none", "exact", "fast"):
        with pytest.warns(DeprecationWarning, match="deprecated"):
            y = pytpp.nn.tanh(x, approx=old)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            np.testing.assert_array_equal(y, pytpp.nn.tanh(x, approx=old == "fast"))
