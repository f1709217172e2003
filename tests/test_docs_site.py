"""The documentation site (docs/site: the API reference from the docstrings, the notes of docs/)
builds with warnings as errors."""
import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NEEDS = ("sphinx", "numpydoc", "myst_parser")


@pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in NEEDS),
                    reason="the docs extra (sphinx, numpydoc, myst-parser) is not installed")
def test_site_builds_without_warnings(tmp_path):
    r = subprocess.run([sys.executable, "-m", "sphinx", "-q", "-W", "-b", "html",
                        os.path.join(ROOT, "docs", "site"), str(tmp_path / "html")],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "html" / "api.html").exists()
