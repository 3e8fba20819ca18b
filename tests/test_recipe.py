"""Paper 003's staged recipe (phrasedet/engine/staged/recipe.py): the stages end to end on a tiny budget,
--resume in the interrupted stage, --eval-only of the result, and the model surgery it relies on."""
import json
import os
import re
import shutil

import numpy as np
import pytest
import torch
from detectron2.config import get_cfg
from torch import nn

from phrasedet.config import add_phrasedet_config
from phrasedet.engine.model_selection import read_early_stop, read_selection
from phrasedet.engine.staged.recipe import _check, _check_schedule, _first_dataset
from phrasedet.engine.staged.stages import freeze_all_but, load_weights
from .tool_runs import ROOT, run_tool

TINY = [
    "SOLVER.IMS_PER_BATCH", "2", "DATALOADER.NUM_WORKERS", "0", "MODEL.RPN.POST_NMS_TOPK_TEST", "20",
    "DATASETS.TEST", "('builtin_flickr30k_entities_val',)", "SOLVER.CHECKPOINT_PERIOD", "2", "SOLVER.MAX_ITER", "3",
    "PHRASEDET.TEXT.WORD2VEC_EPOCHS", "1", "PHRASEDET.TEXT.WORD2VEC_DIM", "16",
    "PHRASEDET.RECIPE.CLASSIFIER_ITERS", "4", "PHRASEDET.RECIPE.CLASSIFIER_STEPS", "[]",
    "PHRASEDET.CCA.MAX_IMAGES", "60",  # the CCA pairs of 60 of the 600 training images (every image: 40 % of a run)
]
# the fixed stage-3 schedule (no validation, the last model tested); RELEASED: the released code's (Base-Recipe.yaml)
FIXED = ["PHRASEDET.RECIPE.SELECTION.DATASET", "", "PHRASEDET.RECIPE.SECOND_PHASE.ITERS", "0"]
SIDE_BY_SIDE = ["PHRASEDET.RECIPE.BASELINE_PROCESS", "True"]  # the baseline in a second process (off in cite_cca.yaml)
RELEASED = ["PHRASEDET.RECIPE.SELECTION.PERIOD", "2", "PHRASEDET.RECIPE.SECOND_PHASE.ITERS", "2"]


def _run(config, out, *args, schedule=FIXED):
    return run_tool("train_net.py", "--config-file", os.path.join(ROOT, "configs", config), *args, "OUTPUT_DIR", str(out),
                    *TINY, *schedule).output


def _results(log, index=-1):
    """A copypaste row of numbers (default: the last evaluation)."""
    return re.findall(r"copypaste: ([0-9.,]+)\n", log)[index]


