"""tools/compare_retrieval.py end to end on a tiny budget: every stage runs, the table and the
verdicts come out, and --resume reuses finished runs."""
import json
import os
import subprocess
import sys

import pytest

from .data import independent_specificity

ROOT = os.path.join(os.path.dirname(__file__), "..")
TINY = ["SOLVER.MAX_ITER", "3", "SOLVER.STEPS", "()", "SOLVER.IMS_PER_BATCH", "8", "DATALOADER.NUM_WORKERS", "0",
        "PHRASEDET.TEXT.WORD2VEC_EPOCHS", "1"]


def _compare(root, *args):
    cmd = [sys.executable, os.path.join(ROOT, "tools", "compare_retrieval.py"), "--output-root", str(root), "--seeds", "0",
           "--models", "vse0", "vsepp", "vse0_ft", "vsepp_ft", "--backbone-weights", "none", "--finetune-iters", "2", *args, *TINY]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def summary_specificity(root):
    return json.loads((root / "comparison.json").read_text())["caption_specificity"]


def test_every_stage_runs_and_the_verdicts_come_out(tmp_path, builtin_root):
    out = _compare(tmp_path)
    assert "image CNN: random initialization" in out
    assert "| vsepp_ft |" in out and "002: the gain of max over sum is larger with a fine-tuned CNN:" in out
    # the training captions' specificity at the run's batch of 8, as an independent count gives it
    in_batch, share, in_split, share_split, most, counted = independent_specificity.count_split(builtin_root, "train", 8)
    assert (f"Caption specificity (built-in training split, batches of 8 images): a caption is true of {in_batch:.3f} "
            f"other images of its batch on average; {100 * share:.1f} % of captions are true of at least one.") in out
    assert summary_specificity(tmp_path) == pytest.approx(
        {"images": 600, "captions": counted, "left_out": 12, "batch_size": 8, "mean_in_batch": in_batch,
         "share_in_batch": share, "mean_in_split": in_split, "share_in_split": share_split, "max_in_split": most},
        rel=1e-12)
    assert most > 0  # version 3's training split: a few captions are true of another image
    summary = json.loads((tmp_path / "comparison.json").read_text())
    assert len(summary["verdicts"]) == 3 and summary["backbone_weights"] == ""
    assert set(summary["runs"]) == {"vse0", "vsepp", "vse0_ft", "vsepp_ft"}
    # the fine-tuned row continued the frozen model on pixels, with the CNN trained
    log = (tmp_path / "seed0" / "vsepp_ft" / "train_net.log").read_text()
    assert "seed0/vsepp/model_final.pth" in log and "PixelImageEncoder" in log
    assert os.path.isfile(tmp_path / "features" / "builtin_flickr30k_captions_train.npy")
    again = _compare(tmp_path, "--resume")
    assert "vse0:" not in again and "| vse0 |" in again  # nothing retrained


@pytest.mark.usefixtures("builtin_root")
def test_paper_001_rows_train_two_stages_evaluate_stage_one_and_give_their_verdicts(tmp_path):
    small = ["PHRASEDET.RETRIEVAL_STAGES.STAGE1_ITERS", "2", "PHRASEDET.RETRIEVAL_STAGES.STAGE1_STEPS", "[]",
             "INPUT.RETRIEVAL.CROP", "32", "MODEL.RETRIEVAL.TEXT_CNN.STAGE_WIDTHS", "[8, 16, 16, 32]"]
    cmd = [sys.executable, os.path.join(ROOT, "tools", "compare_retrieval.py"), "--output-root", str(tmp_path), "--seeds", "0",
           "--models", "instance_loss", "ranking_only", "--backbone-weights", "none", *TINY, *small]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "comparison.json").read_text())
    assert list(summary["runs"]) == ["instance_loss", "instance_loss_stage1", "ranking_only", "ranking_only_stage1"]
    assert set(summary["minutes"]) == {"instance_loss", "ranking_only"}  # stage-I rows are evaluations, not runs
    claims = [v["claim"] for v in summary["verdicts"]]
    assert claims == ["001: the instance loss beats the ranking loss with a frozen CNN (stage I)",
                      "001: instance + ranking loss (stage II) beats the ranking loss alone"]
    # the stage-I row evaluates stage I's own weights
    log = (tmp_path / "seed0" / "instance_loss" / "stage1_eval" / "train_net.log").read_text()
    assert "instance_loss/stage1_frozen_cnn/model_final.pth" in log
    assert "| instance_loss_stage1 |" in proc.stdout and "| - |" in proc.stdout
