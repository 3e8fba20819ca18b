"""phrasedet/engine/comparison/run_records.py: a finished run's record keeps its JSON files and validation
curve and drops its weights and training-loss lines; --resume restores it only on the same image
representation; a run whose weights a later run needs is trained again."""
import json
import os
import re
import shutil
import subprocess

import pytest

from phrasedet.engine.comparison.run_records import RECORD_FILE, RunRecords, file_digest, keep_evaluations
from phrasedet.engine.comparison.runs import ROOT, finished
from phrasedet.fileio import BadFileError
from .tool_runs import tool_path

TRAIN = {"iteration": 19, "total_loss": 3.5, "lr": 0.0002, "time": 0.3}
VALID = {"iteration": 99, "retrieval/rsum": 412.5, "retrieval/i2t_R@1": 40.0}


def _selection(weights, iteration, stage, value=100.0):
    """A ``selection.json`` record as ``RecordedBestCheckpointer`` writes it."""
    return {"metric": "retrieval/rsum", "mode": "max", "value": value, "iteration": iteration, "stage": stage,
            "weights": weights}


def _run(out, rsum=412.5):
    """A finished run's output folder as train_net leaves it (weights, log, JSON files, a nested stage)."""
    os.makedirs(os.path.join(out, "stage1_frozen_cnn"))
    for path, record in (("results.json", {"results": {"retrieval": {"rsum": rsum}}}), ("wall_time.json", {"minutes": 12.5}),
                         ("selection.json", _selection(os.path.join(out, "model_best.pth"), 2499, "", rsum)),
                         ("stage1_frozen_cnn/selection.json", _selection("w.pth", 99, "stage1"))):
        with open(os.path.join(out, path), "w") as f:
            json.dump(record, f)
    with open(os.path.join(out, "metrics.json"), "w") as f:
        f.write(json.dumps(TRAIN) + "\n" + json.dumps({**VALID, "retrieval/rsum": rsum}) + "\n" + json.dumps(TRAIN) + "\n")
    for binary in ("model_best.pth", "model_final.pth", "train_net.log", "last_checkpoint"):
        with open(os.path.join(out, binary), "wb") as f:
            f.write(b"\0" * 100)


def _files(folder):
    return sorted(os.path.relpath(os.path.join(d, f), folder) for d, _, fs in os.walk(folder) for f in fs)


def test_a_record_keeps_the_json_files_and_the_validation_curve_and_names_commit_and_representation(tmp_path):
    out = tmp_path / "output" / "cnn" / "seed0" / "vsepp"
    _run(str(out))
    records = RunRecords(str(tmp_path / "output" / "cnn"), str(tmp_path / "results" / "cnn"), "abc123", ROOT)
    dest = records.save(str(out), name="vsepp")
    assert dest == str(tmp_path / "results" / "cnn" / "seed0" / "vsepp")
    assert _files(dest) == ["metrics.json", RECORD_FILE, "results.json", "selection.json",
                            os.path.join("stage1_frozen_cnn", "selection.json"), "wall_time.json"]
    assert [json.loads(line) for line in open(os.path.join(dest, "metrics.json"))] == [VALID]
    record = json.loads(open(os.path.join(dest, RECORD_FILE)).read())
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert record["commit"] == head and record["representation"] == "abc123" and record["name"] == "vsepp"
    assert isinstance(record["dirty"], bool) and record["machine"].endswith(" threads")
    assert records.read(str(out)) == record


