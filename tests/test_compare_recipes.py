"""tools/compare/compare_recipes.py: which runs it asks for, on which detector and seeds, how it keeps the
detector and reads the schedule of each run (train_net replaced by a fake that writes results)."""
import importlib.util
import json
import os

import pytest
import torch
from .evaluation.test_predictions_file import DATASET, builtin_run  # noqa: F401  (its module fixture)
from .tool_runs import tool_path

_spec = importlib.util.spec_from_file_location("compare_recipes", tool_path("compare_recipes.py"))
compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare)

METRICS = {"mAP": 12.0, "mAP_zero_shot": 5.0, "mAP_few_shot": 8.0, "mAP_common": 23.0, "loc_acc": 64.0}


@pytest.fixture
def fake_runs(monkeypatch):
    """Every train_net run replaced: it writes results.json (and, for a cca run that trains stage 1,
    the detector) and is listed as (model, out, resume, {KEY: VALUE})."""
    calls = []

    def train_run(name, config, out, resume, opts, flags=(), records=None):
        opts = [str(o) for o in opts]
        calls.append((name, os.path.basename(config), out, resume, dict(zip(opts[::2], opts[1::2])), list(flags)))
        os.makedirs(out, exist_ok=True)
        if "PHRASEDET.RECIPE.DETECTOR_WEIGHTS" not in opts and name == "cca":
            os.makedirs(os.path.join(out, "stage1_detector"), exist_ok=True)
            torch.save({"model": {"w": torch.tensor([float(dict(zip(opts[::2], opts[1::2]))["SEED"])])}, "iteration": 9},
                       os.path.join(out, "stage1_detector", "model_final.pth"))
        os.makedirs(os.path.join(out, "stage3_classifier"), exist_ok=True)
        with open(os.path.join(out, "stage3_classifier", "metrics.json"), "w") as f:  # a validation curve
            f.writelines(json.dumps({"iteration": i, "phrase_detection/loc_acc": 50.0 + i / 10}) + "\n" for i in (149, 299))
        results = {"phrase_detection": METRICS, "phrase_detection_ppa": {**METRICS, "mAP": 13.0}}
        with open(os.path.join(out, "results.json"), "w") as f:
            json.dump({"final_model": os.path.join(out, "model_best.pth"), "results": results}, f)
        with open(os.path.join(out, "wall_time.json"), "w") as f:
            json.dump({"minutes": 1.5}, f)
        if records is not None:
            records.save(out, name=name)
        return results, 1.5

    monkeypatch.setattr(compare, "train_run", train_run)
    return calls


def _pairs(opts):
    """{KEY: VALUE} of a run's ``KEY VALUE`` list, as strings."""
    opts = [str(o) for o in opts]
    return dict(zip(opts[::2], opts[1::2]))


def _args(tmp_path, *extra):
    p = ["--output-root", str(tmp_path / "out"), "--detectors", "1", "--seeds", "0", "2", *extra]
    return p


def test_the_cca_run_trains_the_detector_which_is_kept_and_every_other_run_starts_from_it(tmp_path, fake_runs, monkeypatch):
    monkeypatch.setattr(compare, "word_vectors_digest", lambda config, opts: "text")
    compare.main(_args(tmp_path, "--record-root", str(tmp_path / "records"), "--models", "cca", "cite_cca", "detector"))
    first, *rest = fake_runs
    assert first[0] == "cca" and first[3] is False and first[4]["SEED"] == "1" and "PHRASEDET.RECIPE.DETECTOR_WEIGHTS" not in first[4]
    kept = tmp_path / "records" / "detector1" / "detector.pth"
    state = torch.load(kept, weights_only=True)
    assert list(state) == ["model"] and torch.equal(state["model"]["w"], torch.tensor([1.0]))  # no iteration, no optimizer
    # the cca run is then finished (not trained again), and every run reads the kept detector
    assert [(c[0], c[4].get("SEED"), c[3]) for c in rest] == [("cca", "1", True), ("cite_cca", "0", False),
                                                              ("cite_cca", "2", False), ("detector", "1", False)]
    for c in rest:
        assert c[4]["PHRASEDET.RECIPE.DETECTOR_WEIGHTS"] == str(kept)
        assert c[4]["TEST.PHRASE_DETECTION.PPA"] == "True" and c[4]["PHRASEDET.RECIPE.COMPARE_RANDOM_INIT"] == "False"
    assert rest[-1][4]["PHRASEDET.RECIPE.CLASSIFIER_ITERS"] == "0"  # the detector's own classifier, tested untrained
    assert rest[1][2] == str(tmp_path / "out" / "detector1" / "seed0" / "cite_cca")
    summary = json.loads((tmp_path / "out" / "comparison.json").read_text())["runs"]["detector1"]
    assert summary["runs"]["cca"] == [METRICS] and summary["runs"]["cite_cca_ppa"][0]["mAP"] == 13.0
    assert (tmp_path / "records" / "detector1" / "cca" / "record.json").is_file()  # recorded once the detector's digest is known


