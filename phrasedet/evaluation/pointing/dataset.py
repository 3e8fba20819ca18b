"""The registered pointing split an evaluation reads: images, queries and their boxes.

A pointing split (``phrasedet.data.datasets.pointing``, docs/DATA.md) is a list of records, one per
image, each with ``image_id``, ``height``, ``width`` (original pixels) and ``queries``: a list of
``{"text", "phrase", "bbox": [x1, y1, x2, y2], "query_id"}`` (``bbox`` 0-based continuous
XYXY_ABS in original pixels; a ``bbox_mode`` key, if present, must be ``BoxMode.XYXY_ABS``).
Queries are numbered image by image in record order; that order is the order of every
per-query array of the evaluation.
"""
import math
from typing import Dict, List, Sequence

import numpy as np
from detectron2.data import DatasetCatalog
from detectron2.structures import BoxMode

__all__ = ["PointingGroundTruth", "load_pointing_split"]

_RECORD_KEYS = ("image_id", "height", "width", "queries")
_QUERY_KEYS = ("phrase", "bbox", "query_id")


class PointingGroundTruth:
    """The queries of a pointing split, in dataset order.

    Attributes
    ----------
    name : str
        Where it comes from (the dataset name), for error messages.
    image_ids : list of str [N]
        Records in dataset order (images without queries included).
    image_index : dict str -> int
    image_sizes : float64 [N, 2]
        ``(height, width)`` of each image, original pixels.
    query_ids : list of str [Q]
    query_index : dict str -> int
    phrases : list of str [Q]
        Each query's normalized ``phrase`` (matched against a phrase detector's output).
    boxes : float64 [Q, 4]
        Each query's ``bbox`` (column-major: each coordinate column is contiguous, for the hit rules).
    query_image : int64 [Q]
        Image (index into ``image_ids``) of each query.
    query_starts : int64 [N + 1]
        The queries of image n are ``query_starts[n]:query_starts[n + 1]``.
    """

    def __init__(self, name: str, image_ids: Sequence[str], image_sizes, query_ids: Sequence[str],
                 phrases: Sequence[str], boxes, query_counts):
        self.name = name
        self.image_ids = [str(i) for i in image_ids]
        self.image_index = _unique_index(self.image_ids, name, "image_id")
        self.image_sizes = np.asarray(image_sizes, dtype=np.float64).reshape(-1, 2)
        self.query_ids = [str(q) for q in query_ids]
        self.query_index = _unique_index(self.query_ids, name, "query_id")
        self.phrases = list(phrases)
        self.boxes = np.asfortranarray(np.asarray(boxes, dtype=np.float64).reshape(-1, 4))
        counts = np.asarray(query_counts, dtype=np.int64)
        self.query_starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.query_image = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
        _check_boxes(self)

    @property
    def num_queries(self) -> int:
        return len(self.query_ids)

    @property
    def num_images(self) -> int:
        """Images with at least one query (those an evaluation needs)."""
        return int(np.count_nonzero(np.diff(self.query_starts)))

    def queries_of(self, n: int) -> slice:
        """The queries of image ``n``, as a slice of the per-query arrays."""
        return slice(int(self.query_starts[n]), int(self.query_starts[n + 1]))


def _unique_index(ids: List[str], name: str, key: str) -> Dict[str, int]:
    index = {}
    for n, i in enumerate(ids):
        if index.setdefault(i, n) != n:
            raise ValueError(f"dataset {name!r}: {key} {i!r} appears twice (entries {index[i]} and {n})")
    return index


def _check_boxes(gt: PointingGroundTruth) -> None:
    """ValueError naming the first query whose box is not finite with x1 <= x2 and y1 <= y2."""
    b = gt.boxes
    bad = ~np.isfinite(b).all(axis=1) | (b[:, 2] < b[:, 0]) | (b[:, 3] < b[:, 1])
    if bad.any():
        q = int(np.flatnonzero(bad)[0])
        raise ValueError(f"dataset {gt.name!r}: query_id {gt.query_ids[q]!r}: key 'bbox': {b[q].tolist()} is not a "
                         f"box [x1, y1, x2, y2] with x1 <= x2 and y1 <= y2 ({int(bad.sum())} such queries)")


def _missing(where: str, keys: Sequence[str], item: dict, what: str) -> None:
    for key in keys:
        if key not in item:
            raise ValueError(f"{where}: no key {key!r} (a pointing {what} needs {list(keys)})")


def _check_query(where: str, query: dict) -> None:
    _missing(where, _QUERY_KEYS, query, "query")
    bbox = query["bbox"]
    if not (isinstance(bbox, (list, tuple, np.ndarray)) and len(bbox) == 4):
        raise ValueError(f"{where}: key 'bbox': must be [x1, y1, x2, y2], got {bbox!r}")
    if query.get("bbox_mode", BoxMode.XYXY_ABS) != BoxMode.XYXY_ABS:
        raise ValueError(f"{where}: key 'bbox_mode': {query['bbox_mode']!r}, expected BoxMode.XYXY_ABS")


def _image_size(where: str, record: dict):
    size = (record["height"], record["width"])
    if not all(isinstance(v, (int, float, np.number)) and math.isfinite(v) and v > 0 for v in size):
        raise ValueError(f"{where}: keys 'height', 'width' must be positive numbers, got {size}")
    return size


def load_pointing_split(dataset_name: str) -> PointingGroundTruth:
    """:class:`PointingGroundTruth` of the records ``DatasetCatalog.get(dataset_name)``.

    ValueError naming the dataset, the record (index and ``image_id``), the query and the key for
    a missing key, a malformed box or image size, or a repeated ``image_id`` / ``query_id``.
    """
    image_ids, sizes, counts, query_ids, phrases, boxes = [], [], [], [], [], []
    for n, record in enumerate(DatasetCatalog.get(dataset_name)):
        where = f"dataset {dataset_name!r}: record {n}"
        _missing(where, _RECORD_KEYS, record, "record")
        where += f" (image_id {str(record['image_id'])!r})"
        sizes.append(_image_size(where, record))
        image_ids.append(record["image_id"])
        counts.append(len(record["queries"]))
        for k, query in enumerate(record["queries"]):
            _check_query(f"{where}: query {k}", query)
            query_ids.append(query["query_id"])
            phrases.append(query["phrase"])
            boxes.append(query["bbox"])
    return PointingGroundTruth(dataset_name, image_ids, sizes, query_ids, phrases, boxes, counts)
