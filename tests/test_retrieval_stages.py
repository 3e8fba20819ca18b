"""Paper 001's two stages in one run (phrasedet/engine/staged/retrieval_stages.py): stage I leaves the
image CNN as it was given, stage II fine-tunes it, stage I can train on precomputed features, and
--resume after stage I continues in stage II with the same result as an uninterrupted run."""
import os
import shutil

import pytest
import torch
from detectron2.config import get_cfg
from detectron2.modeling import build_model

from phrasedet.config import add_phrasedet_config
from phrasedet.engine.feature_extraction import extract_image_features
from phrasedet.engine.staged.retrieval_stages import retrieval_stages, run_retrieval_stages
from tests.checkpoint_fixtures import give_trained_statistics

ROOT = os.path.join(os.path.dirname(__file__), "..")
TINY = ["SOLVER.IMS_PER_BATCH", 8, "SOLVER.MAX_ITER", 3, "SOLVER.STEPS", (), "SOLVER.CHECKPOINT_PERIOD", 100,
        "PHRASEDET.RETRIEVAL_STAGES.STAGE1_ITERS", 4, "PHRASEDET.RETRIEVAL_STAGES.STAGE1_STEPS", [],
        "INPUT.RETRIEVAL.CROP", 32, "DATASETS.TEST", ("builtin_flickr30k_captions_val",), "DATALOADER.NUM_WORKERS", 0,
        "MODEL.RETRIEVAL.EMBED_DIM", 16, "MODEL.RETRIEVAL.BRANCH.HIDDEN_DIM", 16, "MODEL.RETRIEVAL.TEXT_CNN.HEAD_HIDDEN_DIM", 16,
        "MODEL.RETRIEVAL.TEXT_CNN.STAGE_WIDTHS", [8, 16, 16, 32], "MODEL.RETRIEVAL.TEXT_CNN.WORD_DIM", 8,
        "PHRASEDET.TEXT.WORD2VEC_EPOCHS", 1, "PHRASEDET.TEXT.WORD2VEC_DIM", 8, "TEST.RETRIEVAL.SAVE_EMBEDDINGS", False]


def _cfg(out, *opts):
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(os.path.join(ROOT, "configs", "retrieval", "instance_loss.yaml"))
    cfg.merge_from_list(TINY + ["OUTPUT_DIR", str(out)] + list(opts))
    cfg.freeze()
    return cfg


def _backbone(path) -> dict:
    state = torch.load(path, map_location="cpu", weights_only=True)
    state = state.get("model", state)
    return {k.split("backbone.", 1)[1]: v for k, v in state.items() if "backbone." in k}


@pytest.fixture(scope="module")
def cnn(builtin_root, tmp_path_factory):
    """A CNN checkpoint (random, but not the one a model would draw) standing in for ImageNet weights,
    with the running statistics of a trained CNN, far from mean 0 and variance 1 (a load that reset
    them, as Detectron2's FrozenBatchNorm2d does to absent ones, would show)."""
    path = tmp_path_factory.mktemp("cnn") / "cnn.pth"
    torch.manual_seed(123)
    model = build_model(_cfg(path.parent))
    give_trained_statistics(model.image_encoder.backbone)
    torch.save({"model": {f"backbone.{k}": v for k, v in model.image_encoder.backbone.state_dict().items()}}, path)
    return str(path)


def _equal(a: dict, b: dict, keys) -> bool:
    return all(torch.equal(a[k], b[k]) for k in keys)


def test_stage_one_leaves_the_cnn_as_given_and_stage_two_fine_tunes_its_last_stage(cnn, tmp_path):
    model, results, final = run_retrieval_stages(_cfg(tmp_path, "MODEL.RETRIEVAL.BACKBONE_WEIGHTS", cnn))
    given = _backbone(cnn)
    stage1 = _backbone(tmp_path / "stage1_frozen_cnn" / "model_final.pth")
    stage2 = _backbone(final)
    assert set(stage1) == set(given) and _equal(stage1, given, given)  # BatchNorm statistics included
    res4 = [k for k in given if k.startswith("res4.")]
    frozen = [k for k in given if k.startswith(("stem.", "res2.", "res3."))]
    assert res4 and not _equal(stage2, given, res4)  # fine-tuned (FREEZE_AT 3)
    assert _equal(stage2, given, frozen)
    assert "rsum" in results["retrieval"]
    assert final == str(tmp_path / "stage2_finetune" / "model_final.pth")


