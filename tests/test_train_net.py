"""tools/train_net.py end to end on the built-in dataset: two CPU processes (gloo), --resume, --eval-only."""
import json
import os

import pytest
from .tool_runs import ROOT, run_tool

TINY = [
    "SOLVER.IMS_PER_BATCH", "2", "DATALOADER.NUM_WORKERS", "0", "MODEL.RPN.POST_NMS_TOPK_TEST", "20",
    "DATASETS.TEST", "('builtin_flickr30k_entities_val',)", "SOLVER.CHECKPOINT_PERIOD", "2",
    "PHRASEDET.TEXT.WORD2VEC_EPOCHS", "1", "PHRASEDET.TEXT.WORD2VEC_DIM", "16",
]


def _run(out, *args):
    return run_tool("train_net.py", "--config-file", os.path.join(ROOT, "configs", "qa_rcnn.yaml"), *args,
                    "OUTPUT_DIR", str(out), *TINY).output


def _metrics(out):
    with open(os.path.join(out, "metrics.json")) as f:
        return [json.loads(line) for line in f]


@pytest.mark.usefixtures("builtin_root")
def test_two_cpu_processes_train_and_evaluate_then_resume(tmp_path):
    log = _run(tmp_path, "--num-gpus", "2", "SOLVER.MAX_ITER", "2")
    assert "backend gloo" in log or "gloo" in log.lower()
    assert "copypaste: Task: phrase_detection" in log
    rows = _metrics(tmp_path)
    assert any("phrase_detection/mAP_common" in r for r in rows) and any("loss_phrase_cls" in r for r in rows)
    assert os.path.isfile(tmp_path / "inference" / "builtin_flickr30k_entities_val" / "phrase_aps.json")
    assert len(os.listdir(tmp_path / "visualizations")) == 4
    assert any(f.startswith("events.out.tfevents") for f in os.listdir(tmp_path))  # TensorBoard

    log = _run(tmp_path, "--resume", "SOLVER.MAX_ITER", "3")
    assert "Starting training from iteration 2" in log
    log = _run(tmp_path, "--eval-only", "MODEL.WEIGHTS", str(tmp_path / "model_final.pth"))
    assert "copypaste: Task: phrase_detection" in log and "Starting training" not in log
