"""The oracle image representation of the built-in dataset: what a perfect CNN would see.

Not a model: a diagnostic upper bound, computed from the generator's record of each scene
(``ground_truth.json``), that separates "the loss fails" from "the CNN cannot see it". An object
is coded by every desc it matches (:func:`.facts.object_descs`: the 16 subsets of its colour,
shape, size and position, from the empty one to all four), so that every object fact a caption
can state ("a red circle", "a small shape on the left", "a star") is one dimension, and a fact
about a combination never seen in training is still read through its parts. There are
(8 + 1)(6 + 1)(2 + 1)(5 + 1) = 1,134 descs (:data:`CODES`), and the background adds its colour (4):

* **global** (:func:`oracle_vector`): [1138], the number of objects matching each desc, plus the
  background's one-hot: a features row for every ``MODEL.RETRIEVAL.IMAGE_INPUT "features"``
  config;
* **spatial** (:func:`oracle_maps`): [1138, h, w] over the image resized to a square (as
  ``INPUT.POINTING.RESIZE_MODE "square"`` does), each cell holding the descs of the object whose
  box contains the cell's centre, or the background's one-hot: the pre-pooling maps of
  ``MODEL.RETRIEVAL.IMAGE_INPUT "maps"`` for DSVE-loc's pooling and heatmaps. Every cell of an
  object holds the same code, so a heatmap's maximum over them is a tie, broken at the first cell;
  with cells given to every object they touch (the rule before), that first cell was often a sliver
  of the box whose centre lies outside it, and the oracle's own cells hit only 23 % of the test
  boxes (docs/DATA.md).

:func:`write_oracle_features` writes both for the built-in caption and pointing splits, in the
layout of :mod:`phrasedet.data.image_features` (``<dir>/<dataset name>.npy`` and ``.txt``).
"""
from itertools import combinations, product
from typing import Sequence

import numpy as np

from .facts import ATTRIBUTES, canonical_desc, object_descs
from .labels import POSITIONS
from .scene import BACKGROUNDS, COLOURS, SHAPES

__all__ = ["SIZES", "CODES", "ORACLE_DIM", "object_codes", "oracle_vector", "oracle_maps", "write_oracle_features"]

SIZES = ("small", "large")
_VALUES = {"colour": tuple(COLOURS), "shape": SHAPES, "size": SIZES, "position": POSITIONS}
#: Every desc an object can match (canonical form), in code order.
CODES = tuple(canonical_desc(zip(names, values))
              for r in range(len(ATTRIBUTES) + 1) for names in combinations(ATTRIBUTES, r)
              for values in product(*(_VALUES[n] for n in names)))
_CODE = {c: i for i, c in enumerate(CODES)}
_BACKGROUND = {b: len(CODES) + i for i, b in enumerate(BACKGROUNDS)}
ORACLE_DIM = len(CODES) + len(BACKGROUNDS)


def object_codes(obj: dict) -> list:
    """The indices in :data:`CODES` of the 16 descs an object matches."""
    return [_CODE[d] for d in object_descs(obj)]


def oracle_vector(scene: dict) -> np.ndarray:
    """[ORACLE_DIM] float32: objects matching each desc, then the background's one-hot."""
    out = np.zeros(ORACLE_DIM, np.float32)
    for obj in scene["objects"]:
        out[object_codes(obj)] += 1
    out[_BACKGROUND[scene["background"]]] = 1
    return out


def _overlap(box: Sequence[float], x0: float, y0: float, x1: float, y1: float) -> float:
    return max(0.0, min(box[2], x1) - max(box[0], x0)) * max(0.0, min(box[3], y1) - max(box[1], y0))


def _cell_owners(objects: Sequence[dict], width: int, height: int, grid: int) -> np.ndarray:
    """[grid, grid] int: the index of the object each cell holds, -1 for the background.

    A cell holds the object whose box strictly contains the cell's centre (of several, the one
    overlapping the cell most, the first on a tie): the point DSVE-loc's evaluation takes for a
    cell (``MODEL.POINTING.POINT_MODE "centre"``) then hits, by the strict rule, the box of every
    object the cell holds. An object that contains no cell's centre (smaller than a cell) holds the
    cell its own centre falls in, so that no object is missing from the maps: none of the generated
    scenes' at grid 8 or finer (tested); at grid 4, 6 of their 2,424 objects are, where two such
    objects fall in one cell and the later one takes it.
    """
    cw, ch = width / grid, height / grid
    owners = np.full((grid, grid), -1, np.int64)
    for i in range(grid):
        for j in range(grid):
            cx, cy, cell = (j + 0.5) * cw, (i + 0.5) * ch, (j * cw, i * ch, (j + 1) * cw, (i + 1) * ch)
            inside = [k for k, o in enumerate(objects) if o["box"][0] < cx < o["box"][2] and o["box"][1] < cy < o["box"][3]]
            if inside:
                owners[i, j] = max(inside, key=lambda k: _overlap(objects[k]["box"], *cell))
    for k, o in enumerate(objects):
        if not (owners == k).any():
            x, y = (o["box"][0] + o["box"][2]) / 2, (o["box"][1] + o["box"][3]) / 2
            owners[min(int(y // ch), grid - 1), min(int(x // cw), grid - 1)] = k
    return owners


def oracle_maps(scene: dict, width: int, height: int, grid: int) -> np.ndarray:
    """[ORACLE_DIM, grid, grid] float32 over a ``width`` x ``height`` image: cell (i, j) covers
    ``[j W / grid, (j + 1) W / grid) x [i H / grid, (i + 1) H / grid)`` and holds the descs of the
    object whose box contains its centre (:func:`_cell_owners`), or the background's one-hot."""
    out = np.zeros((ORACLE_DIM, grid, grid), np.float32)
    owners = _cell_owners(scene["objects"], width, height, grid)
    for i in range(grid):
        for j in range(grid):
            k = owners[i, j]
            out[object_codes(scene["objects"][k]) if k >= 0 else _BACKGROUND[scene["background"]], i, j] = 1
    return out


def write_oracle_features(output_dir: str, datasets: Sequence[str], grid: int, images: dict) -> dict:
    """Write ``<output_dir>/global/<name>.npy`` ([N, ORACLE_DIM]) and ``<output_dir>/maps/<name>.npy``
    ([N, ORACLE_DIM, grid, grid], uint8) with their ``.txt`` image ids, rows in each registered
    split's record order.

    Args:
        datasets: registered built-in dataset names (caption or pointing splits).
        images: the ground truth's images (:func:`.ground_truth.load_ground_truth`).

    Returns:
        {"global": dir, "maps": dir}.
    """
    import os

    from detectron2.data import DatasetCatalog

    from ..image_features import write_image_features

    dirs = {"global": os.path.join(output_dir, "global"), "maps": os.path.join(output_dir, "maps")}
    for name in datasets:
        records = DatasetCatalog.get(name)
        missing = [r["image_id"] for r in records if str(r["image_id"]) not in images]
        if missing:
            raise KeyError(f"{name}: image {missing[0]!r} is not in the built-in ground truth ({len(missing)} missing)")
        scenes = [images[str(r["image_id"])] for r in records]
        ids = [r["image_id"] for r in records]
        write_image_features(dirs["global"], name, np.stack([oracle_vector(s) for s in scenes]), ids)
        maps = np.zeros((len(scenes), ORACLE_DIM, grid, grid), np.uint8)
        for k, s in enumerate(scenes):
            maps[k] = oracle_maps(s, s["width"], s["height"], grid)
        write_image_features(dirs["maps"], name, maps, ids, dtype=np.uint8)
    return dirs
