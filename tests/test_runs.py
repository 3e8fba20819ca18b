"""phrasedet/engine/comparison/runs.py: a comparison's run trained again starts from an empty folder, and a
finished run is reused by --resume."""
import json
import os
import shutil
import time

import pytest

from phrasedet.engine.comparison import runs

STALE = '{"iteration": 1099, "retrieval/rsum": 300.0}\n'  # what a run killed at iteration 1,100 left
NEW = '{"iteration": 99, "retrieval/rsum": 50.0}\n'


def _fake_train_net(out, calls):
    """A stand-in for ``run_tool("train_net.py", ...)``: appends to metrics.json as Detectron2's
    JSONWriter does and writes results.json; 90 s."""
    def run_tool(tool, *args, log=None, append=False):
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
    assert sorted(p.name for p in out.iterdir()) == ["metrics.json", "results.json", runs.STARTED, "wall_time.json"]
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
    empty = tmp_path / "seed1" / "vsepp"  # a folder made, nothing in it yet: nothing to report either
    empty.mkdir(parents=True)
    monkeypatch.setattr(runs, "run_tool", _fake_train_net(empty, calls))
    runs.train_run("vsepp", "c.yaml", str(empty), True, [])
    assert "removed" not in capsys.readouterr().out


def test_an_interrupted_runs_minutes_run_to_its_newest_file_and_never_back(tmp_path):
    (tmp_path / runs.STARTED).write_text(json.dumps({"command": ["c.yaml"], "time": 1000.0, "minutes_before": 2.0}))
    (tmp_path / "metrics.json").write_text(NEW)
    for newest, minutes in ((1090.0, 3.5), (1000.0, 2.0), (970.0, 2.0)):  # 90 s in; at its start; a file older than it
        for name in os.listdir(tmp_path):
            os.utime(tmp_path / name, (newest, newest))
        assert runs._interrupted_minutes(str(tmp_path), ["c.yaml"]) == minutes
    assert runs._interrupted_minutes(str(tmp_path), ["other.yaml"]) is None


def test_an_interrupted_run_of_the_same_command_continues_from_its_checkpoint(tmp_path, monkeypatch, capsys):
    out = tmp_path / "seed0" / "cite"
    calls, args = [], []
    fake = _fake_train_net(out, calls)

    def killed(tool, *a, log=None, append=False):  # the process dies at iteration 1,100: no results.json
        (out / "metrics.json").write_text(STALE)
        (out / "last_checkpoint").write_text("model_0000999.pth")
        for name in os.listdir(out):  # its last record, 10 minutes in
            os.utime(out / name, (started + 600, started + 600))
        raise KeyboardInterrupt

    started = time.time() - 3600
    monkeypatch.setattr(runs.time, "time", lambda: started)
    monkeypatch.setattr(runs, "run_tool", killed)
    with pytest.raises(KeyboardInterrupt):
        runs.train_run("cite", "c.yaml", str(out), True, ["SEED", 0])
    assert json.loads((out / runs.STARTED).read_text())["command"] == ["c.yaml", "SEED", "0"]

    def continued(tool, *a, log=None, append=False):
        args.append((a, append))
        return fake(tool, *a, log=log)
    monkeypatch.setattr(runs, "run_tool", continued)
    results, minutes = runs.train_run("cite", "c.yaml", str(out), True, ["SEED", 0])
    (a, append), = args
    assert "--resume" in a and append  # train_net.py continues there; its log goes on
    assert (out / "metrics.json").read_text() == STALE + NEW  # kept: train_net.py's own --resume trims what it redoes
    assert minutes == pytest.approx(10 + 1.5)  # the interrupted invocation's 10 minutes counted
    assert "the interrupted run continued from its last checkpoint (10.0 min spent before)" in capsys.readouterr().out

    # another command's unfinished run (here another seed) is not continued: emptied, trained from the start
    (out / "results.json").unlink()
    args.clear()
    runs.train_run("cite", "c.yaml", str(out), True, ["SEED", 1])
    (a, append), = args
    assert "--resume" not in a and not append and (out / "metrics.json").read_text() == NEW
    # nor without --resume
    (out / "results.json").unlink()
    args.clear()
    runs.train_run("cite", "c.yaml", str(out), False, ["SEED", 1])
    assert "--resume" not in args[0][0]


