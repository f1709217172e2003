"""Run the Examples of every public module's docstrings against the installed package."""
import doctest
import importlib
import pkgutil

import numpy as np
import pytest

import pytpp


def _modules():
    names = ["pytpp"]
    for info in pkgutil.walk_packages(pytpp.__path__, "pytpp."):
        if ".benchmarks" in info.name or info.name.endswith("__main__"):
            continue
        names.append(info.name)
    return names


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name):
    module = importlib.import_module(name)
    with np.printoptions(legacy=False):
        finder = doctest.DocTestFinder(exclude_empty=True)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        for test in finder.find(module, name, globs={"np": np}):
            runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"