@pytest.mark.usefixtures("builtin_root")
def test_recipe_runs_every_stage_resumes_where_it_stopped_and_evaluates_again(tmp_path):
    log = _run("cite_cca.yaml", tmp_path, *SIDE_BY_SIDE)
    for stage in ("stage1_detector", "stage3_classifier"):
        assert os.path.isfile(tmp_path / stage / "model_final.pth")
    assert not os.path.exists(tmp_path / "stage4_finetune")  # FINETUNE_ITERS 0
    assert "stage2_cca: saved 2 CCA layers" in log
    assert "CCA pairs from the first 60 of the 600 training images (PHRASEDET.CCA.MAX_IMAGES)" in log
    assert os.path.isfile(tmp_path / "stage3_classifier" / "inference" / "builtin_flickr30k_entities_val" / "phrase_aps.json")
    assert not os.path.exists(tmp_path / "stage1_detector" / "inference")  # only the last stage evaluates

    # the classifier's layers 1 and 2 started from the CCA, and the checkpoint keeps that starting point
    with np.load(tmp_path / "stage2_cca" / "cca.npz") as f:
        a1, b2 = f["layer0_A"], f["layer1_B"]
    state = torch.load(tmp_path / "stage3_classifier" / "model_final.pth", weights_only=True)["model"]
    clf = "roi_heads.classifier."
    np.testing.assert_allclose(state[clf + "region_branch.layers.0.weight_init"].numpy(), a1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state[clf + "phrase_branch.layers.1.weight_init"].numpy(), b2, rtol=1e-5, atol=1e-6)
    assert bool(state[clf + "region_branch.layers.0.cca_flag"])
    # the detector was frozen in stage 3: identical to stage 1's
    detector = torch.load(tmp_path / "stage1_detector" / "model_final.pth", weights_only=True)["model"]
    shared = [k for k in state if not k.startswith(clf)]
    assert len(shared) > 50 and all(torch.equal(state[k], detector[k]) for k in shared)
    assert "roi_heads.box_regressor.phrase_embed.1.running_mean" in shared  # BatchNorm statistics too

    # COMPARE_RANDOM_INIT (cite_cca.yaml): CITE once more, randomly initialized, on the same frozen detector
    baseline = torch.load(tmp_path / "stage3_classifier_random_init" / "model_final.pth", weights_only=True)["model"]
    assert not bool(baseline[clf + "region_branch.layers.0.cca_flag"])
    assert all(torch.equal(baseline[k], detector[k]) for k in shared)
    summary = json.loads((tmp_path / "results.json").read_text())
    assert summary["final_model"] == str(tmp_path / "stage3_classifier" / "model_final.pth")
    assert summary["random_init"]["final_model"].endswith("stage3_classifier_random_init/model_final.pth")
    cca_map, random_map = summary["results"]["phrase_detection"]["mAP"], summary["random_init"]["results"]["phrase_detection"]["mAP"]
    assert summary["comparison"]["cca_minus_random"]["mAP"] == pytest.approx(cca_map - random_map)
    assert "Paper 003's central finding" in summary["comparison"]["verdict"]
    assert "CCA initialization vs random initialization of CITEClassifier" in log and "| CCA - random" in log
    assert "Random-initialization baseline: training in a second process" in log  # BASELINE_PROCESS

    # the baseline trained in this process, after the CCA-initialized classifier (finished: --resume skips it): the same
    # model, up to the rounding of a different thread count (the second process had half the threads)
    seq = tmp_path / "sequential"
    shutil.copytree(tmp_path, seq, ignore=shutil.ignore_patterns("stage3_classifier_random_init", "results.json", "log*"))
    log = _run("cite_cca.yaml", seq, "--resume", "PHRASEDET.RECIPE.BASELINE_PROCESS", "False", "PHRASEDET.RECIPE.PREVIEW", "True")
    assert "training in a second process" not in log and "Starting training from iteration 0" in log
    # PREVIEW (make demo's cite_cca_preview.yaml): the same numbers, a verdict that says it decides nothing
    previewed = json.loads((seq / "results.json").read_text())["comparison"]
    assert previewed["preview"] and previewed["verdict"].startswith("PREVIEW ONLY, NOT A VERDICT: stage 3 stopped after 4 iterations")
    assert "This run alone: CCA initialization" in previewed["verdict"] and "PREVIEW ONLY" in log
    assert "REPRODUCED" not in previewed["verdict"]  # a preview only describes its differences
    alone = torch.load(seq / "stage3_classifier_random_init" / "model_final.pth", weights_only=True)["model"]
    assert alone.keys() == baseline.keys()
    assert all(torch.allclose(alone[k].double(), v.double(), rtol=1e-3, atol=1e-3) for k, v in baseline.items())
    alone_results = json.loads((seq / "results.json").read_text())["random_init"]["results"]["phrase_detection"]
    for key, value in summary["random_init"]["results"]["phrase_detection"].items():
        assert alone_results[key] == pytest.approx(value, abs=0.05), key

    # interrupt stage 3 after iteration 2 of 4: --resume goes on there, with the stage-1 model and the CCA as they were,
    # and ends with the uninterrupted run's weights and numbers (the resumable stream and per-iteration seeds)
    stage3 = tmp_path / "stage3_classifier"
    uninterrupted, uninterrupted_state = _results(log, 0), torch.load(stage3 / "model_final.pth", weights_only=True)["model"]
    for name in ("model_final.pth", "model_0000003.pth"):
        os.remove(stage3 / name)
    (stage3 / "last_checkpoint").write_text("model_0000001.pth")
    mtime = os.path.getmtime(tmp_path / "stage2_cca" / "cca.npz")
    log = _run("cite_cca.yaml", tmp_path, "--resume", *SIDE_BY_SIDE)
    assert "stage1_detector: finished before" in log and "stage2_cca: using the CCA fitted before" in log
    assert "Starting training from iteration 2" in log
    assert os.path.getmtime(tmp_path / "stage2_cca" / "cca.npz") == mtime
    final = _results(log, 0)  # CCA init first, then the random-init baseline
    assert final == uninterrupted
    resumed_state = torch.load(stage3 / "model_final.pth", weights_only=True)["model"]
    assert all(torch.equal(resumed_state[k], v) for k, v in uninterrupted_state.items())
    # the finished baseline (in its second process, with its own log) is only evaluated again
    assert "Starting training from iteration 4" in (tmp_path / "log_random_init.txt").read_text()

    # --eval-only rebuilds the CCA-shaped model from the recipe's folder and gives the same numbers
    log = _run("cite_cca.yaml", tmp_path, "--eval-only", "MODEL.WEIGHTS", str(stage3 / "model_final.pth"))
    assert "Starting training" not in log and _results(log) == final
    # ... also into another folder: the CCA is then found next to MODEL.WEIGHTS (the recipe's folder is untouched)
    mtime = os.path.getmtime(tmp_path / "results.json")
    log = _run("cite_cca.yaml", tmp_path / "elsewhere", "--eval-only", "MODEL.WEIGHTS", str(stage3 / "model_final.pth"))
    assert _results(log) == final and os.path.getmtime(tmp_path / "results.json") == mtime
    assert json.loads((tmp_path / "elsewhere" / "results.json").read_text())["final_model"] == str(stage3 / "model_final.pth")


