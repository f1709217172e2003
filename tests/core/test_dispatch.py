"""The one dispatch table (pytpp/_core/include/pytpp/dispatch.h) and what it reports: every
required kernel slot filled at every level, `python -m pytpp info --kernels`, and the generated
kernel map docs/kernels.md kept current."""
import pathlib
import subprocess
import sys

import pytest

import pytpp
from pytpp import _info
from pytpp._core import _runtime

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "kernels.md"


@pytest.mark.parametrize("level", range(len(_runtime.LEVELS)))
def test_no_required_slot_is_empty(level):
    # reading a table runs none of its kernels: every level is checked, not only this CPU's
    assert _runtime.missing_kernels(level) == 0


def test_info_kernels_names_the_symbols():
    res = subprocess.run([sys.executable, "-m", "pytpp", "info", "--kernels"], capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stderr
    rows = {}
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) == 5 and parts[1] in ("f64", "f32", "bf16"):
            rows[(parts[0], parts[1])] = parts[2:]
    level = pytpp.get_isa()
    for family in ("brgemm", "gemm", "gelu", "softmax", "matmul"):
        for dt in ("f64", "f32"):
            symbol, table, template = rows[(family, dt)]
            assert symbol.startswith(("tpp_", "pytpp_")) and table.startswith("pytpp_")
            assert level in symbol and template.endswith(".inc")
    assert rows[("gelu", "f32")][0] == f"tpp_ew_gelu_f32_{level}_row"


def test_kernels_follow_the_active_level():
    with pytpp.use_isa("ref"):
        rows = _info.kernels()
    assert all("_ref" in sym for _, _, sym, _, _ in rows)


def test_every_kernel_symbol_is_listed_once():
    for level in range(len(_runtime.LEVELS)):
        t = _runtime.kernel_tables(level)
        infos = [t["brgemm"][d] for d in t["brgemm"]] + [t["matmul"][d] for d in ("f64", "f32")]
        infos += [i for d in t["gemm"] for i in t["gemm"][d]] + list(t["eltwise"].values())
        for info in infos:
            assert len(set(info["kernels"])) == len(info["kernels"]), info["symbol"]
            assert all(k.startswith("tpp_") for k in info["kernels"])


def test_kernel_map_is_current():
    assert DOCS.read_text() == _info.kernel_map(), (
        "docs/kernels.md is stale: regenerate it with "
        "`python -m pytpp info --kernel-map > docs/kernels.md`")
