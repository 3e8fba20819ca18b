"""tools/compare/compare_retrieval.py and tools/compare/compare_pointing.py end to end on tiny budgets: every stage
runs on both representations, each run validates and tests its best snapshot, the curves are
drawn, the tables and verdicts come out, and --resume reuses finished runs."""
import json
import os

import pytest

from .data import independent_specificity
from .tool_runs import run_tool

TINY = ["SOLVER.IMS_PER_BATCH", "8", "DATALOADER.NUM_WORKERS", "0", "PHRASEDET.TEXT.WORD2VEC_EPOCHS", "1",
        "INPUT.RETRIEVAL.CROP", "64", "MODEL.RETRIEVAL.EMBED_DIM", "64"]
BUDGET = ["--budget", "4", "--val-period", "2", "--backbone-weights", "none"]


def _tool(name, root, *args, opts=()):
    budget = BUDGET + (["--finetune-budget", "2"] if name == "compare_retrieval.py" else [])
    return run_tool(name, "--output-root", str(root), "--seeds", "0", *args, *budget, *TINY, *opts).output


def _summary(root):
    return json.loads((root / "comparison.json").read_text())


def _curve_iterations(metrics):
    return sorted({json.loads(line)["iteration"] for line in metrics.read_text().splitlines()
                   if "retrieval/rsum" in json.loads(line)})


@pytest.mark.usefixtures("builtin_root")
def test_every_stage_runs_on_both_representations_and_the_verdicts_come_out(tmp_path, builtin_root):
    out = _tool("compare_retrieval.py", tmp_path, "--models", "vse0", "vsepp", "vse0_ft", "vsepp_ft")
    assert "image CNN: random initialization" in out
    summary = _summary(tmp_path)
    cnn, oracle = summary["representations"]["cnn"], summary["representations"]["oracle"]
    assert set(cnn["runs"]) == {"vse0", "vsepp", "vse0_ft", "vsepp_ft"} and len(cnn["verdicts"]) == 3
    assert set(oracle["runs"]) == {"vse0", "vsepp"} and len(oracle["verdicts"]) == 1  # nothing to fine-tune
    assert oracle["features"].endswith(os.path.join("oracle", "features", "global")) and oracle["backbone_weights"] == ""
    assert "cnn: built-in test split" in out and "oracle: built-in test split" in out
    # each run validated every 2 iterations and tested its best snapshot; the fine-tuned row continued it on pixels
    for rep in ("cnn", "oracle"):
        run = tmp_path / rep / "seed0" / "vsepp"
        assert _curve_iterations(run / "metrics.json") == [1, 4]  # the last: after training, at MAX_ITER
        tested = json.loads((run / "results.json").read_text())["final_model"]
        assert tested == os.path.abspath(json.loads((run / "selection.json").read_text())["weights"])
        assert os.path.getsize(tmp_path / rep / "learning_curves.png") > 1000
    log = (tmp_path / "cnn" / "seed0" / "vsepp_ft" / "train_net.log").read_text()
    assert "seed0/vsepp/model_best.pth" in log and "PixelImageEncoder" in log
    assert "| vsepp | " in out and "flattened at (within 5)" in out
    # the training captions' specificity at the run's batch of 8, as an independent count gives it
    in_batch, share, in_split, share_split, most, counted = independent_specificity.count_split(builtin_root, "train", 8)
    assert (f"Caption specificity (built-in training split, batches of 8 images): a caption is true of {in_batch:.3f} "
            f"other images of its batch on average; {100 * share:.1f} % of captions are true of at least one.") in out
    assert summary["caption_specificity"] == pytest.approx(
        {"images": 600, "captions": counted, "left_out": 12, "batch_size": 8, "mean_in_batch": in_batch,
         "share_in_batch": share, "mean_in_split": in_split, "share_in_split": share_split, "max_in_split": most},
        rel=1e-12)
    assert most > 0  # version 3's training split: a few captions are true of another image
    again = _tool("compare_retrieval.py", tmp_path, "--resume", "--models", "vse0", "vsepp", "vse0_ft", "vsepp_ft")
    assert "vse0:" not in again and "| vse0 |" in again  # nothing retrained


