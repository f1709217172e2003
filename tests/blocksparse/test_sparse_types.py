"""pytpp.sparse's public functions and methods carry type annotations (the rule
tests/typing/test_types.py checks for the other public modules)."""
import inspect

import pytest

import pytpp.sparse as S


def _public():
    for name in S.__all__:
        obj = getattr(S, name)
        if inspect.isfunction(obj):
            yield name, obj
    dunders = ("__init__", "__call__", "__matmul__", "__rmatmul__")
    for cls in (S.BSR, S.BCSC, S.SparseLinear):
        for klass in cls.__mro__:
            if klass is object:
                continue
            for name, obj in vars(klass).items():
                if isinstance(obj, (classmethod, staticmethod)):
                    obj = obj.__func__
                if isinstance(obj, property):
                    obj = obj.fget
                if inspect.isfunction(obj) and (not name.startswith("_") or name in dunders):
                    yield f"{cls.__name__}.{name}", obj


@pytest.mark.parametrize("name,fn", list(_public()), ids=[n for n, _ in _public()])
def test_annotated(name, fn):
    sig = inspect.signature(fn)
    missing = [p for p, param in sig.parameters.items()
               if p not in ("self", "cls") and param.annotation is inspect.Parameter.empty]
    assert not missing, f"{name}: parameters without a type: {missing}"
    assert sig.return_annotation is not inspect.Signature.empty, f"{name}: no return type"
