"""Types users see: every public function and handle method is annotated, the compiled modules
have stubs that match them (mypy's stubtest), the package ships py.typed and the stubs, and
`mypy --strict` accepts a user script that calls each public function (user_script.py)."""
import importlib.util
import inspect
import os
import pathlib
import subprocess
import sys

import pytest

import pytpp

HERE = pathlib.Path(__file__).resolve().parent
PACKAGE = pathlib.Path(pytpp.__file__).resolve().parent
COMPILED = sorted(p.name.split(".")[0] for p in (PACKAGE / "_core").glob("*.so"))
HAS_MYPY = importlib.util.find_spec("mypy") is not None
needs_mypy = pytest.mark.skipif(not HAS_MYPY, reason="mypy not installed (pytpp[test])")


def _public_callables():
    for module in (pytpp, pytpp.linalg, pytpp.nn, pytpp.tpp):
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj):
                yield f"{module.__name__}.{name}", obj
    # classes users make or call (the handles are made by the pytpp.tpp factories)
    for cls, dunders in ((pytpp.linalg.PackedMatrix, ("__init__", "__array__", "__matmul__",
                                                      "__rmatmul__")),
                         (pytpp.tpp.EltwiseKernel, ("__call__",)),
                         (pytpp.tpp.TransformKernel, ("__call__",))):
        for name, obj in vars(cls).items():
            if inspect.isfunction(obj) and (not name.startswith("_") or name in dunders):
                yield f"{cls.__name__}.{name}", obj


@pytest.mark.parametrize("name,fn", list(_public_callables()),
                         ids=[n for n, _ in _public_callables()])
def test_public_function_is_annotated(name, fn):
    sig = inspect.signature(fn)
    missing = [p for p, param in sig.parameters.items()
               if p != "self" and param.annotation is inspect.Parameter.empty]
    assert not missing, f"{name}: parameters without a type: {missing}"
    assert sig.return_annotation is not inspect.Signature.empty, f"{name}: no return type"


def test_package_ships_its_types():
    assert (PACKAGE / "py.typed").exists()
    assert COMPILED, "no compiled modules found next to pytpp/_core"
    for module in COMPILED:
        assert (PACKAGE / "_core" / f"{module}.pyi").exists(), f"no stub for _core.{module}"
    pyproject = (PACKAGE.parent / "pyproject.toml")
    if pyproject.exists():                     # a source checkout: the wheel must list them
        text = pyproject.read_text()
        assert '"pytpp" = ["py.typed"]' in text and '"*.pyi"' in text


def _env():
    """The environment of a mypy run that finds the pytpp imported here (an editable install's
    import hook is invisible to mypy; the directory holding the package is not)."""
    root = str(PACKAGE.parent)
    path = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONPATH=root + (os.pathsep + path if path else ""))


@needs_mypy
def test_mypy_strict_accepts_a_user_script(tmp_path):
    res = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir",
                          str(tmp_path / "cache"), str(HERE / "user_script.py")],
                         cwd=tmp_path, env=_env(), capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_user_script_runs(tmp_path):
    """The script the types are checked on does what it says (a separate process: it sets the
    ISA level and thread count)."""
    res = subprocess.run([sys.executable, str(HERE / "user_script.py")], cwd=tmp_path,
                         env=_env(), capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


@needs_mypy
def test_stubs_match_the_compiled_modules(tmp_path):
    # Cython adds module attributes of its own (__test__, __pyx_capi__, pickling helpers)
    allow = tmp_path / "allowlist.txt"
    allow.write_text(r"pytpp\._core\.\w+\.__\w+__" + "\n")
    modules = [f"pytpp._core.{m}" for m in COMPILED]
    res = subprocess.run([sys.executable, "-m", "mypy.stubtest", *modules, "--allowlist",
                          str(allow)], cwd=tmp_path, env=_env(), capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
