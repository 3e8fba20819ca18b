"""How specific the built-in captions are: of how many other images of its split a caption is true.

For every caption, its facts (:func:`.facts.caption_facts`, from its markup) are checked on every
other scene of its split (:class:`.facts.FactIndex`, from ``ground_truth.json``); ``k`` is the
number of other images of which it is true. A training batch of ``B`` images drawn uniformly
without replacement holds the caption's image and ``b = min(B, n) - 1`` of the ``n - 1`` others,
so it holds on average ``k b / (n - 1)`` images of which the caption is also true (false
negatives for a loss over in-batch negatives), and at least one with probability
``1 - C(n - 1 - k, b) / C(n - 1, b)``. Captions listed in ``UNRELATED_CAPTIONS`` describe no
image and are left out (counted). docs/DATA.md explains the measure.
"""
import json
import os
from typing import Optional, Sequence

import numpy as np

from phrasedet.fileio import read_text_lines

from .facts import FactIndex, caption_facts

__all__ = ["SPLITS", "in_batch_chance", "split_specificity", "dataset_specificity", "format_specificity"]

SPLITS = ("train", "val", "test")


def in_batch_chance(k: int, n: int, batch_size: int) -> tuple:
    """(expected count, probability of at least one) of the ``k`` other images a caption is true of
    in a uniform batch of ``batch_size`` images of an ``n``-image split holding its own image."""
    b = min(batch_size, n) - 1
    if k <= 0 or b <= 0:
        return 0.0, 0.0
    none = 1.0
    for t in range(b):  # C(n - 1 - k, b) / C(n - 1, b) as a product of b ratios
        none *= max(n - 1 - k - t, 0) / (n - 1 - t)
    return k * b / (n - 1), 1.0 - none


def split_specificity(scenes: Sequence[dict], captions: Sequence[Sequence], batch_size: int = 64) -> dict:
    """The measure over one split.

    Args:
        scenes: n scenes (``background``, ``objects``; see :mod:`.facts`).
        captions: per scene, its captions' fact tuples, None for a caption left out (unrelated).
        batch_size: B.

    Returns:
        dict: ``images``, ``captions`` (counted), ``left_out``, ``batch_size``; ``mean_in_batch``
        and ``share_in_batch`` (expected other images a caption is true of in a batch, and the
        chance of at least one, averaged over captions); ``mean_in_split``, ``share_in_split``
        and ``max_in_split`` (the same over the whole split: k itself, k > 0, the largest k).
    """
    index, n = FactIndex(scenes), len(scenes)
    ks, left_out = [], 0
    for i, facts_of_image in enumerate(captions):
        for facts in facts_of_image:
            if facts is None:
                left_out += 1
            else:
                ks.append(len(index.true_of(facts, exclude=i)))
    chances = np.array([in_batch_chance(k, n, batch_size) for k in ks]).reshape(-1, 2)
    k = np.asarray(ks, dtype=np.float64)
    mean = (lambda a: float(a.mean())) if k.size else (lambda a: float("nan"))
    return {"images": n, "captions": int(k.size), "left_out": left_out, "batch_size": int(batch_size),
            "mean_in_batch": mean(chances[:, 0]), "share_in_batch": mean(chances[:, 1]),
            "mean_in_split": mean(k), "share_in_split": mean(k > 0), "max_in_split": int(k.max()) if k.size else 0}


def _read_split(root: str, images: dict, split: str) -> tuple:
    """The scenes of a split (in its list file's order) and their captions' facts."""
    flickr = os.path.join(root, "flickr30k_entities")
    scenes, captions = [], []
    for image_id in read_text_lines(os.path.join(flickr, f"{split}.txt"), f"{split} image list"):
        image_id = image_id.strip()
        if not image_id:
            continue
        if image_id not in images:
            raise KeyError(f"{root}/ground_truth.json has no image {image_id!r} of {split}.txt")
        truth = images[image_id]
        path = os.path.join(flickr, "Sentences", f"{image_id}.txt")
        unrelated = set(truth.get("unrelated_captions", ()))
        lines = [line for line in read_text_lines(path, "Sentences file") if line.strip()]
        captions.append([None if c in unrelated else caption_facts(line, f"{path}:{c + 1}")
                         for c, line in enumerate(lines)])
        scenes.append({"background": truth["background"], "objects": truth["objects"]})
    return scenes, captions


def dataset_specificity(root: str, batch_size: int = 64, splits: Optional[Sequence[str]] = None) -> dict:
    """:func:`split_specificity` of every split of a built-in dataset root: {split: measure}."""
    with open(os.path.join(root, "ground_truth.json"), encoding="utf-8") as f:
        images = json.load(f)["images"]
    return {split: split_specificity(*_read_split(root, images, split), batch_size=batch_size)
            for split in (splits or SPLITS)}


def format_specificity(measures: dict) -> str:
    """A markdown table of :func:`dataset_specificity`'s result."""
    lines = ["| split | images | captions (unrelated left out) | other images per caption, batch of B | "
             "captions with any, batch of B | other images per caption, whole split | captions with any, whole split "
             "| most others |", "|---|---|---|---|---|---|---|---|"]
    for split, m in measures.items():
        lines.append(f"| {split} | {m['images']} | {m['captions']} ({m['left_out']}) | {m['mean_in_batch']:.3f} "
                     f"(B = {m['batch_size']}) | {100 * m['share_in_batch']:.1f} % | {m['mean_in_split']:.3f} | "
                     f"{100 * m['share_in_split']:.1f} % | {m['max_in_split']} |")
    return "\n".join(lines)
