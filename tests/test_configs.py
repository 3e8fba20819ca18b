"""Every config in configs/ parses with phrasedet's keys, and none reaches into detectron2's tree."""
import glob
import os

import pytest
import yaml
from detectron2.config import get_cfg

from phrasedet.config import add_phrasedet_config

CONFIG_DIR = os.path.join(os.path.dirname(__file__), "..", "configs")
CONFIGS = sorted(glob.glob(os.path.join(CONFIG_DIR, "*.yaml")))


def test_there_are_configs():
    assert len(CONFIGS) >= 3


@pytest.mark.parametrize("path", CONFIGS, ids=os.path.basename)
def test_config_parses(path):
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(path)
    assert cfg.INPUT.RANDOM_FLIP == "none"
    with open(path) as f:
        base = (yaml.safe_load(f) or {}).get("_BASE_")
    if base is not None:  # self-contained: bases are siblings
        assert os.path.isfile(os.path.join(CONFIG_DIR, base)), base


def test_every_added_key_has_a_comment():
    files = glob.glob(os.path.join(os.path.dirname(__file__), "..", "phrasedet", "config", "*.py"))
    assert len(files) >= 4
    for path in files:
        src = open(path).read().splitlines()
        for i, line in enumerate(src):
            stripped = line.strip()
            if stripped.startswith("_C.") and " = " in stripped and "CN()" not in stripped:
                assert src[i - 1].strip().startswith("#"), f"{os.path.basename(path)}:{i + 1} {stripped} has no comment"


@pytest.mark.parametrize("path", [p for p in CONFIGS if not os.path.basename(p).startswith("Base-")] + [os.path.join(CONFIG_DIR, "Base-Builtin.yaml")], ids=os.path.basename)
def test_config_builds_a_model(path, builtin_root):
    import torch
    from detectron2.modeling import build_model

    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(path)
    # word vectors need training captions: configs for real data borrow the built-in ones here
    cfg.merge_from_list(["MODEL.DEVICE", "cpu", "PHRASEDET.TEXT.WORD2VEC_DATASET", "builtin_flickr30k_entities_train",
                         "PHRASEDET.TEXT.WORD2VEC_EPOCHS", 1])
    model = build_model(cfg)
    assert type(model).__name__ == cfg.MODEL.META_ARCHITECTURE
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) > 0
    assert isinstance(model.phrase_bank(["red circle"]), torch.Tensor)
