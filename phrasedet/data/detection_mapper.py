"""``DetectionDatasetMapper``: Detectron2's ``DatasetMapper`` for object-detection splits
(``evaluator_type="coco"``), whose images may be drawn rather than read.

A record with a ``render_key`` (the built-in pretraining split's detection view,
:mod:`phrasedet.data.datasets.pretraining_detection`) has its image drawn from it, as
``ImageLabelsMapper`` draws it; any other record is read from ``file_name`` by Detectron2's own
``DatasetMapper``. Either way the config's augmentations (``INPUT.MIN_SIZE_*``,
``INPUT.MAX_SIZE_*``, ``INPUT.RANDOM_FLIP``: the built-in configs resize the shortest edge to 128,
the longest to at most 160, as the phrase detector's inputs) apply to the image and, through
``DatasetMapper``'s own annotation transform, to the boxes: output ``image`` (uint8 [3, H, W],
``INPUT.FORMAT``) and, in training, ``instances`` (``gt_boxes``, ``gt_classes``).

A drawn image's objects must be the record's annotations (boxes and classes, in order): records
whose boxes were computed by an older generator (a stale cache) are an error, not a silent
mislabelling.
"""
import copy

import numpy as np
import torch
from detectron2.data import DatasetMapper
from detectron2.data import detection_utils as utils
from detectron2.data import transforms as T

from .datasets.pretraining_detection import detection_annotations
from .synthetic.pretraining import draw_pretraining_image

__all__ = ["DetectionDatasetMapper"]


def _check_drawn_objects(record: dict, truth: dict) -> None:
    drawn = [(a["bbox"], a["category_id"]) for a in detection_annotations(truth)]
    listed = [(list(map(float, a["bbox"])), a["category_id"]) for a in record.get("annotations", ())]
    if drawn != listed:
        raise ValueError(f"image {record.get('image_id')!r}: its record's annotations {listed} are not the objects its "
                         f"render_key draws {drawn} (boxes computed by another generator version? remove the cached "
                         "builtin-pretraining-boxes-* folders of $PHRASEDET_CACHE)")


class DetectionDatasetMapper(DatasetMapper):
    """See the module docstring. Arguments and ``from_config`` are ``DatasetMapper``'s."""

    def __call__(self, dataset_dict):
        if "render_key" not in dataset_dict:
            return super().__call__(dataset_dict)
        d = copy.deepcopy(dataset_dict)  # modified below
        image, truth = draw_pretraining_image(d)
        _check_drawn_objects(d, truth)
        image = utils.convert_PIL_to_numpy(image, self.image_format)
        utils.check_image_size(d, image)
        aug_input = T.AugInput(image)
        transforms = self.augmentations(aug_input)
        image = aug_input.image
        d["image"] = torch.as_tensor(np.ascontiguousarray(image.transpose(2, 0, 1)))
        if not self.is_train:
            d.pop("annotations", None)
            return d
        self._transform_annotations(d, transforms, image.shape[:2])
        return d
