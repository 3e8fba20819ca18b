"""The pointing-game mappers: DSVE-loc's whole-image resize, and PhraseRCNN's phrases from the queries."""
import pytest
from detectron2.config import get_cfg
from detectron2.data import DatasetCatalog

from phrasedet.config import add_phrasedet_config
from phrasedet.data import PointingDatasetMapper, phrase_detector_pointing_mapper


def _cfg(*opts):
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_list(list(opts))
    return cfg


@pytest.fixture(scope="module")
def record(builtin_root):
    return DatasetCatalog.get("builtin_flickr30k_pointing_test")[0]


@pytest.mark.parametrize("mode, size, shape", [("square", 64, (3, 64, 64)), ("shorter_side", 48, (3, 48, 64))])
def test_the_whole_image_is_resized_and_queries_keep_original_pixels(record, mode, size, shape):
    out = PointingDatasetMapper(_cfg("INPUT.POINTING.RESIZE_MODE", mode, "INPUT.POINTING.SIZE", size))(record)
    assert tuple(out["image"].shape) == shape  # the built-in images are 128 x 96
    assert (out["height"], out["width"]) == (96, 128)
    assert out["queries"] == record["queries"] and out["queries"] is not record["queries"]


def test_errors_name_the_setting_and_the_image(record):
    with pytest.raises(ValueError, match="INPUT.POINTING.RESIZE_MODE must be one of"):
        PointingDatasetMapper(_cfg("INPUT.POINTING.RESIZE_MODE", "crop"))
    bad = {k: v for k, v in record.items() if k != "queries"}
    with pytest.raises(KeyError, match=f"image '{record['image_id']}' of a pointing split has no 'queries'"):
        PointingDatasetMapper(_cfg())(bad)


def test_a_phrase_detector_is_asked_about_each_query_s_phrase(record):
    cfg = _cfg("INPUT.MIN_SIZE_TEST", 96, "INPUT.MAX_SIZE_TEST", 128)
    out = phrase_detector_pointing_mapper(cfg)(record)
    phrases = list(dict.fromkeys(q["phrase"] for q in record["queries"]))
    assert out["phrases"] == phrases and out["queries"] == record["queries"]
    assert len(out["instances"]) == len(record["queries"])
