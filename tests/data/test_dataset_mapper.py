import os

import numpy as np
import pytest
import torch
from detectron2.config import get_cfg
from detectron2.data import transforms as T

from phrasedet.config import add_phrasedet_config
from phrasedet.data import PhraseDatasetMapper, PositivePhraseAugmenter
from phrasedet.data.datasets import load_flickr30k_entities
from phrasedet.text.vocab import PhraseVocabulary

from .flickr_fixture import write_flickr_root

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "configs")


@pytest.fixture
def record(tmp_path):
    ann_root, image_root = write_flickr_root(str(tmp_path))
    return load_flickr30k_entities(ann_root, image_root, os.path.join(ann_root, "train.txt"))[0]


def _mapper(is_train, **kw):
    return PhraseDatasetMapper(is_train, augmentations=[T.ResizeShortestEdge(250, 1000)], image_format="RGB", **kw)


def test_test_mode_keeps_every_phrase_and_scales_boxes(record):
    out = _mapper(False)(record)
    assert out["image"].shape == (3, 375, 250)  # 333x500 resized to shortest edge 250 (x 0.75075)
    assert out["phrases"] == [
        "two young guys", "shaggy hair", "hands", "two young white males", "many bushes",
        "two men", "green shirts", "man", "blue shirt", "two friends",
    ]
    inst = out["instances"]
    assert inst.gt_phrase_ids.tolist() == list(range(10))
    assert inst.gt_classes.tolist() == [0] * 10
    scale = 250 / 333
    np.testing.assert_allclose(inst.gt_boxes.tensor[0].numpy(), np.array([20, 100, 219, 400]) * ([scale, 375 / 500] * 2), rtol=1e-5)
    assert "annotations" not in out and "unboxed_phrases" not in out


def test_training_samples_phrases_but_keeps_every_box_for_the_rpn(record):
    np.random.seed(0)
    out = _mapper(True, max_phrases=3)(record)
    assert len(out["phrases"]) == 3
    ids = out["instances"].gt_phrase_ids
    assert len(ids) == 10 and sorted(ids[ids >= 0].tolist()) == [0, 1, 2]
    # a sampled phrase's instance carries the box of that phrase
    test_out = _mapper(False)(record)
    for i, p in enumerate(out["phrases"]):
        j = test_out["phrases"].index(p)
        assert torch.equal(out["instances"].gt_boxes.tensor[ids == i], test_out["instances"].gt_boxes.tensor[j:j + 1])


class FakeLexicon:
    def __init__(self, table):
        self.table = table

    def alternatives(self, word):
        return self.table.get(word, [])


def test_ppa_candidates_flickr_and_referit():
    lex = FakeLexicon({"shirt": ["top", "garment"], "left": ["leftover"], "dog": ["canine"]})
    known = {"blue top", "blue", "shirt", "garment", "canine left", "dog leftover", "dog"}
    flickr = PositivePhraseAugmenter(known, lex, "flickr")
    assert flickr("blue shirt") == ["blue", "blue top", "shirt"]  # replacement + sub-phrases, only known ones
    referit = PositivePhraseAugmenter(known, lex, "referit")
    assert referit("dog left") == ["canine left"]  # 'left' fixed, no sub-phrase 'dog'


def test_ppa_adds_copies_of_the_gt_boxes(record):
    np.random.seed(0)
    augmenter = PositivePhraseAugmenter({"blue top"}, FakeLexicon({"shirt": ["top"]}), "flickr")
    mapper = _mapper(True, max_phrases=20, augmenter=augmenter)
    out = mapper(record)
    assert out["phrases"][-1] == "blue top" and len(out["phrases"]) == 11
    inst = out["instances"]
    assert len(inst) == 11 and inst.gt_phrase_ids[-1].item() == 10
    assert torch.equal(inst.gt_boxes.tensor[-1], inst.gt_boxes.tensor[out["phrases"].index("blue shirt")])


def test_ifs_mapper_needs_vocabulary_and_uses_counts(record):
    with pytest.raises(ValueError, match="needs the training vocabulary"):
        _mapper(True, sampling="ifs")
    vocab = PhraseVocabulary({"hands": 1, "man": 10000, "two men": 10000, "shaggy hair": 10000})
    np.random.seed(1)

    def picks(weighting):
        mapper = _mapper(True, max_phrases=1, sampling="ifs", ifs_weighting=weighting, vocabulary=vocab)
        return [mapper.select_phrases(["man", "two men", "hands", "shaggy hair"])[0][0] for _ in range(300)]

    # inverse: P(hands) = 1 / (1 + 3/10000) = 0.9997
    assert picks("inverse").count("hands") >= 297
    # 1 - share: P(hands) = (30000/30001) / (30000/30001 + 3 * 20001/30001) = 0.3333, uniform would be 0.25
    assert 80 < picks("one_minus_share").count("hands") < 125


def test_builtin_config_has_no_flip_and_mapper_builds_from_it():
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(os.path.join(CONFIGS, "Base-Builtin.yaml"))
    mapper = PhraseDatasetMapper(cfg, is_train=True)
    assert not any(isinstance(a, T.RandomFlip) for a in mapper.augmentations.augs)
    assert mapper.max_phrases == 5
