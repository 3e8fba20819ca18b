"""tools/train_net.py for the retrieval family on the built-in captions: training raises rsum well
above an untrained model's; two CPU processes with a backbone unfrozen mid-run; --eval-only and
the saved embeddings give the in-loop numbers."""
import json
import os
import re

import pytest
from .tool_runs import ROOT, run_tool

COMMON = ["DATALOADER.NUM_WORKERS", "0", "PHRASEDET.TEXT.WORD2VEC_EPOCHS", "1", "MODEL.RETRIEVAL.EMBED_DIM", "128"]


def _tool(name, *args):
    return run_tool(name, *args).output


def _train(config, out, *args):
    return _tool("train_net.py", "--config-file", os.path.join(ROOT, "configs", "retrieval", config), *args,
                 "OUTPUT_DIR", out, *COMMON)


def _rsum(log):
    names = re.findall(r"copypaste: (i2t_R@1,[A-Za-z0-9_@,]+)\n", log)[-1].split(",")
    values = re.findall(r"copypaste: ([0-9.,]+)\n", log)[-1].split(",")
    return dict(zip(names, map(float, values)))["rsum"]


@pytest.mark.usefixtures("builtin_root")
def test_training_raises_rsum_well_above_an_untrained_model(tmp_path):
    features = tmp_path / "features"
    _tool("extract_image_features.py", "--config-file", os.path.join(ROOT, "configs", "retrieval", "vse0.yaml"),
          "--output-dir", features)
    on_features = ["MODEL.RETRIEVAL.IMAGE_INPUT", "features", "MODEL.RETRIEVAL.IMAGE_FEATURES_DIR", str(features),
                   "SOLVER.STEPS", "()"]
    untrained = _rsum(_train("vse0.yaml", tmp_path / "untrained", "--eval-only", *on_features))
    trained = _rsum(_train("vse0.yaml", tmp_path / "trained", *on_features, "SOLVER.MAX_ITER", "150"))
    # chance: about 27 for 150 images with 5 captions each (the untrained model is near it)
    assert untrained < 45 and trained > 2 * untrained, (untrained, trained)
    saved = json.loads((tmp_path / "trained" / "results.json").read_text())
    assert saved["results"]["retrieval"]["rsum"] == pytest.approx(trained, abs=1e-3)


@pytest.mark.usefixtures("builtin_root")
def test_two_processes_unfreeze_the_backbone_then_eval_only_and_saved_embeddings_agree(tmp_path):
    tiny = ["--num-gpus", "2", "SOLVER.IMS_PER_BATCH", "4", "SOLVER.MAX_ITER", "4", "SOLVER.STEPS", "()",
            "MODEL.RETRIEVAL.FREEZE_BACKBONE_ITERS", "2", "INPUT.RETRIEVAL.CROP", "32", "TEST.RETRIEVAL.IMS_PER_BATCH", "1",
            "DATASETS.TEST", "('builtin_flickr30k_captions_val',)"]
    log = _train("vsepp.yaml", tmp_path, *tiny)
    assert "Iteration 2: image backbone fine-tuned from now on" in log
    assert "copypaste: Task: retrieval" in log
    in_loop = _rsum(log)
    saved = tmp_path / "inference" / "builtin_flickr30k_captions_val" / "retrieval_embeddings.npz"
    assert saved.is_file()
    again = _train("vsepp.yaml", tmp_path / "eval", "--eval-only", "MODEL.WEIGHTS", tmp_path / "model_final.pth",
                   "INPUT.RETRIEVAL.CROP", "32", "TEST.RETRIEVAL.IMS_PER_BATCH", "1", "DATASETS.TEST", "('builtin_flickr30k_captions_val',)")
    assert _rsum(again) == pytest.approx(in_loop, abs=1e-3)
    tool = _tool("evaluate_retrieval.py", "--embeddings", saved, "--dataset", "builtin_flickr30k_captions_val",
                 "--output", tmp_path / "tool.json")
    assert json.loads((tmp_path / "tool.json").read_text())["retrieval"]["rsum"] == pytest.approx(in_loop, abs=1e-3)
    assert "i2t" in tool


@pytest.mark.usefixtures("builtin_root")
def test_selection_tests_the_best_validation_snapshot_and_keeps_the_curve(tmp_path):
    """PHRASEDET.SELECTION on the oracle's global features: validation every 20 iterations, the
    best of them (selection.json) is the model tested, metrics.json holds the curve, --eval-only of
    that snapshot gives the same test numbers, and --resume of a finished run only tests."""
    _tool("make_oracle_features.py", "--output-dir", tmp_path / "oracle")
    args = ["MODEL.RETRIEVAL.IMAGE_INPUT", "features", "MODEL.RETRIEVAL.IMAGE_FEATURES_DIR", str(tmp_path / "oracle" / "global"),
            "SOLVER.MAX_ITER", "60", "SOLVER.STEPS", "(30,)", "PHRASEDET.SELECTION.DATASET", "builtin_flickr30k_captions_val",
            "PHRASEDET.SELECTION.PERIOD", "20"]
    out = tmp_path / "run"
    log = _train("vse0.yaml", out, *args)
    curve = {}
    for line in (out / "metrics.json").read_text().splitlines():
        record = json.loads(line)
        if "retrieval/rsum" in record:
            curve[record["iteration"]] = record["retrieval/rsum"]
    assert sorted(curve) == [19, 39, 60]  # the last validation runs after training, at MAX_ITER
    selection = json.loads((out / "selection.json").read_text())
    best = max(curve, key=lambda i: (curve[i], -i))  # the first of equal values is kept
    assert selection["value"] == pytest.approx(curve[best]) and selection["iteration"] == best
    assert selection["metric"] == "retrieval/rsum" and selection["weights"].endswith("model_best.pth")
    saved = json.loads((out / "results.json").read_text())
    assert saved["final_model"] == os.path.abspath(selection["weights"])
    assert set(saved["results"]) == {"retrieval"}  # the test split, not the validation one
    tested = saved["results"]["retrieval"]["rsum"]
    assert _rsum(log) == pytest.approx(tested, abs=1e-3)
    _train("vse0.yaml", tmp_path / "eval", "--eval-only", "MODEL.WEIGHTS", selection["weights"], *args)
    again = json.loads((tmp_path / "eval" / "results.json").read_text())["results"]["retrieval"]["rsum"]
    assert again == pytest.approx(tested, abs=1e-6)  # exact: results.json, not the log's 4 decimals
    resumed = _train("vse0.yaml", out, "--resume", *args)
    assert "training for 60 iterations" not in resumed and _rsum(resumed) == pytest.approx(tested, abs=1e-3)
    assert json.loads((out / "results.json").read_text())["results"]["retrieval"]["rsum"] == pytest.approx(tested, abs=1e-6)
