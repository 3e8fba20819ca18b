"""Binary image labels of the kinds of facts the built-in captions state, computed from a scene.

Each label is one yes/no fact about an image, in one of these groups (:data:`LABEL_GROUPS`):

* ``background``: the background has colour b (4 labels);
* ``colour``: an object of colour c is present (8);
* ``shape``: an object of shape s is present (6);
* ``colour_shape``: a "c s" object is present (48; "a red circle");
* ``count``: exactly n objects in all (n = 2, 3, 4), at least two of colour c, of shape s, of
  the pair (c, s) (3 + 8 + 6 + 48; "two red circles", "the red shapes", "the crosses");
* ``colour_position``: an object of colour c at position p (8 x 5; "a red shape on the left");
* ``shape_position``: an object of shape s at position p (6 x 5).

They serve two purposes: the representation probe
(:mod:`phrasedet.evaluation.representation_probe`) asks how well a frozen image representation
tells each of them apart, and the built-in CNN's pretraining (the stand-in for ImageNet) trains
on the groups of :data:`PRETRAINING_GROUPS`, as ImageNet's CNNs classify objects: which objects
each image holds, how many, and the background, never where they are.

The facts of one object (:data:`OBJECT_LABEL_GROUPS`: its colour, shape, size and colour + shape)
label the regions of the detector probe (:mod:`phrasedet.evaluation.region_probe`,
:func:`object_label_matrix`).
"""
from itertools import product
from typing import Dict, List, Sequence

import numpy as np

from .scene import BACKGROUNDS, COLOURS, SHAPES

__all__ = ["POSITIONS", "LABEL_GROUPS", "PRETRAINING_GROUPS", "OBJECT_LABEL_GROUPS", "label_names", "label_groups",
           "scene_labels", "label_matrix", "group_columns", "object_label_names", "object_label_groups",
           "object_label_matrix"]

POSITIONS = ("left", "right", "top", "bottom", "center")
LABEL_GROUPS = ("background", "colour", "shape", "colour_shape", "count", "colour_position", "shape_position")
#: What the pretraining CNN is trained to classify (no position: an ImageNet classifier is not told where).
PRETRAINING_GROUPS = ("background", "colour", "shape", "colour_shape", "count")
#: The facts of one object: what a region on it can be asked.
OBJECT_LABEL_GROUPS = ("colour", "shape", "size", "colour_shape")


def _group_labels(group: str) -> List[tuple]:
    """The labels of one group as (name, predicate over a scene)."""
    def has(pred):
        return lambda s: any(pred(o) for o in s["objects"])

    def at_least_two(pred):
        return lambda s: sum(1 for o in s["objects"] if pred(o)) >= 2

    if group == "background":
        return [(f"background {b}", lambda s, b=b: s["background"] == b) for b in BACKGROUNDS]
    if group == "colour":
        return [(f"{c}", has(lambda o, c=c: o["colour"] == c)) for c in COLOURS]
    if group == "shape":
        return [(f"{s}", has(lambda o, s=s: o["shape"] == s)) for s in SHAPES]
    if group == "colour_shape":
        return [(f"{c} {s}", has(lambda o, c=c, s=s: o["colour"] == c and o["shape"] == s)) for c, s in product(COLOURS, SHAPES)]
    if group == "count":
        return ([(f"{n} objects", lambda s, n=n: len(s["objects"]) == n) for n in (2, 3, 4)]
                + [(f"2+ {c}", at_least_two(lambda o, c=c: o["colour"] == c)) for c in COLOURS]
                + [(f"2+ {s}", at_least_two(lambda o, s=s: o["shape"] == s)) for s in SHAPES]
                + [(f"2+ {c} {s}", at_least_two(lambda o, c=c, s=s: o["colour"] == c and o["shape"] == s))
                   for c, s in product(COLOURS, SHAPES)])
    if group == "colour_position":
        return [(f"{c} at {p}", has(lambda o, c=c, p=p: o["colour"] == c and o["position"] == p))
                for c, p in product(COLOURS, POSITIONS)]
    if group == "shape_position":
        return [(f"{s} at {p}", has(lambda o, s=s, p=p: o["shape"] == s and o["position"] == p))
                for s, p in product(SHAPES, POSITIONS)]
    raise ValueError(f"unknown label group {group!r}; the groups are {LABEL_GROUPS}")


