"""Every config in configs/ (and its family folders) parses with phrasedet's keys, inherits only
from configs of its own tree, and builds its model."""
import glob
import os

import pytest
import yaml
from detectron2.config import get_cfg

from phrasedet.config import add_phrasedet_config

CONFIG_DIR = os.path.join(os.path.dirname(__file__), "..", "configs")
CONFIGS = sorted(glob.glob(os.path.join(CONFIG_DIR, "**", "*.yaml"), recursive=True))
FAMILIES = {"": "PhraseRCNN", "retrieval": "ImageTextEmbedding", "pointing": "DSVELoc",
            "pretraining": "MultiLabelImageClassifier"}
# Configs whose meta-architecture is not their family's: the built-in stand-in for a COCO detector
# is Detectron2's own Faster R-CNN.
ARCHITECTURES = {"pretraining/builtin_detector.yaml": "GeneralizedRCNN"}
# A family's configs inherit from its own folder, or from the bases named here: the pointing
# family trains on captions with the retrieval family's budget, written once in its base.
SHARED_BASES = {"pointing": {"../retrieval/Base-Retrieval.yaml"}}


def _name(path):
    return os.path.relpath(path, CONFIG_DIR)


def _family(path):
    return os.path.dirname(_name(path))


def _load(path, opts=()):
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(path)
    cfg.merge_from_list(list(opts))
    return cfg


def test_there_are_configs_of_every_family():
    assert {_family(p) for p in CONFIGS} == set(FAMILIES)
    assert len(CONFIGS) >= 10


@pytest.mark.parametrize("path", CONFIGS, ids=_name)
def test_config_parses_and_stays_in_its_family(path):
    cfg = _load(path)
    if _family(path) == "pretraining":  # its own key (labels say nothing of positions); its mapper reads no other
        assert cfg.INPUT.PRETRAINING.RANDOM_FLIP is False
    if _family(path) != "pretraining" or _name(path) in ARCHITECTURES:  # captions and phrases say "on the left"
        assert cfg.INPUT.RANDOM_FLIP == "none"
    assert cfg.MODEL.META_ARCHITECTURE == ARCHITECTURES.get(_name(path), FAMILIES[_family(path)])
    with open(path) as f:
        base = (yaml.safe_load(f) or {}).get("_BASE_")
    if base is not None:  # a base is a config of the same folder, or a shared base of the family
        assert "/" not in base or base in SHARED_BASES.get(_family(path), ()), base
        assert os.path.isfile(os.path.join(os.path.dirname(path), base)), base


def test_every_added_key_has_a_comment():
    files = glob.glob(os.path.join(os.path.dirname(__file__), "..", "phrasedet", "config", "*.py"))
    assert len(files) >= 4
    for path in files:
        src = open(path).read().splitlines()
        for i, line in enumerate(src):
            stripped = line.strip()
            if stripped.startswith("_C.") and " = " in stripped and "CN()" not in stripped:
                assert src[i - 1].strip().startswith("#"), f"{os.path.basename(path)}:{i + 1} {stripped} has no comment"


# Real-data configs are built here on the built-in data: their datasets and weights are not on this machine.
BUILTIN = {
    "": ["PHRASEDET.TEXT.WORD2VEC_DATASET", "builtin_flickr30k_entities_train"],
    "retrieval": ["DATASETS.TRAIN", "('builtin_flickr30k_captions_train',)", "DATASETS.TEST", "('builtin_flickr30k_captions_test',)",
                  "MODEL.RETRIEVAL.IMAGE_INPUT", "pixels", "MODEL.WEIGHTS", "", "PHRASEDET.TEXT.FISHER_COMPONENTS", 2],
    "pointing": ["DATASETS.TRAIN", "('builtin_flickr30k_captions_train',)", "DATASETS.TEST", "('builtin_flickr30k_pointing_test',)",
                 "MODEL.WEIGHTS", "", "PHRASEDET.TEXT.WORD_VECTORS", "word2vec"],
    "pretraining": [],
}


@pytest.mark.parametrize("path", [p for p in CONFIGS if not os.path.basename(p).startswith("Base-")]
                         + [os.path.join(CONFIG_DIR, "Base-Builtin.yaml"), os.path.join(CONFIG_DIR, "Base-Builtin-Pretrained.yaml"),
                            os.path.join(CONFIG_DIR, "retrieval", "Base-Retrieval.yaml"),
                            os.path.join(CONFIG_DIR, "pointing", "Base-DSVE-Loc.yaml")],
                         ids=_name)
def test_config_builds_a_model(path, builtin_root):
    import torch
    from detectron2.modeling import build_model

    cfg = _load(path, ["MODEL.DEVICE", "cpu", "PHRASEDET.TEXT.WORD2VEC_EPOCHS", 1] + BUILTIN[_family(path)])
    model = build_model(cfg)
    assert type(model).__name__ == cfg.MODEL.META_ARCHITECTURE
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) > 0
    if hasattr(model, "phrase_bank"):
        assert isinstance(model.phrase_bank(["red circle"]), torch.Tensor)
    elif hasattr(model, "head"):  # the pretraining classifier: one score per label
        from detectron2.data import DatasetCatalog

        from phrasedet.data import ImageLabelsMapper

        x = ImageLabelsMapper(cfg, is_train=False)(DatasetCatalog.get(cfg.DATASETS.TEST[0])[0])
        assert model.eval()([x])[0]["scores"].shape == (cfg.MODEL.CLASSIFIER.NUM_LABELS,)
    elif hasattr(model, "roi_heads"):  # the pretraining detector: boxes of its classes
        from detectron2.data import DatasetCatalog

        from phrasedet.data import DetectionDatasetMapper

        x = DetectionDatasetMapper(cfg, is_train=False)(DatasetCatalog.get(cfg.DATASETS.TEST[0])[0])
        out = model.eval()([x])[0]["instances"]
        assert out.image_size == (x["height"], x["width"]) and out.pred_classes.lt(cfg.MODEL.ROI_HEADS.NUM_CLASSES).all()
    else:
        assert model.eval().embed_captions(["a red circle"]).shape == (1, cfg.MODEL.RETRIEVAL.EMBED_DIM)
