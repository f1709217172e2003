"""The loop-string autotuner (pytpp._tune): candidates, model, timing, persistence, CLI."""
import json

import numpy as np
import pytest

from pytpp import _tune, loops


def test_candidates_follow_the_constraints():
    cands = _tune.candidates()
    assert len(cands) == len(set(cands)) > 50
    for s in cands:
        p = loops.parse(s)
        assert p.occurrences[0] == 1 and 1 <= p.occurrences[1] <= 2 and 1 <= p.occurrences[2] <= 2
        par = [lv for lv in p.levels if lv.parallel]
        assert 1 <= len(par) <= 2 and all(lv.loop != 0 for lv in par)


def test_model_prefers_locality():
    """Many small blocks streamed from memory: a string reusing the B slice of a column of C
    blocks is predicted no slower than one that revisits every slice from memory."""
    good = _tune.model("cBa", 512, 512, 4096, threads=1)
    assert good > 0
    assert _tune.model("aBc", 512, 512, 4096, threads=1) > 0


def test_tune_persists_and_reuses(tmp_path, monkeypatch, capsys):
    path = tmp_path / "t.json"
    monkeypatch.setenv("PYTPP_TUNE_CACHE", str(path))
    r = _tune.tune_gemm(96, 80, 130, np.float32, threads=1, top=3, max_candidates=12,
                        min_timed=3)
    assert r["best"] in [s for s, _, _ in r["ranking"]]
    timed = [s for s, _, t in r["ranking"] if t is not None]
    assert len(timed) == 3 and r["best"] in timed
    assert len({s.lower() for s in timed}) == 3     # one thread: one timing per loop nest
    data = json.loads(path.read_text())
    assert len(data) == 1 and next(iter(data.values()))["best"] == r["best"]
    assert _tune.tuned(96, 80, 130, np.float32, threads=1) == r["best"]
    assert _tune.tuned(96, 80, 131, np.float32, threads=1) is None


def test_cli(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PYTPP_TUNE_CACHE", str(tmp_path / "c.json"))
    monkeypatch.setattr(_tune, "candidates", lambda: ["BCa", "cBa", "bCa", "aBC"])
    from pytpp.__main__ import main
    assert main(["tune", "gemm", "64", "64", "64", "--top", "2"]) == 0
    out = capsys.readouterr()
    assert "best:" in out.out and "model" in out.err
    with pytest.raises(SystemExit):
        main(["tune", "conv", "1", "2", "3"])


def test_exhaustive_check_sets_the_tuned_string_beside_the_fastest(tmp_path, monkeypatch):
    """Every candidate is timed: the fastest is a candidate, the tuned string's time is no better
    than the fastest's in the same sitting (ratio >= 1 up to timer noise), nothing persisted."""
    monkeypatch.setenv("PYTPP_TUNE_CACHE", str(tmp_path / "tune.json"))
    from pytpp import _tune
    e = _tune.exhaustive_check(64, 48, 32, np.float32, threads=1, top=3, reps=1, progress=False)
    assert e["exhaustive_best"] in _tune.candidates()
    assert e["tuned"] in _tune.candidates()
    assert e["ratio"] >= 0.5 and e["exhaustive_s"] > 0
    assert isinstance(e["in_top_classes"], bool)
    assert not (tmp_path / "tune.json").exists()


def test_timings_run_on_the_threads_asked_for(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTPP_TUNE_CACHE", str(tmp_path / "t.json"))
    import pytpp
    from pytpp._core import _runtime
    seen = []
    real = pytpp.matmul

    def spy(*args, **kw):
        seen.append(_runtime.get_num_threads())
        return real(*args, **kw)

    monkeypatch.setattr(pytpp, "matmul", spy)
    before = _runtime.get_num_threads()
    _tune.tune_gemm(64, 64, 64, np.float32, threads=1, top=2, max_candidates=6, min_timed=2,
                    progress=False)
    assert seen and set(seen) == {1}
    assert _runtime.get_num_threads() == before