def label_names(groups: Sequence[str] = LABEL_GROUPS) -> List[str]:
    """The names of the labels of ``groups``, in column order."""
    return [name for g in groups for name, _ in _group_labels(g)]


def label_groups(groups: Sequence[str] = LABEL_GROUPS) -> List[str]:
    """The group of each column of :func:`label_matrix`."""
    return [g for g in groups for _ in _group_labels(g)]


def scene_labels(scene: dict, groups: Sequence[str] = LABEL_GROUPS) -> np.ndarray:
    """[L] uint8: 1 where the label is true of ``scene`` (``{"background", "objects"}``)."""
    return np.array([bool(pred(scene)) for g in groups for _, pred in _group_labels(g)], dtype=np.uint8)


def label_matrix(scenes: Sequence[dict], groups: Sequence[str] = LABEL_GROUPS) -> np.ndarray:
    """[N, L] uint8, one row per scene (:func:`scene_labels`)."""
    predicates = [pred for g in groups for _, pred in _group_labels(g)]
    out = np.zeros((len(scenes), len(predicates)), dtype=np.uint8)
    for i, scene in enumerate(scenes):
        out[i] = [bool(p(scene)) for p in predicates]
    return out


def group_columns(groups: Sequence[str] = LABEL_GROUPS) -> Dict[str, np.ndarray]:
    """{group: the column indices of its labels in :func:`label_matrix`}."""
    per = np.array(label_groups(groups))
    return {g: np.flatnonzero(per == g) for g in groups}


# ---------------------------------------------------------------- the facts of one object
def _object_group_labels(group: str) -> List[tuple]:
    """The labels of one object group as (name, predicate over an object ``{"colour", "shape", "size"}``):
    one-vs-rest per colour (8), per shape (6) and per colour-shape pair (48; "red circle"), and one
    label for size ("large": 1 for a large object, 0 for a small one)."""
    if group == "colour":
        return [(c, lambda o, c=c: o["colour"] == c) for c in COLOURS]
    if group == "shape":
        return [(s, lambda o, s=s: o["shape"] == s) for s in SHAPES]
    if group == "size":
        return [("large", lambda o: o["size"] == "large")]
    if group == "colour_shape":
        return [(f"{c} {s}", lambda o, c=c, s=s: o["colour"] == c and o["shape"] == s) for c, s in product(COLOURS, SHAPES)]
    raise ValueError(f"unknown object label group {group!r}; the groups are {OBJECT_LABEL_GROUPS}")


def object_label_names(groups: Sequence[str] = OBJECT_LABEL_GROUPS) -> List[str]:
    """The names of the object labels of ``groups``, in column order."""
    return [name for g in groups for name, _ in _object_group_labels(g)]


def object_label_groups(groups: Sequence[str] = OBJECT_LABEL_GROUPS) -> List[str]:
    """The group of each column of :func:`object_label_matrix`."""
    return [g for g in groups for _ in _object_group_labels(g)]


def object_label_matrix(objects: Sequence[dict], groups: Sequence[str] = OBJECT_LABEL_GROUPS) -> np.ndarray:
    """[N, L] uint8, one row per object (the ground truth's ``{"colour", "shape", "size", ...}``):
    1 where the label is true of it."""
    predicates = [pred for g in groups for _, pred in _object_group_labels(g)]
    return np.array([[bool(p(o)) for p in predicates] for o in objects], dtype=np.uint8).reshape(len(objects), len(predicates))
