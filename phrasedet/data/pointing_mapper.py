"""Mappers of pointing-game records (``queries`` of text + box per image, docs/DATA.md).

* :class:`PointingDatasetMapper` (DSVE-loc): the whole image resized by
  ``INPUT.POINTING.RESIZE_MODE`` — ``"square"``: ``SIZE`` x ``SIZE`` whatever the aspect ratio
  (the released pointing-game code: 416 x 416), ``"shorter_side"``: the shorter side to ``SIZE``.
  Nothing is cropped, so a point of the resized image maps back to the original one by the two
  scale factors. Output: ``image`` (uint8 [3, h, w], ``INPUT.FORMAT``), ``image_id``, ``dataset``,
  ``height`` / ``width`` (the original size, the frame of boxes and points) and ``queries``. With
  ``MODEL.RETRIEVAL.IMAGE_INPUT "maps"`` the record's precomputed maps (``image_feature``
  [C, h, w], :mod:`.image_features`) replace the image.
* :func:`phrase_detector_pointing_mapper` (``PhraseRCNN``): the phrase-detection test mapper,
  asked about each query's normalized ``phrase``; ``queries`` ride along.
"""
import copy

import numpy as np
import torch
from detectron2.config import configurable
from detectron2.data import detection_utils as utils
from detectron2.data import transforms as T

from .dataset_mapper import PhraseDatasetMapper
from .image_features import stored_image, stored_image_input

__all__ = ["PointingDatasetMapper", "phrase_detector_pointing_mapper", "POINTING_RESIZE_MODES"]

POINTING_RESIZE_MODES = ("square", "shorter_side")


def build_pointing_resize(mode: str, size: int) -> T.Augmentation:
    """The resize of ``INPUT.POINTING`` (see the module docstring)."""
    if mode == "square":
        return T.Resize((size, size))
    if mode == "shorter_side":
        return T.ResizeShortestEdge(size, size * 10)
    raise ValueError(f"INPUT.POINTING.RESIZE_MODE must be one of {POINTING_RESIZE_MODES}, got {mode!r}")


class PointingDatasetMapper:
    """See the module docstring.

    Args:
        resize: Detectron2 augmentation resizing the whole image.
        image_format: ``INPUT.FORMAT``.
        use_maps: read the record's precomputed maps instead of the image.
    """

    @configurable
    def __init__(self, *, resize: T.Augmentation, image_format: str = "BGR", use_maps: bool = False):
        self.resize, self.image_format, self.use_maps = resize, image_format, use_maps

    @classmethod
    def from_config(cls, cfg):
        p = cfg.INPUT.POINTING
        return {"resize": build_pointing_resize(p.RESIZE_MODE, p.SIZE), "image_format": cfg.INPUT.FORMAT,
                "use_maps": stored_image_input(cfg)}

    def _image(self, record: dict) -> dict:
        if self.use_maps:
            return {"image_feature": stored_image(record)}
        image = utils.read_image(record["file_name"], format=self.image_format)
        utils.check_image_size(record, image)
        image = self.resize.get_transform(image).apply_image(image)
        return {"image": torch.as_tensor(np.ascontiguousarray(image.transpose(2, 0, 1)))}

    def __call__(self, record: dict) -> dict:
        if "queries" not in record:
            raise KeyError(f"image {record.get('image_id')!r} of a pointing split has no 'queries'")
        return {**self._image(record), "image_id": record.get("image_id", ""), "dataset": record.get("dataset", ""),
                "height": record["height"], "width": record["width"], "queries": copy.deepcopy(record["queries"])}


def phrase_detector_pointing_mapper(cfg):
    """record with ``queries`` -> a ``PhraseRCNN`` test input asking about every query's ``phrase``."""
    mapper = PhraseDatasetMapper(cfg, is_train=False)

    def call(record: dict) -> dict:
        annotations = [{"phrase": q["phrase"], "bbox": q["bbox"], "bbox_mode": q["bbox_mode"], "category_id": 0}
                       for q in record["queries"]]
        return mapper({**record, "annotations": annotations})

    return call
