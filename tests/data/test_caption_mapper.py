import numpy as np
import pytest
import torch
from detectron2.config import get_cfg
from PIL import Image

from phrasedet.config import add_phrasedet_config
from phrasedet.data import CaptionDatasetMapper, attach_image_features, write_image_features
from phrasedet.data.caption_mapper import CenterCrop, build_caption_augmentations, sample_captions
from phrasedet.data.datasets import BadAnnotationError

CAPTIONS = ["c0", "c1", "c2", "c3", "c4"]


def _cfg(**input_retrieval):
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    for k, v in input_retrieval.items():
        cfg.INPUT.RETRIEVAL[k] = v
    return cfg


def _record(tmp_path, w=12, h=8):
    # column x has value 10 * x in every channel: crops are recognizable
    pixels = np.repeat((np.arange(w, dtype=np.uint8) * 10)[None, :, None], h, axis=0).repeat(3, axis=2)
    path = tmp_path / "im.png"
    Image.fromarray(pixels).save(path)
    return {"file_name": str(path), "image_id": "im", "dataset": "toy", "captions": list(CAPTIONS), "height": h, "width": w}


def test_sample_captions_draws_distinct_captions_in_record_order():
    rng = np.random.RandomState(0)
    seen = set()
    for _ in range(50):
        two = sample_captions(CAPTIONS, 2, rng)
        assert len(set(two)) == 2 and two == sorted(two, key=CAPTIONS.index)
        seen.update(two)
    assert seen == set(CAPTIONS)
    assert sample_captions(CAPTIONS, 0) == CAPTIONS
    assert sample_captions(CAPTIONS[:1], 2) == CAPTIONS[:1]


def test_train_samples_k_captions_test_gives_all(tmp_path):
    record = _record(tmp_path)
    cfg = _cfg(RESIZE_MODE="square", CROP=4, CAPTIONS_PER_IMAGE=2)
    train = CaptionDatasetMapper(cfg, is_train=True)(record)
    test = CaptionDatasetMapper(cfg, is_train=False)(record)
    assert len(train["captions"]) == 2 and set(train["captions"]) <= set(CAPTIONS)
    assert test["captions"] == CAPTIONS
    assert test["image"].shape == (3, 4, 4) and test["image"].dtype == torch.uint8
    assert (test["image_id"], test["dataset"], test["height"], test["width"]) == ("im", "toy", 8, 12)
    assert record["captions"] == CAPTIONS  # the record is not changed


def test_shorter_side_crop_is_centred_at_test(tmp_path):
    record = _record(tmp_path, w=12, h=8)
    cfg = _cfg(RESIZE_MODE="shorter_side_crop", RESIZE=8, CROP=4)
    image = CaptionDatasetMapper(cfg, is_train=False)(record)["image"]
    # no resize (shorter side already 8): columns 4..7 of 0..11 are the centre
    assert image[0, 0].tolist() == [40, 50, 60, 70]
    with pytest.raises(ValueError, match="RESIZE .* must be at least CROP"):
        build_caption_augmentations(_cfg(RESIZE_MODE="shorter_side_crop", RESIZE=4, CROP=8), True)
    with pytest.raises(ValueError, match="RESIZE_MODE must be one of"):
        build_caption_augmentations(_cfg(RESIZE_MODE="stretch"), True)
    with pytest.raises(ValueError, match="cannot crop 9x9"):
        CenterCrop(9).get_transform(np.zeros((8, 12, 3)))


def test_features_instead_of_pixels(tmp_path):
    records = [{"image_id": "a", "captions": ["x"]}, {"image_id": "b", "captions": ["y", "z"]}]
    features = np.arange(6, dtype=np.float32).reshape(2, 3)
    write_image_features(str(tmp_path), "toy_split", features, ["a", "b"])
    attached = attach_image_features(records, "toy_split", str(tmp_path))
    assert [(r["feature_row"], r["image_id"]) for r in attached] == [(0, "a"), (1, "b")]
    assert "feature_file" not in records[0]  # copies
    cfg = _cfg()
    cfg.MODEL.RETRIEVAL.IMAGE_INPUT = "features"
    out = CaptionDatasetMapper(cfg, is_train=False)(attached[1])
    assert out["image_feature"].tolist() == [3.0, 4.0, 5.0] and "image" not in out
    with pytest.raises(KeyError, match="no precomputed feature"):
        CaptionDatasetMapper(cfg, is_train=False)(records[0])


def test_feature_files_that_do_not_fit_the_split(tmp_path):
    records = [{"image_id": "a"}, {"image_id": "b"}]
    write_image_features(str(tmp_path), "s", np.zeros((3, 2)), ["a", "b", "c"])
    with pytest.raises(BadAnnotationError, match=r"s\.npy: 3 rows for the 2 images of s"):
        attach_image_features(records, "s", str(tmp_path))
    write_image_features(str(tmp_path), "s", np.zeros((2, 2)), ["a", "x"])
    with pytest.raises(BadAnnotationError, match=r"s\.txt:2: image id 'x', but row 1 of the split is image 'b'"):
        attach_image_features(records, "s", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="extract_image_features"):
        attach_image_features(records, "missing", str(tmp_path))
    with pytest.raises(ValueError, match="IMAGE_FEATURES_DIR"):
        attach_image_features(records, "s", "")