def test_a_kept_detector_is_never_trained_again(tmp_path, fake_runs, monkeypatch):
    monkeypatch.setattr(compare, "word_vectors_digest", lambda config, opts: "text")
    kept = tmp_path / "records" / "detector1" / "detector.pth"
    kept.parent.mkdir(parents=True)
    torch.save({"model": {"w": torch.tensor([7.0])}}, kept)
    compare.main(_args(tmp_path, "--record-root", str(tmp_path / "records"), "--models", "cca", "--resume"))
    assert [(c[0], c[3], c[4]["PHRASEDET.RECIPE.DETECTOR_WEIGHTS"]) for c in fake_runs] == [("cca", True, str(kept))]


def test_the_schedule_table_reads_where_each_phase_stopped_and_what_was_selected(tmp_path):
    comparison = compare.DetectorComparison(0, type("A", (), {"output_root": str(tmp_path), "record_root": ""})())
    run = tmp_path / "detector0" / "seed0" / "cite"
    (run / "stage3_classifier").mkdir(parents=True)
    (run / "stage3b_classifier").mkdir()
    (run / "stage3_classifier" / "early_stop.json").write_text(json.dumps({"iteration": 2099, "evaluations_without_gain": 5,
                                                                          "patience": 5}))
    (run / "stage3_classifier" / "selection.json").write_text(json.dumps(
        {"metric": "m", "mode": "max", "value": 71.25, "iteration": 1349, "stage": "stage3_classifier", "weights": "w"}))
    lines = compare.schedule_table(comparison, ["cite", "cca"], [0]).splitlines()
    assert lines[2] == "| cite | 0 | 2099 (5 val. without gain) | its cap | stage3_classifier, 1349, 71.2 |"
    assert len(lines) == 3  # cca trains nothing in stage 3: no row
    files = comparison.curve_files(["cite", "cca", "cite_cca_init"], [0, 1])
    assert list(files) == ["cite"] and files["cite"][1] == [str(tmp_path / "detector0" / "seed1" / "cite" / s / "metrics.json")
                                                           for s in ("stage3_classifier", "stage3b_classifier")]


def test_a_study_puts_its_runs_beside_the_comparison_on_the_same_detector(tmp_path, fake_runs, monkeypatch):
    monkeypatch.setattr(compare, "word_vectors_digest", lambda config, opts: "text")
    compare.main(_args(tmp_path, "--models", "cite", "--study", "budget", "PHRASEDET.RECIPE.SELECTION.PATIENCE", "0"))
    assert [(c[0], c[2]) for c in fake_runs] == [
        ("cca", str(tmp_path / "out" / "detector1" / "cca")),  # stage 1: the comparison's detector, not the study's
        ("cite", str(tmp_path / "out" / "detector1" / "budget" / "seed0" / "cite")),
        ("cite", str(tmp_path / "out" / "detector1" / "budget" / "seed2" / "cite"))]
    detector = str(tmp_path / "out" / "detector1" / "cca" / "stage1_detector" / "model_final.pth")
    assert fake_runs[1][4]["PHRASEDET.RECIPE.DETECTOR_WEIGHTS"] == detector and fake_runs[1][4]["PHRASEDET.RECIPE.SELECTION.PATIENCE"] == "0"
    # its curves and summary go beside its runs: the comparison's own are left as they were
    out = tmp_path / "out"
    assert (out / "detector1" / "budget" / "curves.png").is_file() and not (out / "detector1" / "curves.png").exists()
    assert json.loads((out / "comparison_budget.json").read_text())["runs"]["detector1"]["runs"]["cite"]
    assert not (out / "comparison.json").exists()


