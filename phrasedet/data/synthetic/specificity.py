"""How specific the built-in captions are: of how many other images of its split a caption is true.

For every caption, its facts (:func:`.facts.caption_facts`, from its markup) are checked on every
other scene of its split, by brute force (:func:`.facts.caption_true_of` on each scene of
``ground_truth.json``); ``k`` is the number of other images of which it is true. The generator's
fast index (:class:`.facts.FactIndex`) is asked the same question for every caption, and any
difference is an error naming the caption: the figures never rest on the index alone. A training batch of ``B`` images drawn uniformly
without replacement holds the caption's image and ``b = min(B, n) - 1`` of the ``n - 1`` others,
so it holds on average ``k b / (n - 1)`` images of which the caption is also true (false
negatives for a loss over in-batch negatives), and at least one with probability
``1 - C(n - 1 - k, b) / C(n - 1, b)``. Captions listed in ``UNRELATED_CAPTIONS`` describe no
image and are left out (counted). docs/DATA.md explains the measure.
"""
import math
import os
from typing import Optional, Sequence

import numpy as np

from phrasedet.fileio import read_text_lines

from .facts import FactIndex, caption_facts, caption_true_of
from .ground_truth import SPLITS, load_ground_truth, load_language, split_scenes

__all__ = ["SPLITS", "IndexDisagreement", "in_batch_chance", "true_of_brute_force", "split_specificity",
           "dataset_specificity", "format_specificity"]


class IndexDisagreement(AssertionError):
    """:class:`.facts.FactIndex` and brute force found different images for a caption."""


def in_batch_chance(k: int, n: int, batch_size: int) -> tuple:
    """(expected count, probability of at least one) of the ``k`` other images a caption is true of
    in a uniform batch of ``batch_size`` images of an ``n``-image split holding its own image."""
    b = min(batch_size, n) - 1
    if b <= 0:
        return 0.0, 0.0
    none = 1.0
    for t in range(b):  # C(n - 1 - k, b) / C(n - 1, b) as a product of b ratios
        none *= max(n - 1 - k - t, 0) / (n - 1 - t)
    return k * b / (n - 1), 1.0 - none


def true_of_brute_force(facts: Sequence[tuple], scenes: Sequence[dict], exclude: Optional[int] = None) -> list:
    """Indices of the scenes of which every fact holds, ``exclude`` left out: every scene checked."""
    return [i for i, scene in enumerate(scenes) if i != exclude and caption_true_of(facts, scene)]


def split_specificity(scenes: Sequence[dict], captions: Sequence[Sequence], batch_size: int = 64,
                      names: Optional[Sequence[str]] = None, brute_force: bool = True) -> dict:
    """The measure over one split, by brute force, checked against :class:`.facts.FactIndex`
    (``brute_force=False``: by the index alone, which the tests check against brute force on the
    default dataset; what ``compare_retrieval.py`` uses on every run).

    Args:
        scenes: n scenes (``background``, ``objects``; see :mod:`.facts`).
        captions: per scene, its captions' fact tuples, None for a caption left out (unrelated).
        batch_size: B.
        names: per scene, how an error names it (an image id); its position by default.

    Returns:
        dict: ``images``, ``captions`` (counted), ``left_out``, ``batch_size``; ``mean_in_batch``
        and ``share_in_batch`` (expected other images a caption is true of in a batch, and the
        chance of at least one, averaged over captions); ``mean_in_split``, ``share_in_split``
        and ``max_in_split`` (the same over the whole split: k itself, k > 0, the largest k).

    Raises:
        IndexDisagreement: naming the image, the caption, its facts and both answers, where the
            index and brute force differ.
    """
    index, n = FactIndex(scenes), len(scenes)
    ks, left_out = [], 0
    for i, facts_of_image in enumerate(captions):
        for c, facts in enumerate(facts_of_image):
            if facts is None:
                left_out += 1
                continue
            indexed = index.true_of(facts, exclude=i)
            found = true_of_brute_force(facts, scenes, exclude=i) if brute_force else indexed
            if indexed != found:
                name = names[i] if names is not None else f"scene {i}"
                raise IndexDisagreement(
                    f"image {name}, caption {c}: FactIndex finds scenes {indexed[:10]} ({len(indexed)}), brute force "
                    f"{found[:10]} ({len(found)}), for the facts {facts!r}")
            ks.append(len(found))
    chances = np.array([in_batch_chance(k, n, batch_size) for k in ks]).reshape(-1, 2)
    k = np.asarray(ks)
    mean = (lambda a: float(a.mean())) if k.size else (lambda a: math.nan)  # no warning for an empty split
    return {"images": n, "captions": int(k.size), "left_out": left_out, "batch_size": int(batch_size),
            "mean_in_batch": mean(chances[:, 0]), "share_in_batch": mean(chances[:, 1]),
            "mean_in_split": mean(k), "share_in_split": mean(k > 0), "max_in_split": int(k.max()) if k.size else 0}


def _read_split(root: str, images: dict, split: str, language=None) -> tuple:
    """The scenes of a split (in its list file's order), their captions' facts (read in the
    dataset's language, :func:`.ground_truth.load_language`) and their image ids."""
    language = language or load_language(root)
    ids, scenes = split_scenes(root, split, images)
    sentences, captions = os.path.join(root, "flickr30k_entities", "Sentences"), []
    for image_id in ids:
        path = os.path.join(sentences, f"{image_id}.txt")
        unrelated = set(images[image_id].get("unrelated_captions", ()))
        lines = [line for line in read_text_lines(path, "Sentences file") if line.strip()]
        captions.append([None if c in unrelated else caption_facts(line, f"{path}:{c + 1}", language)
                         for c, line in enumerate(lines)])
    return scenes, captions, ids


def dataset_specificity(root: str, batch_size: int = 64, splits: Optional[Sequence[str]] = None,
                        brute_force: bool = True) -> dict:
    """:func:`split_specificity` of every split of a built-in dataset root: {split: measure}.
    Brute force over a default dataset takes a few seconds (docs/DATA.md)."""
    images, language = load_ground_truth(root), load_language(root)
    out = {}
    for split in splits or SPLITS:
        scenes, captions, ids = _read_split(root, images, split, language)
        out[split] = split_specificity(scenes, captions, batch_size=batch_size, names=ids, brute_force=brute_force)
    return out


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
