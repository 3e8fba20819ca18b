"""tools/train_net.py for the pointing family on the built-in data: DSVE-loc trains on captions,
is evaluated on retrieval and on the pointing game (centre baseline beside it), saves its points
and heatmap pictures; --eval-only and tools/evaluation/evaluate_pointing.py give the in-loop accuracy."""
import json
import os

import numpy as np
import pytest
from .tool_runs import ROOT, run_tool

SPLIT = "builtin_flickr30k_pointing_val"
TINY = ["DATALOADER.NUM_WORKERS", "0", "PHRASEDET.TEXT.WORD2VEC_EPOCHS", "1", "SOLVER.IMS_PER_BATCH", "16",
        "SOLVER.MAX_ITER", "20", "SOLVER.STEPS", "()", "MODEL.RETRIEVAL.EMBED_DIM", "32",
        "MODEL.RETRIEVAL.ADAPTATION_DIM", "16", "MODEL.RETRIEVAL.RNN.NUM_LAYERS", "1", "MODEL.POINTING.HEATMAP_TOPK", "3",
        "INPUT.RETRIEVAL.CROP", "64", "DATASETS.TEST", f"('builtin_flickr30k_captions_val', '{SPLIT}')"]


def _tool(name, *args):
    return run_tool(name, *args).output


def _train(out, *args):
    return _tool("train_net.py", "--config-file", os.path.join(ROOT, "configs", "pointing", "dsve_loc.yaml"), *args,
                 "OUTPUT_DIR", out, *TINY)


@pytest.mark.usefixtures("builtin_root")
def test_dsve_loc_trains_then_plays_the_pointing_game_and_eval_only_agrees(tmp_path):
    log = _train(tmp_path / "train")
    results = json.loads((tmp_path / "train" / "results.json").read_text())["results"]
    pointing = results[SPLIT]["pointing"]
    assert "retrieval" in results["builtin_flickr30k_captions_val"]
    assert pointing["num_queries"] > 0 and 0 <= pointing["accuracy"] <= 100
    assert "strict (main) | x1 < x < x2 and y1 < y < y2" in log  # the protocol is printed with the numbers
    inference = tmp_path / "train" / "inference" / SPLIT
    saved = np.load(inference / "pointing_predictions.npz")
    assert len(saved["query_id"]) == pointing["num_queries"]
    assert 100 * saved["hit_strict"].mean() == pytest.approx(pointing["accuracy"], abs=1e-6)
    pictures = os.listdir(tmp_path / "train" / "visualizations" / SPLIT)
    assert len(pictures) == 4 and all(p.endswith(".png") for p in pictures)

    _train(tmp_path / "eval", "--eval-only", "MODEL.WEIGHTS", tmp_path / "train" / "model_final.pth")
    again = json.loads((tmp_path / "eval" / "results.json").read_text())["results"][SPLIT]["pointing"]
    assert again["accuracy"] == pytest.approx(pointing["accuracy"], abs=1e-9)
    tool = _tool("evaluate_pointing.py", "--dataset", SPLIT, "--points", inference / "pointing_predictions.npz")
    assert f"{pointing['accuracy']:.2f}" in tool


def test_pointing_splits_are_not_for_training(tmp_path):
    proc = run_tool("train_net.py", "--config-file", os.path.join(ROOT, "configs", "pointing", "dsve_loc.yaml"),
                    "DATASETS.TRAIN", f"('{SPLIT}',)", "OUTPUT_DIR", tmp_path, check=False)
    assert proc.returncode != 0 and "pointing-game splits are for evaluation" in proc.output


@pytest.mark.usefixtures("builtin_root")
def test_dsve_loc_on_the_oracle_maps_trains_points_and_keeps_them_in_the_image(tmp_path):
    """MODEL.RETRIEVAL.IMAGE_INPUT maps: the spatial oracle in place of the CNN's maps, through
    the adaptation, WELDON pooling and the heatmaps; every point lies in its image."""
    _tool("make_oracle_features.py", "--output-dir", tmp_path / "oracle")
    _train(tmp_path / "train", "MODEL.RETRIEVAL.IMAGE_INPUT", "maps", "MODEL.RETRIEVAL.IMAGE_FEATURES_DIR",
           tmp_path / "oracle" / "maps")
    results = json.loads((tmp_path / "train" / "results.json").read_text())["results"]
    pointing = results[SPLIT]["pointing"]
    assert pointing["num_queries"] > 0 and "retrieval" in results["builtin_flickr30k_captions_val"]
    saved = np.load(tmp_path / "train" / "inference" / SPLIT / "pointing_predictions.npz")
    assert 100 * saved["hit_strict"].mean() == pytest.approx(pointing["accuracy"], abs=1e-6)
    import torch

    state = torch.load(tmp_path / "train" / "model_final.pth", map_location="cpu", weights_only=False)["model"]
    assert state["image_encoder.adaptation.weight"].shape[1] == 1138  # the oracle's channels, no backbone tensor
    assert not any(k.startswith("image_encoder.backbone.") for k in state)


def test_stored_maps_need_no_backbone_weights(tmp_path):
    proc = run_tool("train_net.py", "--config-file", os.path.join(ROOT, "configs", "pointing", "dsve_loc.yaml"),
                    "MODEL.RETRIEVAL.IMAGE_INPUT", "maps", "MODEL.RETRIEVAL.BACKBONE_WEIGHTS", "x.pth", "OUTPUT_DIR", tmp_path,
                    check=False)
    assert proc.returncode != 0 and ("MODEL.RETRIEVAL.IMAGE_INPUT 'maps' reads precomputed maps in place of the backbone: "
                                     "BACKBONE_WEIGHTS must be empty and FREEZE_BACKBONE_ITERS -1") in proc.output