def test_records_only_trains_nothing_and_keeps_the_seeds_every_model_has(tmp_path, fake_runs, monkeypatch, capsys):
    monkeypatch.setattr(compare, "word_vectors_digest", lambda config, opts: "text")
    records = ["--record-root", str(tmp_path / "records")]
    compare.main(_args(tmp_path, *records, "--models", "cca", "cite_cca", "cite"))  # seeds 0 and 2 of both
    compare.main(["--output-root", str(tmp_path / "out"), "--detectors", "1", "--seeds", "1", *records, "--models", "cite_cca"])
    trained = len(fake_runs)
    # a new machine (no output folder): from the records alone; seed 1 lacks cite, deep_cca was never run
    new = ["--output-root", str(tmp_path / "new"), "--detectors", "1", "--seeds", "0", "1", "2", *records, "--records-only"]
    from phrasedet.engine.comparison import runs

    monkeypatch.setattr(compare, "train_run", runs.train_run)  # the real one, restoring records
    for module in (runs, compare):
        monkeypatch.setattr(module, "run_tool", lambda *a, **k: pytest.fail("--records-only trained a run"))
    compare.main(new + ["--models", "cca", "cite_cca", "cite", "deep_cca"])
    out = capsys.readouterr().out
    assert "detector 1, --records-only: models cca, cite_cca, cite; seeds [0, 2]; no record (left out): deep_cca; " \
           "seeds left out for cite seed 1" in out
    summary = json.loads((tmp_path / "new" / "comparison.json").read_text())["runs"]["detector1"]
    assert summary["seeds"] == [0, 2] and len(summary["runs"]["cite"]) == len(summary["runs"]["cite_cca"]) == 2
    assert any(v["claim"].endswith("CCA initialization beats random initialization, CITE") for v in summary["verdicts"])
    assert trained == len(fake_runs)
    # with the filtering rows asked for (--filter-weights '': train paper 000's model), nothing is trained either:
    # no filtered evaluation was recorded, so those rows are left out
    compare.main(new + ["--models", "cite_cca", "--filter-weights", ""])
    assert trained == len(fake_runs) and "cite_cca_filtered" not in json.loads(
        (tmp_path / "new" / "comparison.json").read_text())["runs"]["detector1"]["runs"]
    with pytest.raises(SystemExit, match="no kept detector"):
        compare.main(new[:2] + ["--detectors", "3", "--seeds", "0", *records, "--records-only", "--models", "cite"])


def test_make_demo_prints_the_recorded_comparison_of_the_project_without_training(tmp_path):
    """The second command of ``make demo`` on the project's own records (results/phrase_detection_compare)."""
    import shlex
    import subprocess
    import sys

    root = os.path.join(os.path.dirname(__file__), "..")
    dry = subprocess.run(["make", "-n", "demo"], cwd=root, capture_output=True, text=True, timeout=60).stdout
    line = next(x for x in dry.replace("\\\n", " ").splitlines() if "compare_recipes.py" in x)
    args = shlex.split(line.split("compare_recipes.py", 1)[1])
    assert "--records-only" in args and "cite_cca_preview.yaml" in dry
    args[args.index("--output-root") + 1] = str(tmp_path)
    proc = subprocess.run([sys.executable, tool_path("compare_recipes.py"), *args], capture_output=True,
                          text=True, timeout=300, cwd=root, env={**os.environ, "PYTHONPATH": root})
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((tmp_path / "comparison.json").read_text())["runs"]
    for d in ("detector0", "detector1"):
        assert f"{d[:-1]} {d[-1]}, --records-only: models cite_cca" in proc.stdout
        kept = summary[d]
        assert len(kept["runs"]["cite_cca"]) == len(kept["seeds"]) >= 1
        for seed, metrics in zip(kept["seeds"], kept["runs"]["cite_cca"]):  # the records' own numbers
            record = json.loads(open(os.path.join(root, "results", "phrase_detection_compare", d, f"seed{seed}", "cite_cca",
                                                  "results.json")).read())
            assert metrics == record["results"]["phrase_detection"]