def test_a_finished_run_of_another_budget_is_not_reused_and_other_paths_or_weights_do_not_matter(tmp_path, monkeypatch, capsys):
    out = tmp_path / "cnn" / "seed0" / "dsve_loc"
    calls = []
    monkeypatch.setattr(runs, "run_tool", _fake_train_net(out, calls))
    budget = ["/machine/a/configs/pointing/dsve_loc.yaml", "SOLVER.MAX_ITER", 3000, "MODEL.WEIGHTS", "/a/model.pth", "SEED", 0]
    runs.train_run("dsve_loc", budget[0], str(out), True, budget[1:])
    assert calls == ["train_net.py"]
    # the same schedule in another checkout, with other weights (a restored evaluation has none): finished
    elsewhere = ["/machine/b/configs/pointing/dsve_loc.yaml", "SOLVER.MAX_ITER", "3000", "MODEL.WEIGHTS", "", "SEED", "0"]
    assert runs.finished(str(out), True, command=elsewhere)
    assert runs.train_run("dsve_loc", elsewhere[0], str(out), True, elsewhere[1:])[0] == {"retrieval": {"rsum": 50.0}}
    assert calls == ["train_net.py"]
    # another budget: the finished run of 3,000 iterations is not this one; trained again from an empty folder
    longer = [*budget[:2], 6000, *budget[3:]]
    (out / "model_best.pth").write_bytes(b"\0")
    runs.train_run("dsve_loc", longer[0], str(out), True, longer[1:])
    assert calls == ["train_net.py"] * 2 and not (out / "model_best.pth").exists()
    assert (f"{out}: a finished run of another schedule ({{'SOLVER.MAX_ITER': '3000', 'SEED': '0'}}, now "
            "{'SOLVER.MAX_ITER': '6000', 'SEED': '0'}): not this run; its files removed") in capsys.readouterr().out
    assert json.loads((out / runs.STARTED).read_text())["command"] == [str(c) for c in longer]
    # another seed too; a folder without run_started.json (a record of an older commit) is trusted, as before
    assert runs.finished(str(out), True, command=longer) and not runs.finished(str(out), True, command=[*longer[:-1], 1])
    assert not out.exists()
    runs.train_run("dsve_loc", longer[0], str(out), True, longer[1:])
    (out / runs.STARTED).unlink()
    assert runs.finished(str(out), True, command=budget)


def test_a_stale_run_of_another_budget_gives_way_to_the_record_of_this_one(tmp_path, monkeypatch):
    from phrasedet.engine.comparison.run_records import RunRecords

    root, out = tmp_path / "out", tmp_path / "out" / "seed0" / "m"
    calls = []
    records = RunRecords(str(root), str(tmp_path / "rec"), "rep", str(tmp_path))
    monkeypatch.setattr(runs, "run_tool", _fake_train_net(out, calls))
    runs.train_run("m", "c.yaml", str(out), True, ["SOLVER.MAX_ITER", 6000], records=records)  # recorded
    shutil.rmtree(out)
    runs.train_run("m", "c.yaml", str(out), True, ["SOLVER.MAX_ITER", 3000])  # a stale run of another budget, unrecorded
    monkeypatch.setattr(runs, "run_tool", lambda *a, **k: pytest.fail("trained, though its record is of this budget"))
    assert runs.finished(str(out), True, records, ["c.yaml", "SOLVER.MAX_ITER", "6000"])
    assert json.loads((out / runs.STARTED).read_text())["command"] == ["c.yaml", "SOLVER.MAX_ITER", "6000"]
    assert calls == ["train_net.py"] * 2


def test_a_record_of_another_schedule_is_not_restored_as_this_run(tmp_path, monkeypatch, capsys):
    from phrasedet.engine.comparison.run_records import RunRecords

    root, out = tmp_path / "out", tmp_path / "out" / "seed0" / "m"
    records = RunRecords(str(root), str(tmp_path / "rec"), "rep", str(tmp_path))
    monkeypatch.setattr(runs, "run_tool", _fake_train_net(out, []))
    runs.train_run("m", "c.yaml", str(out), True, ["SOLVER.MAX_ITER", 3000], records=records)  # recorded at 3,000
    shutil.rmtree(out)
    assert not runs.finished(str(out), True, records, ["c.yaml", "SOLVER.MAX_ITER", "6000"]) and not out.exists()
    assert (f"{out}: its record of another schedule ({{'SOLVER.MAX_ITER': '3000'}}, now {{'SOLVER.MAX_ITER': '6000'}}): "
            "not this run; its files removed") in capsys.readouterr().out
    assert runs.finished(str(out), True, records, ["c.yaml", "SOLVER.MAX_ITER", "3000"])  # its own schedule: restored