def test_resume_after_stage_one_continues_in_stage_two_as_an_uninterrupted_run(cnn, tmp_path, caplog):
    cfg = _cfg(tmp_path / "whole", "MODEL.RETRIEVAL.BACKBONE_WEIGHTS", cnn)
    _, uninterrupted, final = run_retrieval_stages(cfg)
    interrupted = _cfg(tmp_path / "interrupted", "MODEL.RETRIEVAL.BACKBONE_WEIGHTS", cnn)
    stage1, stage2 = retrieval_stages(interrupted)
    run_retrieval_stages(interrupted)
    shutil.rmtree(stage2.cfg.OUTPUT_DIR)  # killed before stage II saved anything
    stage1_time = os.path.getmtime(stage1.final_weights)
    with caplog.at_level("INFO", logger="phrasedet.stages"):
        _, resumed, resumed_final = run_retrieval_stages(interrupted, resume=True)
    assert "Stage stage1_frozen_cnn: finished before" in caplog.text
    assert "Stage stage2_finetune: training for 3 iterations" in caplog.text
    assert os.path.getmtime(stage1.final_weights) == stage1_time
    assert resumed["retrieval"] == pytest.approx(uninterrupted["retrieval"])
    a = torch.load(final, map_location="cpu", weights_only=True)["model"]
    b = torch.load(resumed_final, map_location="cpu", weights_only=True)["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_stage_one_on_precomputed_features_gives_stage_two_the_given_cnn(cnn, tmp_path):
    features = tmp_path / "features"
    extractor_cfg = _cfg(tmp_path, "MODEL.RETRIEVAL.BACKBONE_WEIGHTS", cnn)
    extract_image_features(extractor_cfg, build_model(extractor_cfg).eval(), ["builtin_flickr30k_captions_train"], str(features))
    cfg = _cfg(tmp_path / "run", "MODEL.RETRIEVAL.BACKBONE_WEIGHTS", cnn, "PHRASEDET.RETRIEVAL_STAGES.STAGE1_IMAGE_FEATURES_DIR",
               str(features), "MODEL.BACKBONE.FREEZE_AT", 5)
    stage1, _ = retrieval_stages(cfg)
    assert stage1.cfg.MODEL.RETRIEVAL.IMAGE_INPUT == "features"
    _, results, final = run_retrieval_stages(cfg)
    assert not _backbone(stage1.final_weights)  # a features model has no CNN
    given, stage2 = _backbone(cnn), _backbone(final)
    assert _equal(stage2, given, given)  # FREEZE_AT 5: the whole CNN stays as given
    assert "rsum" in results["retrieval"]


def test_bad_stage_configs_are_refused(tmp_path):
    with pytest.raises(ValueError, match="STAGE1_ITERS must be >= 1"):
        retrieval_stages(_cfg(tmp_path, "PHRASEDET.RETRIEVAL_STAGES.STAGE1_ITERS", 0))
    with pytest.raises(ValueError, match="stage I has no loss"):
        retrieval_stages(_cfg(tmp_path, "MODEL.RETRIEVAL.INSTANCE_LOSS.IMAGE_WEIGHT", 0.0,
                              "MODEL.RETRIEVAL.INSTANCE_LOSS.TEXT_WEIGHT", 0.0))
    with pytest.raises(ValueError, match="set that .* and IMAGE_INPUT 'pixels' for stage II"):
        retrieval_stages(_cfg(tmp_path, "PHRASEDET.RETRIEVAL_STAGES.STAGE1_IMAGE_FEATURES_DIR", str(tmp_path)))