def test_the_presence_oracle_is_computed_once_from_the_tested_predictions_and_kept_in_the_record(builtin_run, tmp_path):  # noqa: F811
    """presence_oracle(run): from the run's test predictions file, checked against its results.json,
    written into the run and its record (record.json untouched); later read back, also from the
    record alone."""
    import shutil

    from phrasedet.engine.comparison.run_records import RunRecords
    from phrasedet.evaluation import evaluate_predictions_file

    source = str(builtin_run[0] / "reference" / "phrase_predictions.jsonl")
    expected = evaluate_predictions_file(source, DATASET, presence_oracle=True)
    records = RunRecords(tmp_path / "out", tmp_path / "records", "rep", str(tmp_path))
    run = tmp_path / "out" / "seed0" / "cite"
    test_dir = run / "stage3b_classifier" / "inference" / DATASET
    test_dir.mkdir(parents=True)
    shutil.copy(source, test_dir / "phrase_predictions.jsonl")
    (run / "results.json").write_text(json.dumps({"results": {"phrase_detection": {**METRICS, "mAP": 1.0}}}))
    with pytest.raises(SystemExit, match=f"{test_dir / 'phrase_predictions.jsonl'}: mAP .* not the tested model's predictions"):
        compare.presence_oracle(str(run), records)
    (run / "results.json").write_text(json.dumps({"results": expected}))
    record = tmp_path / "records" / "seed0" / "cite"
    record.mkdir(parents=True)
    (record / "record.json").write_text('{"commit": "abc"}')
    got = compare.presence_oracle(str(run), records)
    assert got == expected["phrase_detection_presence_oracle"] and got["mAP"] > expected["phrase_detection"]["mAP"]
    assert json.loads((record / "presence_oracle.json").read_text()) == json.loads((run / "presence_oracle.json").read_text())
    assert (record / "record.json").read_text() == '{"commit": "abc"}'
    os.remove(test_dir / "phrase_predictions.jsonl")  # read back, not computed again
    assert compare.presence_oracle(str(run), records) == got
    os.remove(run / "presence_oracle.json")  # a run restored before its record had the file
    assert compare.presence_oracle(str(run), records) == got
    os.remove(record / "presence_oracle.json")
    assert compare.presence_oracle(str(run), records) is None  # nothing left to compute it from


def test_the_long_tail_world_puts_every_run_and_the_filter_model_in_it(tmp_path, fake_runs, monkeypatch, capsys):
    monkeypatch.setattr(compare, "word_vectors_digest", lambda config, opts: "text")
    tools, fake = [], compare.train_run

    def train_run(name, *args, **kw):  # a filtered evaluation also gives the unfiltered mAP
        results, minutes = fake(name, *args, **kw)
        return {**results, "phrase_detection_unfiltered": METRICS} if name == "cite_cca_filtered" else results, minutes

    monkeypatch.setattr(compare, "train_run", train_run)
    monkeypatch.setattr(compare, "run_tool", lambda *args, **kw: tools.append(args))
    compare.main(_args(tmp_path, "--world", "long_tail", "--models", "cite_cca", "detector", "--filter-weights", ""))
    assert capsys.readouterr().out.startswith("world: long_tail (test split builtin_longtail_flickr30k_entities_test)\n"
                                              "word vectors: glove_6b_50d (fingerprint text)\n")
    # the filter model is paper 000's network trained on the long-tailed captions
    assert tools and tools[0][0] == "compare_retrieval.py" and tools[0][tools[0].index("--world") + 1] == "long_tail"
    for name, _, _, _, opts, _ in fake_runs:
        assert opts["DATASETS.TRAIN"] == "('builtin_longtail_flickr30k_entities_train',)", name
        assert opts["DATASETS.TEST"] == "('builtin_longtail_flickr30k_entities_test',)", name
        assert opts["PHRASEDET.TEXT.WORD_VECTORS"] == "glove_6b_50d", name
    trained = [c for c in fake_runs if c[0] == "cite_cca"]
    assert trained[0][4]["PHRASEDET.RECIPE.SELECTION.DATASET"] == "builtin_longtail_flickr30k_entities_val"
    assert trained[0][4]["MODEL.PHRASE_ROI_HEADS.CITE.HIDDEN_DIM"] == "50"
    filtered = [c for c in fake_runs if c[0] == "cite_cca_filtered"]
    assert len(filtered) == 2 and "'builtin_longtail_flickr30k_captions_train'" in filtered[0][4]["TEST.PHRASE_FILTER.RETRIEVAL_OPTS"]
    assert "glove_6b_50d" in filtered[0][4]["TEST.PHRASE_FILTER.RETRIEVAL_OPTS"]
    # a model's own keys win over the world's: the detector's classifier is tested with no selection split
    untrained = [c for c in fake_runs if c[0] == "detector"]
    assert untrained and untrained[0][4]["PHRASEDET.RECIPE.SELECTION.DATASET"] == ""


