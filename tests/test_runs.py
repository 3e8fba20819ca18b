"""phrasedet/engine/runs.py: a comparison's run trained again starts from an empty folder, and a
finished run is reused by --resume."""
import json

import pytest

from phrasedet.engine import runs

STALE = '{"iteration": 1099, "retrieval/rsum": 300.0}\n'  # what a run killed at iteration 1,100 left
NEW = '{"iteration": 99, "retrieval/rsum": 50.0}\n'


def _fake_train_net(out, calls):
    """A stand-in for ``run_tool("train_net.py", ...)``: appends to metrics.json as Detectron2's
    JSONWriter does and writes results.json; 90 s."""
    def run_tool(tool, *args, log=None):
        calls.append(tool)
        assert not (out / "selection.json").exists() and not (out / "model_best.pth").exists()
        with open(out / "metrics.json", "a") as f:
            f.write(NEW)
        (out / "results.json").write_text(json.dumps({"results": {"retrieval": {"rsum": 50.0}}}))
        return 90.0
    return run_tool


def test_an_interrupted_run_is_trained_again_from_an_empty_folder(tmp_path, monkeypatch, capsys):
    out = tmp_path / "seed2" / "dsve_loc_gap"
    out.mkdir(parents=True)
    (out / "metrics.json").write_text(STALE)
    (out / "selection.json").write_text("{}")
    (out / "model_best.pth").write_bytes(b"\0")
    calls = []
    monkeypatch.setattr(runs, "run_tool", _fake_train_net(out, calls))
    results, minutes = runs.train_run("dsve_loc_gap", "c.yaml", str(out), True, [])
    assert calls == ["train_net.py"]
    assert results == {"retrieval": {"rsum": 50.0}} and minutes == 1.5
    assert (out / "metrics.json").read_text() == NEW  # one run's curve, not two
    assert sorted(p.name for p in out.iterdir()) == ["metrics.json", "results.json", "wall_time.json"]
    assert f"{out}: an unfinished or replaced run's files removed; trained from the start" in capsys.readouterr().out
    # finished: --resume reuses it; without --resume it is trained again, from an empty folder too
    monkeypatch.setattr(runs, "run_tool", lambda *a, **k: pytest.fail("a finished run was trained again"))
    assert runs.train_run("dsve_loc_gap", "c.yaml", str(out), True, []) == (results, 1.5)
    monkeypatch.setattr(runs, "run_tool", _fake_train_net(out, calls))
    runs.train_run("dsve_loc_gap", "c.yaml", str(out), False, [])
    assert calls == ["train_net.py"] * 2 and (out / "metrics.json").read_text() == NEW


def test_a_new_run_folder_is_made_and_nothing_is_reported_removed(tmp_path, monkeypatch, capsys):
    out = tmp_path / "seed0" / "vsepp"
    calls = []
    monkeypatch.setattr(runs, "run_tool", _fake_train_net(out, calls))
    runs.train_run("vsepp", "c.yaml", str(out), True, [])
    assert calls == ["train_net.py"] and (out / "metrics.json").read_text() == NEW
    assert "removed" not in capsys.readouterr().out
