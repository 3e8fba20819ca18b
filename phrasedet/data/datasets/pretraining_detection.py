"""The built-in pretraining split as a detection dataset (``builtin_pretraining_detection_{train,val}``):
the images of ``builtin_pretraining_{train,val}`` (:mod:`phrasedet.data.synthetic.pretraining`) with a
box and a class for every object, the stand-in for COCO on which the built-in pretrained detector
trains (``configs/pretraining/builtin_detector.yaml``).

A record is a Detectron2 standard dataset dict: ``image_id`` and ``render_key`` (those of the
pretraining split's record: the same image), ``file_name`` (the image id: no file is written, the
image is drawn from ``render_key`` when read; Detectron2's COCO conversion wants the key),
``height``, ``width`` and ``annotations``, one per object: ``bbox`` (XYXY_ABS, the drawn extent,
Detectron2's continuous coordinates), ``bbox_mode`` and ``category_id``, the index of the object's
(colour, shape) in :data:`~phrasedet.data.synthetic.scene.ALL_COMBOS` (48 classes,
:data:`~phrasedet.data.synthetic.pretraining.DETECTION_CLASSES`).

The boxes come from :func:`~phrasedet.data.synthetic.pretraining.pretraining_truth` (the scene
planned and its masks drawn, no pixels: 0.5 ms an image, 50 s for the 100,000 training images), so
they are computed once per split and kept in ``$PHRASEDET_CACHE`` (``boxes.npz``: a few MB, read in
a second), made whole under a lock (:func:`phrasedet.cache.build_once`).
"""
import os
from typing import List, Optional

import numpy as np
from detectron2.structures import BoxMode

from phrasedet.cache import build_once, default_cache_dir

__all__ = ["load_pretraining_detection", "pretraining_boxes_dir", "detection_annotations"]

BOXES_FILE = "boxes.npz"


def _annotation(box, category: int) -> dict:
    return {"bbox": [float(v) for v in box], "bbox_mode": BoxMode.XYXY_ABS, "category_id": int(category)}


def detection_annotations(truth: dict) -> List[dict]:
    """The Detectron2 annotations of a scene record: one per object, in order."""
    from phrasedet.data.synthetic.scene import ALL_COMBOS

    return [_annotation(o["box"], ALL_COMBOS.index((o["colour"], o["shape"]))) for o in truth["objects"]]


def pretraining_boxes_dir(split: str, num_images: int, seed: int = 0, cache_dir: Optional[str] = None) -> str:
    """``<cache>/builtin-pretraining-boxes-v<GENERATOR_VERSION>-seed<seed>-<split>-n<num_images>``."""
    from phrasedet.data.synthetic import GENERATOR_VERSION

    name = f"builtin-pretraining-boxes-v{GENERATOR_VERSION}-seed{int(seed)}-{split}-n{int(num_images)}"
    return os.path.join(default_cache_dir(cache_dir or ""), name)


def _write_boxes(folder: str, records: List[dict]) -> None:
    """``boxes.npz``: ``sizes`` [N, 2] (width, height) and ``objects`` [M, 6] (image index,
    category, x1, y1, x2, y2: integers, as every drawn box is)."""
    from phrasedet.data.synthetic.pretraining import pretraining_truth

    sizes, objects = np.zeros((len(records), 2), np.int32), []
    for i, record in enumerate(records):
        truth = pretraining_truth(record)
        sizes[i] = truth["width"], truth["height"]
        objects += [[i, a["category_id"], *a["bbox"]] for a in detection_annotations(truth)]
    np.savez(os.path.join(folder, BOXES_FILE), sizes=sizes, objects=np.asarray(objects, np.int32).reshape(-1, 6))


def load_pretraining_detection(split: str, num_images: int, seed: int = 0, cache_dir: Optional[str] = None) -> List[dict]:
    """The detection records of the first ``num_images`` images of pretraining split ``split``
    (see the module docstring); their boxes computed on first use into the cache."""
    from phrasedet.data.synthetic.pretraining import pretraining_records

    records = pretraining_records(split, num_images, seed)
    folder = pretraining_boxes_dir(split, num_images, seed, cache_dir)
    build_once(folder, lambda tmp: _write_boxes(tmp, records), done=lambda f: os.path.isfile(os.path.join(f, BOXES_FILE)))
    with np.load(os.path.join(folder, BOXES_FILE)) as table:
        sizes, objects = table["sizes"], table["objects"]
    for record, (width, height) in zip(records, sizes.tolist()):
        record.update(file_name=record["image_id"], width=width, height=height, annotations=[])
    for i, category, *box in objects.tolist():
        records[i]["annotations"].append(_annotation(box, category))
    return records