def test_the_filter_model_is_trained_once_under_the_lock_that_the_detectors_processes_share(tmp_path, monkeypatch):
    import argparse

    from .test_cache import _held_elsewhere

    trainings = []

    def run_tool(*args, log):
        assert _held_elsewhere(tmp_path / "out" / ".filter.lock")  # held by the process that trains
        weights = os.path.join(args[args.index("--output-root") + 1], "cnn", "seed0", "two_branch", "model_best.pth")
        os.makedirs(os.path.dirname(weights))
        open(weights, "w").close()
        trainings.append(args[0])

    monkeypatch.setattr(compare, "run_tool", run_tool)
    args = argparse.Namespace(filter_weights="", output_root=str(tmp_path / "out"), backbone_weights=None,
                              records_only=False, world="v3", word_vectors=None, filter_config=None, filter_opts=None)
    first, second = compare.filter_model(args), compare.filter_model(args)
    assert trainings == ["compare_retrieval.py"] and first == second
    assert first["weights"] == str(tmp_path / "out" / "filter" / "cnn" / "seed0" / "two_branch" / "model_best.pth")
    assert not _held_elsewhere(tmp_path / "out" / ".filter.lock")  # released


def test_a_filtered_evaluation_of_another_model_than_the_tested_run_is_an_error(tmp_path, fake_runs, monkeypatch):
    """The filtered evaluation's mAP without the filter must be the cite_cca run's test mAP: on detector 1 of
    the long-tailed world one was made on an interrupted retraining's model_best.pth (27.82 against 28.62)."""
    monkeypatch.setattr(compare, "word_vectors_digest", lambda config, opts: "text")
    fake = compare.train_run
    unfiltered = {"0": 12.0, "2": 12.5}  # seed 2's filtered model is not the tested one

    def train_run(name, *args, **kw):
        results, minutes = fake(name, *args, **kw)
        if name != "cite_cca_filtered":
            return results, minutes
        seed = _pairs(args[3])["SEED"]
        return {**results, "phrase_detection_unfiltered": {**METRICS, "mAP": unfiltered[seed]}}, minutes

    monkeypatch.setattr(compare, "train_run", train_run)
    args = _args(tmp_path, "--models", "cite_cca", "--filter-weights", str(tmp_path / "filter.pth"))
    with pytest.raises(SystemExit) as error:
        compare.main(args)
    out = tmp_path / "out" / "detector1" / "seed2" / "cite_cca_filtered"
    assert str(error.value) == (f"{out}: evaluated unfiltered, its model has mAP 12.5000, but the cite_cca run of seed 2 tested "
                                f"12.0000: the filtered model is not that run's (weights "
                                f"{tmp_path / 'out' / 'detector1' / 'seed2' / 'cite_cca' / 'model_best.pth'}); remove this "
                                "evaluation (and its record) and the cite_cca run's folder, and run again")
    unfiltered["2"] = 12.0
    compare.main(args + ["--resume"])
    summary = json.loads((tmp_path / "out" / "comparison.json").read_text())["runs"]["detector1"]["runs"]
    assert [r["unfiltered_mAP"] for r in summary["cite_cca_filtered"]] == [12.0, 12.0]