def test_resume_restores_a_record_on_the_same_representation_only(tmp_path):
    out = tmp_path / "output" / "seed1" / "vse0"
    _run(str(out), rsum=300.0)
    RunRecords(str(tmp_path / "output"), str(tmp_path / "results"), "same", ROOT).save(str(out))
    elsewhere = tmp_path / "fresh"  # a new machine: the output folder is gone, the records are in the checkout
    os.rename(tmp_path / "output", elsewhere)
    other = RunRecords(str(tmp_path / "output"), str(tmp_path / "results"), "another", ROOT)
    assert not finished(str(out), True, other) and not out.exists()  # recorded on another CNN's features: train again
    assert not other.restore(str(out)) and not out.exists()
    same = RunRecords(str(tmp_path / "output"), str(tmp_path / "results"), "same", ROOT)
    assert not finished(str(out), False, same) and not out.exists()  # without --resume nothing is restored
    assert finished(str(out), True, same)
    assert json.loads((out / "results.json").read_text()) == {"results": {"retrieval": {"rsum": 300.0}}}
    assert not (out / "model_best.pth").exists() and json.loads((out / "wall_time.json").read_text()) == {"minutes": 12.5}


def test_resume_restores_a_record_made_with_the_same_word_vectors_only(tmp_path, caplog):
    """word2vec trained on another CPU differs in its last bits: a record names the vectors' fingerprint."""
    out = tmp_path / "output" / "seed0" / "two_branch"
    _run(str(out), rsum=457.9)
    RunRecords(str(tmp_path / "output"), str(tmp_path / "results"), "cnn", ROOT, word_vectors="w2v-a").save(str(out))
    record = json.loads((tmp_path / "results" / "seed0" / "two_branch" / RECORD_FILE).read_text())
    assert record["representation"] == "cnn" and record["word_vectors"] == "w2v-a"
    os.rename(tmp_path / "output", tmp_path / "gone")
    other = RunRecords(str(tmp_path / "output"), str(tmp_path / "results"), "cnn", ROOT, word_vectors="w2v-b")
    with caplog.at_level("WARNING", logger="phrasedet.engine"):
        assert not other.restore(str(out)) and not out.exists()
    assert "recorded with other word vectors (w2v-a, now w2v-b): trained again" in caplog.text
    assert RunRecords(str(tmp_path / "output"), str(tmp_path / "results"), "cnn", ROOT, word_vectors="w2v-a").restore(str(out))
    assert json.loads((out / "results.json").read_text()) == {"results": {"retrieval": {"rsum": 457.9}}}
    # a record naming no word vectors (made before they were named) is one made with none named
    shutil.rmtree(out)
    path = tmp_path / "results" / "seed0" / "two_branch" / RECORD_FILE
    path.write_text(json.dumps({k: v for k, v in json.loads(path.read_text()).items() if k != "word_vectors"}))
    assert RunRecords(str(tmp_path / "output"), str(tmp_path / "results"), "cnn", ROOT).restore(str(out))


def test_a_finished_run_is_never_overwritten_by_its_record(tmp_path):
    out = tmp_path / "output" / "seed0" / "vse0"
    _run(str(out), rsum=300.0)
    records = RunRecords(str(tmp_path / "output"), str(tmp_path / "results"), "d", ROOT)
    records.save(str(out))
    (out / "results.json").write_text(json.dumps({"results": {"retrieval": {"rsum": 301.0}}}))
    assert not records.restore(str(out))
    assert json.loads((out / "results.json").read_text())["results"]["retrieval"]["rsum"] == 301.0


def test_a_run_outside_the_output_folder_is_refused(tmp_path):
    records = RunRecords(str(tmp_path / "output"), str(tmp_path / "results"), "d", ROOT)
    with pytest.raises(ValueError, match="is not under the comparison's output folder"):
        records.path(str(tmp_path / "elsewhere" / "vse0"))