@pytest.mark.usefixtures("builtin_root")
def test_paper_001_rows_two_stages_on_the_cnn_stage_one_alone_on_the_oracle(tmp_path):
    small = ["INPUT.RETRIEVAL.CROP", "32", "MODEL.RETRIEVAL.TEXT_CNN.STAGE_WIDTHS", "[8, 16, 16, 32]"]
    records = ["--record-root", str(tmp_path / "records")]
    _tool("compare_retrieval.py", tmp_path, "--models", "instance_loss", "ranking_only", *records, opts=small)
    summary = _summary(tmp_path)["representations"]
    assert list(summary["cnn"]["runs"]) == ["instance_loss", "instance_loss_stage1", "ranking_only", "ranking_only_stage1"]
    assert set(summary["cnn"]["minutes"]) == {"instance_loss", "ranking_only"}  # stage-I rows are evaluations, not runs
    assert [v["claim"] for v in summary["cnn"]["verdicts"]] == [
        "001: the instance loss beats the ranking loss with a frozen CNN (stage I)",
        "001: instance + ranking loss (stage II) beats the ranking loss alone"]
    # the stage-I row evaluates stage I's best snapshot; both stages validated
    run = tmp_path / "cnn" / "seed0" / "instance_loss"
    assert "instance_loss/stage1_frozen_cnn/model_best.pth" in (run / "stage1_eval" / "train_net.log").read_text()
    assert _curve_iterations(run / "stage1_frozen_cnn" / "metrics.json") == [1, 4]
    assert _curve_iterations(run / "stage2_finetune" / "metrics.json") == [2]
    # on the oracle: the stage-I models alone, trained on it for the budget
    assert list(summary["oracle"]["runs"]) == ["instance_loss_stage1", "ranking_only_stage1"]
    assert [v["claim"] for v in summary["oracle"]["verdicts"]] == [
        "001: the instance loss beats the ranking loss with a frozen CNN (stage I)"]
    config = (tmp_path / "oracle" / "seed0" / "instance_loss" / "config.yaml").read_text()
    assert "MAX_ITER: 4" in config and "IMAGE_INPUT: features" in config
    # a new machine: the two-stage runs come back from their records, with their stage-I evaluations;
    # one whose evaluation was never recorded trains again, as its stage-I weights are not kept
    import shutil

    shutil.rmtree(tmp_path / "records" / "cnn" / "seed0" / "ranking_only" / "stage1_eval")
    os.rename(tmp_path / "cnn", tmp_path / "old machine")  # its weights are gone
    again = _tool("compare_retrieval.py", tmp_path / "new", "--resume", "--representations", "cnn", "--models",
                  "instance_loss", "ranking_only", *records, opts=small)
    assert "instance_loss:" not in again and "instance_loss_stage1:" not in again
    assert "seed0/ranking_only: restored from its record without weights: trained again" in again
    assert "ranking_only:" in again and "ranking_only_stage1:" in again
    restored = _summary(tmp_path / "new")["representations"]["cnn"]["runs"]
    assert restored["instance_loss"] == summary["cnn"]["runs"]["instance_loss"]
    assert restored["instance_loss_stage1"] == summary["cnn"]["runs"]["instance_loss_stage1"]


@pytest.mark.usefixtures("builtin_root")
def test_compare_pointing_on_cnn_maps_and_oracle_maps(tmp_path):
    small = ["MODEL.RETRIEVAL.EMBED_DIM", "32", "MODEL.RETRIEVAL.ADAPTATION_DIM", "16", "MODEL.RETRIEVAL.RNN.NUM_LAYERS", "1",
             "MODEL.POINTING.HEATMAP_TOPK", "3"]
    out = _tool("compare_pointing.py", tmp_path, "--models", "dsve_loc", "dsve_loc_sum", opts=small)
    summary = _summary(tmp_path)["representations"]
    for rep, channels in (("cnn", 128), ("oracle", 1138)):
        assert set(summary[rep]["runs"]) == {"dsve_loc", "dsve_loc_sum"}
        assert [v["claim"] for v in summary[rep]["verdicts"]] == [
            "004: DSVE-loc beats the centre baseline on the pointing game",
            "004: hard negatives beat the sum over negatives on retrieval"]
        run = tmp_path / rep / "seed0" / "dsve_loc"
        assert _curve_iterations(run / "metrics.json") == [1, 4]  # the last: after training, at MAX_ITER
        assert f"adaptation): Conv2d({channels}, 16" in (run / "train_net.log").read_text()
    assert "| dsve_loc |" in out and "oracle: built-in test split, pointing game with the strict hit rule" in out


@pytest.mark.usefixtures("builtin_root")
def test_records_carry_a_comparison_to_a_new_machine(tmp_path):
    """--record-root: a new machine restores the finished runs from their records; a fine-tuned run
    whose frozen run kept no weights trains that run again first."""
    records, output = tmp_path / "results", tmp_path / "output"
    rec = ["--representations", "cnn", "--record-root", str(records)]
    _tool("compare_retrieval.py", output, *rec, "--models", "vse0")
    first = _summary(output)["representations"]["cnn"]["runs"]["vse0"]
    assert json.loads((records / "cnn" / "seed0" / "vse0" / "record.json").read_text())["name"] == "vse0"
    assert not list(records.rglob("*.pth"))
    os.rename(output, tmp_path / "old machine")
    out = _tool("compare_retrieval.py", output, "--resume", *rec, "--models", "vse0")
    assert "vse0:" not in out and _summary(output)["representations"]["cnn"]["runs"]["vse0"] == first
    out = _tool("compare_retrieval.py", output, "--resume", *rec, "--models", "vse0", "vse0_ft")
    assert "seed0/vse0: restored from its record without weights: trained again" in out
    assert "vse0:" in out and "vse0_ft:" in out
    assert "seed0/vse0/model_best.pth" in (output / "cnn" / "seed0" / "vse0_ft" / "train_net.log").read_text()
    os.rename(output, tmp_path / "third machine")
    out = _tool("compare_retrieval.py", output, "--resume", *rec, "--models", "vse0", "vse0_ft")
    assert "vse0:" not in out and "vse0_ft:" not in out and "| vse0_ft |" in out
    text = _summary(output)["word_vectors"]
    assert f"word vectors: word2vec trained here (fingerprint {text})" in out
    assert json.loads((records / "cnn" / "seed0" / "vse0_ft" / "record.json").read_text())["word_vectors"] == text
