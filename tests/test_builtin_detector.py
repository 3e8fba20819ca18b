"""The built-in pretrained detector (configs/pretraining/builtin_detector.yaml), the stand-in for a
COCO detector: it trains on the pretraining split's boxes from the built-in CNN, is trained once
into the cache (phrasedet/engine/pretrained_models.py), and the phrase detectors of
configs/Base-Builtin-Pretrained.yaml start from its backbone, RPN and box head, every tensor of
them, or fail naming the part."""
import functools
import json
import os

import pytest
import torch
from detectron2.config import get_cfg
from detectron2.data import DatasetCatalog, MetadataCatalog
from detectron2.modeling import build_model

from phrasedet.config import add_phrasedet_config
from phrasedet.data.datasets import load_pretraining_detection, register_detection_dataset
from phrasedet.data.synthetic.pretraining import DETECTION_CLASSES
from phrasedet.engine import pretrained_models
from phrasedet.modeling.checkpoint import PhrasedetCheckpointer, PretrainedPartError

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "configs")
DETECTOR = os.path.join(CONFIGS, "pretraining", "builtin_detector.yaml")
PHRASE_DETECTOR = os.path.join(CONFIGS, "Base-Builtin-Pretrained.yaml")
KEPT_CNN = os.path.join(CONFIGS, "..", "results", "builtin_cnn", "backbone.pth")
TINY = ["SOLVER.MAX_ITER", 2, "SOLVER.WARMUP_ITERS", 1, "SOLVER.IMS_PER_BATCH", 2, "DATALOADER.NUM_WORKERS", 0,
        "DATASETS.TRAIN", "('tiny_pretraining_detection_train',)", "DATASETS.TEST", "('tiny_pretraining_detection_val',)",
        "TEST.EVAL_PERIOD", 0]


def _cfg(path, *opts):
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(path)
    cfg.merge_from_list(list(opts))
    return cfg


@pytest.fixture(scope="module")
def tiny_splits():
    """The first 16 training and 4 validation images of the detection view, registered afresh: an
    earlier session in this process (a mutation run's) left Detectron2's COCO evaluator's
    ``json_file`` in the metadata, a file in that session's temporary folder, deleted since."""
    for split, n in (("train", 16), ("val", 4)):
        name = f"tiny_pretraining_detection_{split}"
        if name in DatasetCatalog.list():
            DatasetCatalog.remove(name)
            MetadataCatalog.remove(name)
        register_detection_dataset(name, functools.partial(load_pretraining_detection, split, n),
                                   dict(thing_classes=list(DETECTION_CLASSES)))


@pytest.fixture(scope="module")
def trained(tiny_splits, tmp_path_factory):
    """(cache folder, model_final.pth) of a 2-iteration training, through the train-once cache."""
    cache = str(tmp_path_factory.mktemp("cache"))
    return cache, pretrained_models.ensure_builtin_model("builtin_detector", cache, opts=TINY)


def _saved(path):
    return torch.load(path, map_location="cpu", weights_only=False)["model"]


def test_the_detector_starts_from_every_tensor_of_the_kept_cnn():
    cfg = _cfg(DETECTOR)
    assert cfg.MODEL.WEIGHTS == "phrasedet://builtin_cnn/backbone.pth"
    model = build_model(cfg)
    assert type(model).__name__ == "GeneralizedRCNN" and type(model.roi_heads).__name__ == "StandardROIHeads"
    assert model.roi_heads.box_predictor.cls_score.out_features == 49  # 48 classes and the background
    PhrasedetCheckpointer.from_config(cfg, model).load(cfg.MODEL.WEIGHTS)  # PRETRAINED_PARTS ["backbone"]: whole, or an error
    kept = _saved(KEPT_CNN)
    assert all(torch.equal(v, kept[f"backbone.{k}"]) for k, v in model.backbone.state_dict().items())
    assert model.backbone.output_shape()["res4"].stride == 8 and model.backbone.output_shape()["res4"].channels == 128


def test_a_tiny_training_writes_a_checkpoint_and_box_ap_and_is_trained_once(trained, tiny_splits):
    cache, weights = trained
    assert os.path.dirname(weights) == pretrained_models.builtin_model_dir("builtin_detector", cache, opts=TINY)
    assert os.path.basename(os.path.dirname(weights)).startswith("builtin-detector-v3-")
    saved = _saved(weights)
    assert saved["roi_heads.box_predictor.cls_score.weight"].shape == (49, 256)
    assert saved["roi_heads.box_head.fc1.weight"].shape == (256, 128 * 7 * 7)
    assert saved["proposal_generator.rpn_head.objectness_logits.weight"].shape[0] == 12  # 4 sizes x 3 ratios
    results = json.load(open(os.path.join(os.path.dirname(weights), "results.json")))
    assert results["final_model"] == weights and {"AP", "AP50"} <= set(results["results"]["bbox"])
    stamp = os.path.getmtime(weights)
    assert pretrained_models.ensure_builtin_model("builtin_detector", cache, opts=TINY) == weights
    assert os.path.getmtime(weights) == stamp and [p for p in os.listdir(cache) if ".tmp-" in p] == []


def _phrase_detector(weights, builtin_root, *opts):
    cfg = _cfg(PHRASE_DETECTOR, "MODEL.WEIGHTS", weights, "PHRASEDET.TEXT.WORD2VEC_EPOCHS", 1, *opts)
    return cfg, build_model(cfg)


def test_the_phrase_detector_loads_backbone_rpn_and_box_head_from_it(trained, builtin_root):
    _, weights = trained
    cfg, model = _phrase_detector(weights, builtin_root)
    assert cfg.PHRASEDET.WEIGHTS.PRETRAINED_PARTS == ["backbone", "proposal_generator", "roi_heads.region_features"]
    assert cfg.MODEL.PHRASE_ROI_HEADS.REGION_HEAD == "fc" and cfg.MODEL.BACKBONE.NAME == "build_builtin_resnet_backbone"
    PhrasedetCheckpointer.from_config(cfg, model).load(weights)
    saved, ours = _saved(weights), model.state_dict()
    theirs = {k.replace("roi_heads.box_head.", "roi_heads.region_features.head."): v for k, v in saved.items()}
    for part in cfg.PHRASEDET.WEIGHTS.PRETRAINED_PARTS:
        keys = [k for k in ours if k.startswith(part + ".") and not k.endswith("num_batches_tracked")]
        assert keys and all(torch.equal(ours[k], theirs[k]) for k in keys), part


@pytest.mark.parametrize("left_out,part", [("roi_heads.box_head.", "roi_heads.region_features"),
                                           ("proposal_generator.", "proposal_generator"), ("backbone.res3.", "backbone")])
def test_a_file_without_a_part_is_an_error_naming_it(trained, builtin_root, tmp_path, left_out, part):
    _, weights = trained
    path = str(tmp_path / "partial.pth")
    torch.save({"model": {k: v for k, v in _saved(weights).items() if not k.startswith(left_out)}}, path)
    cfg, model = _phrase_detector(path, builtin_root)
    with pytest.raises(PretrainedPartError, match=rf"{path}: {part} is listed in PHRASEDET.WEIGHTS.PRETRAINED_PARTS but"):
        PhrasedetCheckpointer.from_config(cfg, model).load(path)
