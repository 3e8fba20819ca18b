"""``CaptionDatasetMapper``: a caption-dataset record -> the input of ``ImageTextEmbedding``.

Each call yields one image with captions: in training ``INPUT.RETRIEVAL.CAPTIONS_PER_IMAGE`` of
them, drawn afresh each time the image is loaded (1: VSE++; 2: paper 000's neighbourhood
sampling; 0: all), at test every caption in record order. The image is either pixels or, with
``MODEL.RETRIEVAL.IMAGE_INPUT "features"``, its precomputed feature row (records carry
``feature_file`` / ``feature_row``, see :mod:`phrasedet.data.image_features`).

Pixels (``INPUT.RETRIEVAL.RESIZE_MODE``):

* ``"shorter_side_crop"`` (VSE++): the shorter side resized to ``RESIZE``, then a ``CROP`` x
  ``CROP`` crop, random in training and centred at test (VSE++'s code uses RandomResizedCrop and
  a horizontal flip in training; captions say "left" and "right", so no flip unless
  ``INPUT.RANDOM_FLIP`` asks for one);
* ``"square"``: the whole image resized to ``CROP`` x ``CROP`` (nothing cut off; the built-in
  dataset's small scenes have objects at the borders).

Output dict: ``image`` (uint8 tensor [3, CROP, CROP], ``INPUT.FORMAT`` channel order) or
``image_feature`` (float32 [F]), ``image_id``, ``dataset``, ``captions`` (list of str),
``height`` / ``width`` when the record has them.
"""
import copy

import numpy as np
import torch
from detectron2.config import configurable
from detectron2.data import detection_utils as utils
from detectron2.data import transforms as T
from fvcore.transforms.transform import CropTransform

from .image_features import stored_image, stored_image_input

__all__ = ["CaptionDatasetMapper", "CenterCrop", "RESIZE_MODES"]

RESIZE_MODES = ("shorter_side_crop", "square")


class CenterCrop(T.Augmentation):
    """The centred ``size`` x ``size`` crop (the image must be at least that large)."""

    def __init__(self, size: int):
        super().__init__()
        self.size = int(size)

    def get_transform(self, image):
        h, w = image.shape[:2]
        if h < self.size or w < self.size:
            raise ValueError(f"cannot crop {self.size}x{self.size} from a {w}x{h} image")
        return CropTransform((w - self.size) // 2, (h - self.size) // 2, self.size, self.size)


def build_caption_augmentations(cfg, is_train: bool) -> list:
    """The resize/crop (and optional flip) of ``INPUT.RETRIEVAL`` (see the module docstring)."""
    r = cfg.INPUT.RETRIEVAL
    if r.RESIZE_MODE == "square":
        augs = [T.Resize((r.CROP, r.CROP))]
    elif r.RESIZE_MODE == "shorter_side_crop":
        if r.RESIZE < r.CROP:
            raise ValueError(f"INPUT.RETRIEVAL.RESIZE ({r.RESIZE}) must be at least CROP ({r.CROP})")
        crop = T.RandomCrop("absolute", (r.CROP, r.CROP)) if is_train else CenterCrop(r.CROP)
        augs = [T.ResizeShortestEdge(r.RESIZE, r.RESIZE * 10), crop]
    else:
        raise ValueError(f"INPUT.RETRIEVAL.RESIZE_MODE must be one of {RESIZE_MODES}, got {r.RESIZE_MODE!r}")
    if is_train and cfg.INPUT.RANDOM_FLIP != "none":
        augs.append(T.RandomFlip(horizontal=cfg.INPUT.RANDOM_FLIP == "horizontal", vertical=cfg.INPUT.RANDOM_FLIP == "vertical"))
    return augs


def sample_captions(captions: list, k: int, rng=np.random) -> list:
    """``k`` distinct captions drawn uniformly (in their record order); all of them when ``k`` is
    0 or there are no more than ``k``."""
    if k <= 0 or len(captions) <= k:
        return list(captions)
    chosen = np.sort(rng.choice(len(captions), size=k, replace=False))
    return [captions[i] for i in chosen]


class CaptionDatasetMapper:
    """See the module docstring.

    Args:
        is_train: training (sampled captions, random crop) or test (all captions, centre crop).
        augmentations: Detectron2 augmentations of the pixels.
        image_format: ``INPUT.FORMAT``.
        captions_per_image: captions drawn per training image (0: all).
        use_features: read ``feature_file[feature_row]`` instead of the image.
    """

    @configurable
    def __init__(self, is_train: bool, *, augmentations, image_format: str = "BGR", captions_per_image: int = 1,
                 use_features: bool = False):
        if captions_per_image < 0:
            raise ValueError(f"INPUT.RETRIEVAL.CAPTIONS_PER_IMAGE must be >= 0, got {captions_per_image}")
        self.is_train = is_train
        self.augmentations = T.AugmentationList(augmentations)
        self.image_format = image_format
        self.captions_per_image = captions_per_image
        self.use_features = use_features

    @classmethod
    def from_config(cls, cfg, is_train: bool = True):
        return {
            "is_train": is_train,
            "augmentations": [] if stored_image_input(cfg) else build_caption_augmentations(cfg, is_train),
            "image_format": cfg.INPUT.FORMAT,
            "captions_per_image": cfg.INPUT.RETRIEVAL.CAPTIONS_PER_IMAGE,
            "use_features": stored_image_input(cfg),
        }

    def _image(self, record) -> dict:
        if self.use_features:
            return {"image_feature": stored_image(record)}
        image = utils.read_image(record["file_name"], format=self.image_format)
        utils.check_image_size(record, image)
        aug = T.AugInput(image)
        self.augmentations(aug)
        return {"image": torch.as_tensor(np.ascontiguousarray(aug.image.transpose(2, 0, 1)))}

    def __call__(self, dataset_dict: dict) -> dict:
        record = copy.copy(dataset_dict)
        k = self.captions_per_image if self.is_train else 0
        out = {"image_id": record["image_id"], "dataset": record.get("dataset", ""),
               "captions": sample_captions(record.get("captions", []), k), **self._image(record)}
        for key in ("height", "width"):
            if key in record:
                out[key] = record[key]
        return out
