"""The built-in pretraining split: the stand-in for ImageNet, on which the built-in CNN learns to
classify objects before the retrieval and pointing models start from it.

ImageNet is not COCO: the papers' CNNs were trained on other images, with labels only. So is
this one. Its images are drawn by the built-in dataset's own scene model (2-4 shapes on a
coloured background, the same drawing, jitter, noise and JPEG compression) but from a random
stream of their own, never the benchmark's, with every (colour, shape) combination in play
(the held-out and rare ones of the benchmark's training split included, as ImageNet holds
classes a downstream dataset lacks). Each image carries only the labels of
:data:`.labels.PRETRAINING_GROUPS`: which colours, shapes and colour-shape combinations it
holds, how many, and its background; no caption, box or position.

Images are not written to disk: record ``i`` of a split is drawn from its own generator
``numpy.random.default_rng([seed, STREAM, split index, i])`` whenever it is read, so a split of
any size costs nothing to make, every read of a record gives the same pixels, and the stream is
disjoint from the benchmark's generators (``[seed, 0..2]``).

The same images are a detection split too (the built-in pretrained detector's, the stand-in for a
COCO detector): :func:`pretraining_truth` gives a record's scene (objects, boxes) without drawing
its pixels, as :func:`render_pretraining_image` would draw it, and :data:`DETECTION_CLASSES`
names the 48 (colour, shape) classes, in the order of :data:`.scene.ALL_COMBOS`.
"""
import io
from typing import List

import numpy as np
from PIL import Image

from .labels import PRETRAINING_GROUPS, scene_labels
from .scene import ALL_COMBOS, JPEG_QUALITY, place_shapes, plan_scene, render_scene

__all__ = ["STREAM", "PRETRAINING_SPLITS", "DETECTION_CLASSES", "pretraining_records", "render_pretraining_image",
           "draw_pretraining_image", "pretraining_truth"]

#: First key of every pretraining image's generator, after the seed: apart from the benchmark's splits.
STREAM = 31
PRETRAINING_SPLITS = ("train", "val")
#: The detection classes: "red circle", ..., one per (colour, shape) of ALL_COMBOS, in its order.
DETECTION_CLASSES = tuple(f"{colour} {shape}" for colour, shape in ALL_COMBOS)


def pretraining_records(split: str, num_images: int, seed: int = 0) -> List[dict]:
    """Detectron2-style records of a pretraining split: ``image_id`` (``"pretrain_<split>_<i>"``),
    ``render_key`` (its generator's key), ``width`` and ``height`` filled when drawn."""
    if split not in PRETRAINING_SPLITS:
        raise ValueError(f"pretraining split must be one of {PRETRAINING_SPLITS}, got {split!r}")
    k = PRETRAINING_SPLITS.index(split)
    return [{"image_id": f"pretrain_{split}_{i}", "render_key": [int(seed), STREAM, k, i]} for i in range(int(num_images))]


def _planned_scene(record: dict) -> tuple:
    """(scene, its generator after planning) of a pretraining record."""
    rng = np.random.default_rng(record["render_key"])
    while True:
        scene = plan_scene(rng, "pretraining")  # every combination, as the benchmark's val and test splits
        if len(scene.objects) >= 2:
            return scene, rng


def draw_pretraining_image(record: dict) -> tuple:
    """(RGB PIL image as read back from its JPEG, scene record) of a pretraining record; the same
    for every call."""
    scene, rng = _planned_scene(record)
    image = render_scene(scene, rng)
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=JPEG_QUALITY)
    buffer.seek(0)
    return Image.open(buffer).convert("RGB"), scene.record()


def render_pretraining_image(record: dict, groups=PRETRAINING_GROUPS) -> tuple:
    """(RGB PIL image as read back from its JPEG, [L] uint8 labels of ``groups``, scene record)
    of a pretraining record; the same for every call."""
    image, truth = draw_pretraining_image(record)
    return image, scene_labels(truth, groups), truth


def pretraining_truth(record: dict) -> dict:
    """The scene record (size and objects with their boxes) of the image of a pretraining record,
    without drawing its pixels: the scene is planned and its shapes' masks drawn, as
    :func:`draw_pretraining_image` does (a quarter of its cost)."""
    scene, _ = _planned_scene(record)
    place_shapes(scene)
    return {"width": scene.width, "height": scene.height, **scene.record()}