@pytest.mark.usefixtures("builtin_root")
def test_cca_classifier_recipe_reuses_a_detector_and_trains_nothing(tmp_path):
    first = tmp_path / "first"
    _run("qa_rcnn_staged.yaml", first)  # QA R-CNN: its stage-1 classifier goes on training in stage 3
    detector = first / "stage1_detector" / "model_final.pth"
    log = _run("cca.yaml", tmp_path / "cca", "PHRASEDET.RECIPE.DETECTOR_WEIGHTS", str(detector))
    assert "stage1_detector: using the trained detector" in log and "Starting training" not in log
    assert "stage3_classifier: nothing to train" in log and "copypaste: Task: phrase_detection" in log
    state = torch.load(tmp_path / "cca" / "stage3_classifier" / "model_final.pth", weights_only=True)["model"]
    with np.load(tmp_path / "cca" / "stage2_cca" / "cca.npz") as f:
        np.testing.assert_allclose(state["roi_heads.classifier.region_proj_0"].numpy(), f["layer0_A"], rtol=1e-5, atol=1e-6)
    assert "roi_heads.classifier.region_proj_1" not in state  # PHRASEDET.CCA.SCORE_LAYERS 1: the paper's linear CCA

    # patience on the same detector: QA R-CNN (no BatchNorm) at learning rate 0 scores every validation the same, so
    # the first tie stops each phase; a stopped phase is finished (its model_final.pth), the SGD phase counts its own
    # validations against the Adam phase's best, and --resume then only tests
    patient = ["PHRASEDET.RECIPE.DETECTOR_WEIGHTS", str(detector), "PHRASEDET.RECIPE.CLASSIFIER_LR", "0.0",
               "PHRASEDET.RECIPE.SECOND_PHASE.LR", "0.0", "PHRASEDET.RECIPE.SELECTION.PATIENCE", "1"]
    budget = RELEASED + ["PHRASEDET.RECIPE.CLASSIFIER_ITERS", "40", "PHRASEDET.RECIPE.SECOND_PHASE.ITERS", "40"]
    out = tmp_path / "patient"
    log = _run("qa_rcnn_staged.yaml", out, *patient, schedule=budget)
    adam, sgd = out / "stage3_classifier", out / "stage3b_classifier"
    assert read_early_stop(str(adam)) == {"iteration": 3, "evaluations_without_gain": 1, "patience": 1}
    assert read_early_stop(str(sgd)) == {"iteration": 1, "evaluations_without_gain": 1, "patience": 1}
    assert os.path.isfile(adam / "model_final.pth") and os.path.isfile(sgd / "model_final.pth")
    assert read_selection(str(sgd))["iteration"] == 1 and read_selection(str(sgd))["stage"] == "stage3_classifier"
    assert "stopped early at iteration 3" in log and "Exception during training" not in log
    assert re.search(r"Region cache: \d+ images computed in this stage", log)
    tested = _results(log)
    log = _run("qa_rcnn_staged.yaml", out, "--resume", *patient, schedule=budget)
    assert "Starting training" not in log and _results(log) == tested


