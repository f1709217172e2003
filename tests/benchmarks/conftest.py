"""The tiny benchmark run (bench_tiny) the report and compare tests share, run once."""
import pytest
from bench_tiny import HAS_MPL, bench


@pytest.fixture(scope="session")
def report_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench")
    extra = ["--plot", str(tmp / "run.png")] if HAS_MPL else []
    return bench(tmp, "run", *extra), tmp
