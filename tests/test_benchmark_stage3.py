"""tools/benchmarks/benchmark_stage3.py: both ways on the same batches, the cache filled once, a table whose
baseline row is the detector run every step."""
import importlib.util
import os
import re

import pytest
import torch
from detectron2.modeling import build_model

from tests.checkpoint_fixtures import phrasedet_config
from .tool_runs import tool_path

ROOT = os.path.join(os.path.dirname(__file__), "..")
_spec = importlib.util.spec_from_file_location("benchmark_stage3", tool_path("benchmark_stage3.py"))
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


@pytest.mark.usefixtures("builtin_root")
def test_prints_both_ways_with_the_detector_as_baseline(tmp_path, capsys):
    torch.manual_seed(0)
    cfg = phrasedet_config("qa_rcnn.yaml", tmp_path)  # a random detector, and a tiny word-vector file
    detector = str(tmp_path / "detector.pth")
    torch.save({"model": build_model(cfg).state_dict()}, detector)
    small = ["SOLVER.IMS_PER_BATCH", 2, "PHRASEDET.TEXT.WORD_VECTORS", "file", "PHRASEDET.TEXT.WORD_VECTORS_PATH",
             cfg.PHRASEDET.TEXT.WORD_VECTORS_PATH, "PHRASEDET.TEXT.WORD_VECTORS_FORMAT", cfg.PHRASEDET.TEXT.WORD_VECTORS_FORMAT]
    bench.main(["--config-file", os.path.join(ROOT, "configs", "cite_cca.yaml"), "--detector", detector, "--iters", "2",
                "--warmup", "1", "--val-images", "2", *map(str, small)])
    out = capsys.readouterr().out
    assert "2 steps of 2 images (CITEClassifier)" in out and "cache filled for 6 training images" in out
    rows = re.findall(r"^\| (detector every step|region cache) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \|$", out, re.M)
    assert [r[0] for r in rows] == ["detector every step", "region cache"] and rows[0][3] == "1.00"
    assert re.search(r"validation pass \(2 images, their own phrases\): detector every step [0-9.]+ s", out)