@pytest.mark.usefixtures("builtin_root")
def test_the_released_schedule_selects_on_validation_and_tests_the_selected_model(tmp_path):
    log = _run("cite.yaml", tmp_path, schedule=RELEASED)  # Adam 4 iterations, then SGD 2, validation every 2
    adam, sgd = tmp_path / "stage3_classifier", tmp_path / "stage3b_classifier"
    first = read_selection(str(adam))
    assert first["stage"] == "stage3_classifier" and first["iteration"] in (1, 4) and os.path.isfile(adam / "model_best.pth")
    assert "Loaded" in log and str(adam / "model_best.pth") in log  # the SGD phase starts from the Adam phase's best
    final = read_selection(str(sgd))
    assert final["value"] >= first["value"] and (final == first or final["stage"] == "stage3b_classifier")
    summary = json.loads((tmp_path / "results.json").read_text())
    assert summary["final_model"] == final["weights"]
    assert "Stage 3 selected " + final["weights"] in log
    # validation wrote no predictions; the test split is evaluated once, with the selected model, in the last phase's folder
    assert not os.path.exists(adam / "inference" / "builtin_flickr30k_entities_val" / "phrase_predictions.jsonl")
    assert os.path.isfile(sgd / "inference" / "builtin_flickr30k_entities_val" / "phrase_aps.json")
    assert "is also a test split" in log  # TINY tests on the validation split
    tested = _results(log)
    log = _run("cite.yaml", tmp_path / "eval", "--eval-only", "MODEL.WEIGHTS", final["weights"], schedule=RELEASED)
    assert _results(log) == tested


def _recipe_cfg(**recipe):
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    for key, value in recipe.items():
        cfg.PHRASEDET.RECIPE[key] = value
    return cfg


@pytest.mark.parametrize("recipe, message", [
    ({"CLASSIFIER_OPTIMIZER": "Adagrad"}, "PHRASEDET.RECIPE.CLASSIFIER_OPTIMIZER must be one of"),
    ({"FINETUNE_ITERS": -1}, "PHRASEDET.RECIPE.FINETUNE_ITERS must be >= 0"),
    ({"DETECTOR_WEIGHTS": "/nonexistent/model_final.pth"}, "DETECTOR_WEIGHTS: no file"),
    ({"COMPARE_RANDOM_INIT": True, "CCA_INIT": False}, "COMPARE_RANDOM_INIT compares CCA with random initialization"),
    ({"COMPARE_RANDOM_INIT": True}, "COMPARE_RANDOM_INIT needs DATASETS.TEST"),
])
def test_bad_recipe_settings_are_named(recipe, message):
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        _check(_recipe_cfg(**recipe))


