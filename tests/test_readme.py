"""The README's usage example runs and computes what it says."""
import pathlib
import re

import numpy as np

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def test_readme_usage_example_runs():
    code = re.search(r"## Use\n\n```python\n(.*?)```", README.read_text(), re.S).group(1)
    ns = {}
    exec(compile(code, "README.md", "exec"), ns)
    a, b = ns["a"].astype(np.float64), ns["b"].astype(np.float64)
    # float32 result of a k=1024 product: |error| <= 2 k eps (|a||b|)
    np.testing.assert_array_less(np.abs(ns["c"] - a @ b), 2 * 1024 * 1.2e-7 * (np.abs(a) @ np.abs(b)))
    np.testing.assert_allclose(ns["s"], np.einsum("bik,bkj->ij", ns["blocks_a"], ns["blocks_b"]))