def test_a_run_restored_without_weights_is_trained_again_before_its_row_is_read(tmp_path, monkeypatch):
    """A filtered evaluation needs the tested model's weights, which records do not keep: cite_cca is
    trained again (its record replaced) before the table reads it, so its row and the filtered row are
    one model (the table once showed the record's earlier run beside the new run's filtered evaluation)."""
    from phrasedet.engine.comparison.runs import finished

    monkeypatch.setattr(compare, "word_vectors_digest", lambda config, opts: "text")
    trained = []

    def train_run(name, config, out, resume, opts, flags=(), records=None):
        if not finished(out, resume, records):
            trained.append(name)
            os.makedirs(out, exist_ok=True)
            if name == "cite_cca_filtered":  # the evaluation of the weights it was given
                weights = _pairs(opts)["MODEL.WEIGHTS"]
                tested = json.loads(open(os.path.join(os.path.dirname(weights), "results.json")).read())["results"]
                results = {"phrase_detection": {**METRICS, "mAP": 99.0}, "phrase_detection_unfiltered": tested["phrase_detection"]}
            else:  # each training gives another model
                results = {"phrase_detection": {**METRICS, "mAP": 10.0 + len(trained)}, "phrase_detection_ppa": METRICS}
            with open(os.path.join(out, "results.json"), "w") as f:
                json.dump({"final_model": os.path.join(out, "model_best.pth"), "results": results}, f)
            with open(os.path.join(out, "wall_time.json"), "w") as f:
                json.dump({"minutes": 1.0}, f)
            if len(trained) > 1:  # the retraining keeps its weights
                open(os.path.join(out, "model_best.pth"), "w").close()
            if records is not None:
                records.save(out, name=name)
        with open(os.path.join(out, "results.json")) as f:
            return json.load(f)["results"], 1.0

    monkeypatch.setattr(compare, "train_run", train_run)
    kept = tmp_path / "records" / "detector1" / "detector.pth"
    kept.parent.mkdir(parents=True)
    torch.save({"model": {"w": torch.tensor([7.0])}}, kept)
    records = ["--record-root", str(tmp_path / "records"), "--seeds", "0", "--models", "cite_cca"]
    compare.main(["--output-root", str(tmp_path / "a"), "--detectors", "1", *records])  # mAP 11.0
    assert trained == ["cite_cca"]
    # another machine: the record restored without weights, and the filtered evaluation asked for
    compare.main(["--output-root", str(tmp_path / "b"), "--detectors", "1", "--resume", *records,
                  "--filter-weights", str(tmp_path / "filter.pth")])
    assert trained == ["cite_cca", "cite_cca", "cite_cca_filtered"]
    runs = json.loads((tmp_path / "b" / "comparison.json").read_text())["runs"]["detector1"]["runs"]
    assert runs["cite_cca"][0]["mAP"] == 12.0 and runs["cite_cca_filtered"][0]["unfiltered_mAP"] == 12.0
    record = tmp_path / "records" / "detector1" / "seed0" / "cite_cca" / "results.json"
    assert json.loads(record.read_text())["results"]["phrase_detection"]["mAP"] == 12.0


def test_every_recorded_evaluation_beside_a_run_is_of_that_run():
    """On the project's records (both worlds): each presence_oracle.json was computed from the
    predictions of the model its record tested (the same mAP without the oracle), and each filtered
    evaluation filtered that seed's cite_cca model (the same mAP unfiltered). Four records once kept
    the presence oracle of a model trained before them."""
    import glob

    root = os.path.join(os.path.dirname(__file__), "..", "results")
    checked = {"presence": 0, "filtered": 0}
    for path in glob.glob(os.path.join(root, "phrase_detection_compare*", "**", "presence_oracle.json"), recursive=True):
        tested = json.load(open(os.path.join(os.path.dirname(path), "results.json")))["results"]["phrase_detection"]["mAP"]
        assert json.load(open(path))["phrase_detection"]["mAP"] == pytest.approx(tested, abs=1e-9), path
        checked["presence"] += 1
    for path in glob.glob(os.path.join(root, "phrase_detection_compare*", "**", "cite_cca_filtered", "results.json"), recursive=True):
        run = os.path.join(os.path.dirname(os.path.dirname(path)), "cite_cca", "results.json")
        tested = json.load(open(run))["results"]["phrase_detection"]["mAP"]
        assert json.load(open(path))["results"]["phrase_detection_unfiltered"]["mAP"] == pytest.approx(tested, abs=1e-9), path
        checked["filtered"] += 1
    assert checked["presence"] >= 100 and checked["filtered"] >= 12, checked