@pytest.mark.parametrize("keys, message", [
    ({"SECOND_PHASE.OPTIMIZER": "Adagrad"}, "SECOND_PHASE.OPTIMIZER must be one of"),
    ({"SECOND_PHASE.ITERS": -1}, "SECOND_PHASE.ITERS must be >= 0"),
    ({"SELECTION.DATASET": "no_such_split"}, "SELECTION.DATASET: 'no_such_split' is not a registered dataset"),
    ({"SELECTION.DATASET": "builtin_flickr30k_entities_val", "SELECTION.PERIOD": 0}, "SELECTION.PERIOD must be > 0"),
    ({"SELECTION.DATASET": "builtin_flickr30k_entities_val", "SELECTION.MODE": "best"}, "SELECTION.MODE must be 'max' or 'min'"),
    ({"SELECTION.DATASET": "builtin_flickr30k_entities_val", "SELECTION.VOCABULARY": "all"}, "SELECTION.VOCABULARY must be"),
])
def test_bad_stage3_schedules_are_named(keys, message):
    cfg = _recipe_cfg()
    cfg.merge_from_list([x for k, v in keys.items() for x in (f"PHRASEDET.RECIPE.{k}", v)])
    with pytest.raises((ValueError, KeyError), match=message):
        _check_schedule(cfg)


@pytest.mark.parametrize("recipe", [{"CCA_INIT": False}, {"CCA_INIT": True, "COMPARE_RANDOM_INIT": True}])
def test_cca_classifier_without_cca_or_compared_with_random_init_is_refused(recipe):
    cfg = _recipe_cfg(**recipe)
    cfg.MODEL.PHRASE_ROI_HEADS.CLASSIFIER = "CCAClassifier"
    with pytest.raises(ValueError, match="needs PHRASEDET.RECIPE.CCA_INIT True and COMPARE_RANDOM_INIT False"):
        _check(cfg)


def test_the_comparison_reads_the_first_test_set_also_when_detectron2_nests_results():
    cfg = _recipe_cfg()
    cfg.DATASETS.TEST = ("a", "b")
    first, second = {"mAP": 1.0}, {"mAP": 2.0}
    assert _first_dataset(cfg, {"a": {"phrase_detection": first}, "b": {"phrase_detection": second}}) is first
    assert _first_dataset(cfg, {"phrase_detection": second}) is second


def _toy():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 1)))


def test_freeze_all_but_stops_gradients_and_batchnorm_updates_outside():
    model = _toy()
    head = model[2]
    freeze_all_but(model, head)
    model.train()
    frozen_stats = model[1].running_mean.clone()
    model(torch.randn(8, 3)).sum().backward()
    assert all(p.grad is None for p in list(model[0].parameters()) + list(model[1].parameters()))
    assert all(p.grad is not None for p in head.parameters())
    assert torch.equal(model[1].running_mean, frozen_stats)  # frozen BN: running statistics kept
    assert not torch.equal(head[1].running_mean, torch.zeros(4))  # trainable BN: updated


def test_load_weights_names_what_does_not_fit(tmp_path):
    model = _toy()
    path = tmp_path / "ckpt.pth"
    torch.save({"model": {k: v for k, v in model.state_dict().items() if not k.startswith("2.2")}, "iteration": 3}, path)
    with pytest.raises(ValueError, match=r"missing \['2.2.weight', '2.2.bias'\]"):
        load_weights(_toy(), str(path))
    load_weights(_toy(), str(path), may_miss=("2.2.",))
    torch.save({"model": {**model.state_dict(), "extra.weight": torch.zeros(1)}}, path)
    with pytest.raises(ValueError, match=r"unexpected \['extra.weight'\]"):
        load_weights(_toy(), str(path))
    fresh = _toy()
    load_weights(fresh, str(path), drop=("extra.",))
    assert torch.equal(fresh[0].weight, model[0].weight)


@pytest.mark.usefixtures("builtin_root")
def test_eval_only_without_the_recipe_s_cca_names_both_places_it_looked(tmp_path):
    from phrasedet.engine.staged.recipe import build_recipe_model

    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(os.path.join(ROOT, "configs", "cite_cca.yaml"))
    cfg.merge_from_list(["OUTPUT_DIR", str(tmp_path / "out"), "MODEL.WEIGHTS", str(tmp_path / "recipe" / "stage3_classifier" / "m.pth"),
                         "PHRASEDET.TEXT.WORD2VEC_EPOCHS", 1])
    with pytest.raises(FileNotFoundError, match=re.escape(f"{tmp_path}/out/stage2_cca/cca.npz or {tmp_path}/recipe/stage2_cca/cca.npz")):
        build_recipe_model(cfg)