def test_a_tool_writes_its_log_into_a_folder_made_for_it_and_a_failure_names_its_output(tmp_path):
    log = tmp_path / "not yet" / "there" / "tool.log"
    runs.run_tool("show_records.py", "--help", log=str(log))
    assert "usage: show_records.py" in log.read_text()
    runs.run_tool("show_records.py", "--help", log=str(log), append=True)
    assert log.read_text().count("usage: show_records.py") == 2
    failed = r"(?s)show_records.py --no-such-option failed \(exit status 2\):.*the following arguments are required: record_roots"
    with pytest.raises(RuntimeError, match=failed):
        runs.run_tool("show_records.py", "--no-such-option")


def test_a_tool_s_log_starts_afresh_its_time_is_its_own_and_its_failure_shows_the_last_3000_characters(tmp_path, monkeypatch):
    log = tmp_path / "tool.log"
    log.write_text("an older run's log\n")
    start = time.perf_counter()
    seconds = runs.run_tool("show_records.py", "--help", log=str(log))
    assert 0 < seconds <= time.perf_counter() - start
    assert "an older run's log" not in log.read_text() and "usage: show_records.py" in log.read_text()
    log.write_bytes(b"\xff" * 5000)  # not UTF-8: the failure is still reported, its output decoded with replacements
    with pytest.raises(RuntimeError) as error:
        runs.run_tool("show_records.py", "--no-such-option", log=str(log), append=True)
    tail = str(error.value).split("(exit status 2):\n", 1)[1]
    assert len(tail) == 3000 and tail.startswith("\ufffd") and tail.endswith("the following arguments are required: record_roots\n")
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    with pytest.raises(RuntimeError):
        runs.run_tool("show_records.py", "--no-such-option")  # without a log: its output goes to a temporary file
    assert os.listdir(tmp_path / "cwd") == []


def test_the_command_line_of_a_run_its_record_and_an_evaluation_never_continued(tmp_path, monkeypatch, capsys):
    from phrasedet.engine.comparison.run_records import RunRecords

    out, calls = tmp_path / "output" / "seed0" / "vsepp", []

    def run_tool(tool, *args, log=None, append=False):
        calls.append((tool, args, log, append))
        (out / "results.json").write_text(json.dumps({"results": {"retrieval": {"rsum": 50.0}}}))
        return 60.0
    monkeypatch.setattr(runs, "run_tool", run_tool)
    records = RunRecords(str(tmp_path / "output"), str(tmp_path / "records"), "d", runs.ROOT)
    assert runs.train_run("vsepp", "c.yaml", str(out), True, ["SEED", 0], flags=("--eval-only",), records=records) == (
        {"retrieval": {"rsum": 50.0}}, 1.0)
    assert calls == [("train_net.py", ("--config-file", "c.yaml", "--eval-only", "OUTPUT_DIR", str(out), "SEED", 0),
                      str(out / "train_net.log"), False)]
    assert "  vsepp: 1.0 min\n" in capsys.readouterr().out
    assert json.loads((tmp_path / "records" / "seed0" / "vsepp" / "record.json").read_text())["name"] == "vsepp"
    shutil.rmtree(out)  # the output gone: --resume restores the run from its record, untrained
    assert runs.train_run("vsepp", "c.yaml", str(out), True, ["SEED", 0], flags=("--eval-only",), records=records)[0] == {
        "retrieval": {"rsum": 50.0}} and len(calls) == 1
    # an evaluation interrupted is evaluated again from the start, never continued from a checkpoint
    (out / "results.json").unlink()
    (out / runs.STARTED).write_text(json.dumps({"command": ["c.yaml", "--eval-only", "SEED", "0"], "time": 0.0, "minutes_before": 0.0}))
    runs.train_run("vsepp", "c.yaml", str(out), True, ["SEED", 0], flags=("--eval-only",))  # (no record to restore)
    assert len(calls) == 2 and "--resume" not in calls[-1][1] and calls[-1][3] is False and "continued" not in capsys.readouterr().out
