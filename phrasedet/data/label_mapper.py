"""``ImageLabelsMapper``: records of an image-labels split (the built-in pretraining split,
:mod:`phrasedet.data.synthetic.pretraining`) -> inputs of ``MultiLabelImageClassifier``.

The image (drawn from the record's ``render_key``) is resized to ``INPUT.PRETRAINING.SIZE``
square, as the retrieval and pointing mappers resize the benchmark's images
(``RESIZE_MODE "square"``), and flipped left-right at random in training when
``INPUT.PRETRAINING.RANDOM_FLIP`` (its labels say nothing of positions). Output: ``image`` (uint8
[3, S, S], ``INPUT.FORMAT``), ``image_id`` and ``labels`` (float32 [L] of
``PHRASEDET.PRETRAINING.LABEL_GROUPS``).
"""
import numpy as np
import torch
from detectron2.config import configurable
from detectron2.data import detection_utils as utils
from PIL import Image

from .synthetic.pretraining import render_pretraining_image

__all__ = ["ImageLabelsMapper"]


class ImageLabelsMapper:
    """See the module docstring.

    Args:
        is_train: flip at random when ``random_flip``.
        size: S.
        groups: the label groups of ``labels``.
        image_format: ``INPUT.FORMAT``.
        random_flip: flip left-right with probability 1/2 in training.
    """

    @configurable
    def __init__(self, is_train: bool, *, size: int, groups, image_format: str = "BGR", random_flip: bool = False):
        self.is_train, self.size, self.groups = is_train, int(size), tuple(groups)
        self.image_format, self.random_flip = image_format, random_flip

    @classmethod
    def from_config(cls, cfg, is_train: bool = True):
        p = cfg.INPUT.PRETRAINING
        return {"is_train": is_train, "size": p.SIZE, "groups": cfg.PHRASEDET.PRETRAINING.LABEL_GROUPS,
                "image_format": cfg.INPUT.FORMAT, "random_flip": p.RANDOM_FLIP}

    def __call__(self, record: dict) -> dict:
        if "render_key" not in record:
            raise KeyError(f"image {record.get('image_id')!r} of an image-labels split has no 'render_key'")
        image, labels, _ = render_pretraining_image(record, self.groups)
        image = utils.convert_PIL_to_numpy(image.resize((self.size, self.size), Image.BILINEAR), self.image_format)
        if self.is_train and self.random_flip and np.random.rand() < 0.5:
            image = image[:, ::-1]
        return {"image": torch.as_tensor(np.ascontiguousarray(image.transpose(2, 0, 1))), "image_id": record["image_id"],
                "labels": torch.as_tensor(labels, dtype=torch.float32)}
