"""The source distribution installs on its own: `python -m build --sdist` (or setuptools' sdist),
`pip install` of the tarball into a fresh virtual environment, then pytpp imports and runs a
kernel there. Catches sources and headers missing from the sdist (the Cython modules, the
kernel templates). Marked slow: it compiles the whole engine (several minutes on two cores)."""
import pathlib
import subprocess
import sys
import tarfile
import venv

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _sdist(tmp):
    """Build the sdist from a clean copy of the tracked files; returns the tarball's path."""
    src = tmp / "src"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(src)], check=True)
    subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp / "dist")],
                   cwd=src, check=True, capture_output=True)
    (tarball,) = (tmp / "dist").glob("pytpp-*.tar.gz")
    return tarball


@pytest.mark.slow
def test_sdist_carries_every_source(tmp_path):
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tarball = _sdist(tmp_path)
    with tarfile.open(tarball) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    tracked = subprocess.run(["git", "ls-files", "pytpp"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    needed = [f for f in tracked if f.endswith((".pyx", ".pxd", ".pyi", ".h", ".inc", ".c",
                                                  ".py", "py.typed"))]
    missing = [f for f in needed if f not in names]
    assert not missing, f"sdist lacks {missing[:10]}"


@pytest.mark.slow
def test_sdist_installs_into_a_fresh_venv(tmp_path):
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tarball = _sdist(tmp_path)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", str(tarball)], check=True,
                   cwd=tmp_path)
    code = ("import numpy as np, pytpp; a = np.arange(12.0).reshape(3, 4); "
            "assert np.allclose(pytpp.matmul(a, a.T), a @ a.T); "
            "print(pytpp.__version__, pytpp.get_isa())")
    r = subprocess.run([str(py), "-c", code], check=True, capture_output=True, text=True,
                       cwd=tmp_path)
    assert r.stdout.strip()