def test_keep_evaluations_and_file_digest(tmp_path):
    import hashlib

    lines = [json.dumps(TRAIN) + "\n", "\n", json.dumps(VALID) + "\n", json.dumps({"iteration": 5, "pointing/acc": 0.5})]
    assert keep_evaluations(lines) == [lines[2], lines[3]]
    (tmp_path / "abc").write_bytes(b"abc")  # FIPS 180-2's test vector
    assert file_digest(str(tmp_path / "abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    data = bytes(range(256)) * (5 << 12)  # 5 MiB: read in two blocks of at most 4 MiB
    (tmp_path / "big").write_bytes(data)
    assert file_digest(str(tmp_path / "big")) == hashlib.sha256(data).hexdigest()


def test_the_cnn_is_keyed_by_its_backbone_whatever_file_holds_it(tmp_path):
    import torch

    from phrasedet.engine.comparison.run_records import backbone_digest, save_backbone

    backbone = {"backbone.stem.conv1.weight": torch.arange(6.0).reshape(2, 3), "backbone.res2.norm.running_mean": torch.ones(3)}
    whole = tmp_path / "model_final.pth"
    torch.save({"model": {**backbone, "head.weight": torch.zeros(4)}, "optimizer": {"state": {}}, "iteration": 5999}, whole)
    digest = save_backbone(str(whole), str(tmp_path / "cnn" / "backbone.pth"))
    kept = torch.load(tmp_path / "cnn" / "backbone.pth")
    assert set(kept) == {"model"} and sorted(kept["model"]) == sorted(backbone)  # no head, no optimizer
    assert all(torch.equal(kept["model"][k], v) for k, v in backbone.items())
    assert digest == backbone_digest(str(whole))
    changed = {**backbone, "backbone.res2.norm.running_mean": torch.tensor([1.0, 1.0, 1.0 + 2 ** -20])}
    torch.save({"model": changed}, tmp_path / "other.pth")
    assert backbone_digest(str(tmp_path / "other.pth")) != digest  # one value in its last bits
    assert save_backbone(str(whole), str(tmp_path / "cnn" / "backbone.pth")) == digest  # into a folder that exists
    torch.save({"model": {"head.weight": torch.zeros(4)}}, tmp_path / "headless.pth")
    for read in (backbone_digest, lambda path: save_backbone(path, str(tmp_path / "x.pth"))):
        with pytest.raises(BadFileError, match=f"^{re.escape(str(tmp_path / 'headless.pth'))}: no tensor under "):
            read(str(tmp_path / "headless.pth"))


def test_a_representations_records_are_keyed_by_the_cnns_backbone_or_else_the_features_file(tmp_path):
    import torch

    from phrasedet.engine.comparison.protocol import representation_records
    from phrasedet.engine.comparison.run_records import backbone_digest

    torch.save({"model": {"backbone.stem.conv1.weight": torch.ones(2)}}, tmp_path / "cnn.pth")
    (tmp_path / "train.npy").write_bytes(b"abc")
    assert representation_records(str(tmp_path / "out"), "", "cnn", str(tmp_path / "cnn.pth"), str(tmp_path / "train.npy")) is None
    cnn = representation_records(str(tmp_path / "out"), str(tmp_path / "rec"), "cnn", str(tmp_path / "cnn.pth"),
                                 str(tmp_path / "train.npy"), word_vectors="w2v")
    assert (cnn.output_root, cnn.record_root, cnn.code_root) == (str(tmp_path / "out"), str(tmp_path / "rec" / "cnn"), ROOT)
    assert RunRecords(str(tmp_path / "out"), str(tmp_path / "rec"), "d", ROOT).word_vectors == ""  # none named
    assert (cnn.representation, cnn.word_vectors) == (backbone_digest(str(tmp_path / "cnn.pth")), "w2v")
    oracle = representation_records(str(tmp_path / "out"), str(tmp_path / "rec"), "oracle", "", str(tmp_path / "train.npy"))
    assert (oracle.record_root, oracle.word_vectors) == (str(tmp_path / "rec" / "oracle"), "")
    assert oracle.representation == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # sha256("abc")


def test_a_checkpoint_of_numpy_arrays_has_the_digest_of_the_same_torch_tensors(tmp_path):
    import pickle

    import numpy as np
    import torch

    from phrasedet.engine.comparison.run_records import backbone_digest

    arrays = {"backbone.stem.conv1.weight": np.arange(6, dtype=np.float32).reshape(2, 3), "backbone.res2.b": np.ones(3, np.float32)}
    with open(tmp_path / "d2.pkl", "wb") as f:  # Detectron2's model-zoo format: numpy arrays
        pickle.dump({"model": arrays, "__author__": "test"}, f)
    torch.save({"model": {k: torch.from_numpy(v) for k, v in arrays.items()}}, tmp_path / "same.pth")
    assert backbone_digest(str(tmp_path / "d2.pkl")) == backbone_digest(str(tmp_path / "same.pth"))


def test_a_record_names_the_cpu_by_its_first_model_name(tmp_path):
    import torch

    from phrasedet.engine.comparison.run_records import _machine

    threads = f", {torch.get_num_threads()} threads"
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nmodel name\t: AMD EPYC 7B13: 64-Core\nmodel name\t: other\n")
    assert _machine(str(tmp_path / "cpuinfo")) == "AMD EPYC 7B13: 64-Core" + threads
    (tmp_path / "bare").write_text("processor\t: 0\n")
    assert _machine(str(tmp_path / "bare")) == _machine(str(tmp_path / "missing")) == "unknown CPU" + threads


def test_a_record_names_this_machine_s_cpu_from_proc_cpuinfo():
    from phrasedet.engine.comparison.run_records import _machine

    if not os.path.isfile("/proc/cpuinfo") or "model name" not in open("/proc/cpuinfo").read():
        pytest.skip("this machine's /proc/cpuinfo names no CPU model")
    assert _machine() == _machine("/proc/cpuinfo") and not _machine().startswith("unknown CPU")


def test_a_big_json_file_is_left_out_of_the_record_but_the_curve_is_kept(tmp_path, monkeypatch, caplog):
    from phrasedet.engine.comparison import run_records

    monkeypatch.setattr(run_records, "_MAX_BYTES", 10)
    out = tmp_path / "output" / "seed0" / "vsepp"
    out.mkdir(parents=True)
    (out / "a_big.json").write_text('{"x": 12345}')  # 12 bytes: left out
    (out / "b_edge.json").write_text('{"x": 123}')  # 10 bytes: kept
    (out / "c.json").write_text("{}")
    (out / "metrics.json").write_text(json.dumps({**VALID, "retrieval/rsum": 1.0}))  # a last line without its newline
    with caplog.at_level("INFO", logger="phrasedet.engine"):
        RunRecords(str(tmp_path / "output"), str(tmp_path / "results"), "d", ROOT).save(str(out))
    kept = tmp_path / "results" / "seed0" / "vsepp"
    assert (kept / "metrics.json").read_text() == json.dumps({**VALID, "retrieval/rsum": 1.0}) + "\n"
    assert (kept / RECORD_FILE).read_text().startswith('{\n "commit": ')  # indented by 1: records are read in diffs
    assert _files(tmp_path / "results") == ["seed0/vsepp/b_edge.json", "seed0/vsepp/c.json", "seed0/vsepp/metrics.json",
                                            "seed0/vsepp/" + RECORD_FILE]
    assert f"{out / 'a_big.json'}: 12 bytes, not a summary: left out of the record" in caplog.text


def test_show_records_lists_every_recorded_run_with_its_numbers(tmp_path, capsys):
    import sys

    sys.path.insert(0, os.path.dirname(tool_path("show_records.py")))
    import show_records

    output, results = tmp_path / "output", tmp_path / "results"
    for seed, rsum in ((0, 412.5), (1, 398.25)):
        _run(str(output / f"seed{seed}" / "vsepp"), rsum=rsum)
    staged = output / "seed0" / "instance_loss"  # a two-stage run: no selection of its own, its stages'
    _run(str(staged))
    os.remove(staged / "selection.json")
    os.makedirs(staged / "stage2_finetune")
    (staged / "stage2_finetune" / "selection.json").write_text(json.dumps(_selection("w.pth", 599, "stage2")))
    (staged / "results.json").write_text(json.dumps({"results": {"builtin_test": {"pointing": {"accuracy": 38.7},
                                                                                    "retrieval": {"rsum": 7.0}}}}))
    records = RunRecords(str(output), str(results), "d", ROOT)
    for run in ("seed0/instance_loss", "seed0/vsepp", "seed1/vsepp"):
        records.save(str(output / run))
    os.remove(results / "seed1" / "vsepp" / "wall_time.json")
    show_records.main([str(results)])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{results}: 3 recorded run(s)"
    commit = json.loads((results / "seed0" / "vsepp" / "record.json").read_text())
    tail = commit["commit"][:7] + (" (modified)" if commit["dirty"] else "") + " | " + commit["machine"] + " |"
    assert lines[2] == "| run | rsum | pointing | best validation | minutes | commit | machine |"
    assert lines[3] == "|---|---|---|---|---|---|---|"
    assert lines[4:7] == ["| seed0/instance_loss | 7.0 | 38.7 | stage2 599 | 12.5 | " + tail,
                          "| seed0/vsepp | 412.5 | - | 2499 | 12.5 | " + tail,
                          "| seed1/vsepp | 398.2 | - | 2499 | - | " + tail]
    (results / "seed1" / "vsepp" / "results.json").write_text("{")
    with pytest.raises(BadFileError, match="seed1/vsepp/results.json:1:2: invalid JSON"):
        show_records.main([str(results)])
    os.remove(results / "seed1" / "vsepp" / "results.json")
    with pytest.raises(FileNotFoundError, match="seed1/vsepp: a record without results.json"):
        show_records.main([str(results)])
    with pytest.raises(SystemExit, match="no such folder of records"):
        show_records.main([str(tmp_path / "none")])


def test_the_records_table_names_a_modified_commit_and_marks_what_a_record_lacks():
    from phrasedet.engine.comparison.run_records import format_records

    runs = [{"run": "seed0/vsepp", "results": {"retrieval": {"rsum": 412.5}}, "selection": None, "minutes": None,
             "record": {"commit": "0123456789abcdef", "dirty": True, "machine": "Intel Xeon"}},
            {"run": "seed1/vsepp", "results": {"retrieval": {"rsum": 398.25}}, "selection": {"iteration": 99}, "minutes": 3.04,
             "record": {"commit": "fedcba9876543210", "dirty": False}},
            {"run": "seed2/vsepp", "results": {"retrieval": {"rsum": 1.0}}, "selection": None, "minutes": None, "record": {}}]
    assert format_records(runs).splitlines()[2:] == ["| seed0/vsepp | 412.5 | - | - | 0123456 (modified) | Intel Xeon |",
                                                     "| seed1/vsepp | 398.2 | 99 | 3.0 | fedcba9 | - |",
                                                     "| seed2/vsepp | 1.0 | - | - | - | - |"]


def test_a_record_is_dirty_when_the_code_differs_from_its_commit_not_the_docs(tmp_path):
    from phrasedet.engine.comparison.run_records import _git_state

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    for path in ("phrasedet/m.py", "docs/A.md"):
        (tmp_path / path).parent.mkdir(exist_ok=True)
        (tmp_path / path).write_text("x = 1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    (tmp_path / "docs" / "A.md").write_text("y\n")
    (tmp_path / "phrasedet" / "scratch.py").write_text("z = 0\n")  # untracked: no commit's code, never trained with
    assert _git_state(str(tmp_path)) == {"commit": head, "dirty": False}
    (tmp_path / "phrasedet" / "m.py").write_text("x = 2\n")
    assert _git_state(str(tmp_path)) == {"commit": head, "dirty": True}


def test_a_kept_model_has_the_digest_of_the_checkpoint_it_came_from_and_only_its_tensors(tmp_path):
    import torch

    from phrasedet.engine.comparison.run_records import model_digest, save_model

    src = tmp_path / "model_final.pth"
    torch.save({"model": {"b": torch.ones(2), "a": torch.arange(3.0)}, "iteration": 5, "optimizer": {"x": 1}}, src)
    assert save_model(str(src), str(tmp_path / "kept" / "d.pth")) == model_digest(str(src))
    assert list(torch.load(tmp_path / "kept" / "d.pth", weights_only=True)) == ["model"]
    assert save_model(str(src), str(tmp_path / "kept" / "e.pth")) == model_digest(str(src))  # into a folder that exists
    torch.save({"model": {"b": torch.ones(2), "a": torch.arange(3.0) + 1}}, tmp_path / "other.pth")
    assert model_digest(str(tmp_path / "other.pth")) != model_digest(str(src))


def test_a_record_restored_over_an_interrupted_run_replaces_its_files_and_keeps_nested_runs(tmp_path, caplog):
    """A recorded run trained again from scratch (its weights were needed) and interrupted leaves a
    folder without results.json: the record restored there must not sit beside that run's
    model_best.pth (taken for the record's model once) or its metrics lines."""
    from phrasedet.engine.comparison.run_records import RUN_FILES, drop_leftovers
    from phrasedet.engine.comparison.runs import STARTED

    assert STARTED in RUN_FILES
    out = tmp_path / "output" / "seed1" / "cite_cca"
    _run(str(out), rsum=300.0)
    records = RunRecords(str(tmp_path / "output"), str(tmp_path / "results"), "d", ROOT)
    records.save(str(out))
    for name in os.listdir(out):  # trained again from scratch ...
        path = out / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    _run(str(out), rsum=111.0)
    (out / "results.json").unlink()  # ... and interrupted before it finished
    nested = out / "stage1_eval"  # a run of its own inside the folder
    nested.mkdir()
    (nested / STARTED).write_text("{}")
    with caplog.at_level("WARNING", logger="phrasedet.engine"):
        assert finished(str(out), True, records)
    assert f"{out}: an unfinished run's files removed before its record was restored: last_checkpoint, metrics.json, " \
           "model_best.pth, model_final.pth, selection.json, stage1_frozen_cnn, train_net.log, wall_time.json" in caplog.text
    assert _files(str(out)) == ["metrics.json", RECORD_FILE, "results.json", "selection.json",
                                os.path.join("stage1_eval", STARTED), os.path.join("stage1_frozen_cnn", "selection.json"),
                                "wall_time.json"]
    assert [json.loads(line) for line in open(out / "metrics.json")] == [{**VALID, "retrieval/rsum": 300.0}]
    assert json.loads((out / "selection.json").read_text())["value"] == 300.0
    caplog.clear()
    drop_leftovers(str(tmp_path / "nowhere"))  # nothing there: nothing to say
    assert not caplog.text


def test_a_run_trained_again_replaces_its_record_and_no_file_of_the_older_run_stays(tmp_path):
    """A file written beside a record (compare_recipes' presence_oracle.json) belonged to the older run:
    kept over the new record, the presence oracle of four retrained runs was the older model's."""
    out = tmp_path / "output" / "seed1" / "cite_cca"
    _run(str(out), rsum=300.0)
    records = RunRecords(str(tmp_path / "output"), str(tmp_path / "results"), "d", ROOT)
    dest = records.save(str(out))
    with open(os.path.join(dest, "presence_oracle.json"), "w") as f:
        json.dump({"mAP": 1.0}, f)
    nested = os.path.join(dest, "stage1_eval")  # the record of a run of its own inside this one
    os.makedirs(nested)
    with open(os.path.join(nested, RECORD_FILE), "w") as f:
        json.dump({"name": "stage1_eval"}, f)
    shutil.rmtree(out)
    _run(str(out), rsum=111.0)
    os.remove(out / "stage1_frozen_cnn" / "selection.json")  # the new run wrote no such file
    assert records.save(str(out)) == dest
    assert _files(dest) == ["metrics.json", RECORD_FILE, "results.json", "selection.json",
                            os.path.join("stage1_eval", RECORD_FILE), "wall_time.json"]
    assert json.loads(open(os.path.join(dest, "results.json")).read())["results"]["retrieval"]["rsum"] == 111.0
    with pytest.raises(ValueError, match="is not under the comparison's output folder"):  # saving it would clear every record
        records.save(str(tmp_path / "output"))
