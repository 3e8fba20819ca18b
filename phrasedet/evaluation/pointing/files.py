"""Pointing-game files: the evaluator's per-query results, and the points / heatmaps files that
``tools/evaluation/evaluate_pointing.py`` evaluates. All are ``.npz`` (numpy ``savez``, uncompressed).

``pointing_predictions.npz`` (written by the evaluator, one row per query in dataset order):

* ``query_id`` str [Q], ``image_id`` str [Q];
* ``points`` float64 [Q, 2]: the model's (x, y), original-image pixels (NaN: no point, a miss);
* ``boxes`` float64 [Q, 4]: the ground-truth ``[x1, y1, x2, y2]``;
* ``hit_<rule key>`` bool [Q] for every rule (``hit_strict``, ``hit_inclusive``, ``hit_tol15``);
* ``hit_rule`` str and ``tolerance`` float64 (0-d): the protocol of the run.

It is also a points file. ``pointing_results.json``: ``{"pointing": metrics, "protocol":
{"hit_rule", "tolerance", "main_key", "description"}}``.

**Points file**: ``query_id`` [Q] (str, or integers, read as their decimal strings) and ``points``
float [Q, 2] as (x, y) in original-image pixels; rows in any order.

**Heatmaps file**: ``query_id`` [Q] as above, ``heatmaps`` float [Q, h, w] (one coarse map per
query, every map of the same size, covering the whole image) and optionally ``point_mode``
(0-d str, one of ``phrasedet.modeling.heatmap.POINT_MODES``): how a map's maximum becomes a
point (``heatmap_points``).

Readers raise :class:`phrasedet.fileio.BadFileError` (a ValueError) naming the file and the key: a
file numpy cannot read (truncated, not a zip), a missing key, an array of the wrong shape, dtype or
length, an infinite point (NaN is allowed: no answer), a NaN in a heatmap, a ground-truth box that
is not finite, an unknown ``point_mode`` or protocol.
"""
import json
import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from phrasedet.fileio import BadFileError
from phrasedet.modeling.heatmap import POINT_MODES
# the retrieval files' .npz readers: errors that name the file and the key
from ..array_files import bad_key, check_finite, check_length, check_rows, get_array, load_npz, scalar
from .dataset import PointingGroundTruth
from .hit_rules import rule_keys
from .metrics import PointingProtocol

__all__ = ["POINTING_PREDICTIONS_FILE", "POINTING_RESULTS_FILE", "load_heatmaps", "load_pointing_predictions",
           "load_points", "save_heatmaps", "save_points", "save_pointing_predictions", "write_pointing_results"]

POINTING_PREDICTIONS_FILE = "pointing_predictions.npz"
POINTING_RESULTS_FILE = "pointing_results.json"


def _str_ids(ids: Sequence) -> np.ndarray:
    return np.asarray([str(i) for i in ids], dtype=str).reshape(-1)


def save_pointing_predictions(path: str, gt: PointingGroundTruth, points: np.ndarray, hits: Dict[str, np.ndarray],
                              protocol: PointingProtocol) -> None:
    """Write ``pointing_predictions.npz`` (module docstring): ``points [Q, 2]`` and the ``hits``
    ``{rule_key: bool [Q]}`` of the queries of ``gt`` in dataset order."""
    arrays = {"query_id": _str_ids(gt.query_ids), "image_id": _str_ids(np.asarray(gt.image_ids)[gt.query_image]),
              "points": np.asarray(points, np.float64), "boxes": gt.boxes,
              "hit_rule": np.asarray(protocol.hit_rule), "tolerance": np.asarray(protocol.tolerance, np.float64)}
    arrays.update({f"hit_{k}": np.asarray(v, bool) for k, v in hits.items()})
    np.savez(path, **arrays)


def write_pointing_results(path: str, results: dict, protocol: PointingProtocol) -> None:
    """Write ``results`` and the protocol as JSON (``pointing_results.json``, module docstring)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({**results, "protocol": protocol.as_dict()}, f, indent=1)


def save_points(path: str, query_ids: Sequence, points) -> None:
    """Write a points file: ``query_id`` [Q] and ``points`` [Q, 2] as (x, y)."""
    np.savez(path, query_id=_str_ids(query_ids), points=np.asarray(points, np.float64).reshape(-1, 2))


def save_heatmaps(path: str, query_ids: Sequence, heatmaps, point_mode: Optional[str] = None) -> None:
    """Write a heatmaps file: ``query_id`` [Q], ``heatmaps`` [Q, h, w] and optionally ``point_mode``."""
    arrays = {"query_id": _str_ids(query_ids), "heatmaps": np.asarray(heatmaps)}
    if point_mode is not None:
        arrays["point_mode"] = np.asarray(point_mode)
    np.savez(path, **arrays)


# ----------------------------------------------------------------------------- reading
def _query_ids(npz, path: str) -> List[str]:
    ids = get_array(npz, path, "query_id", 1, "Uiu")
    return ids.astype(str).tolist() if ids.dtype.kind in "iu" else ids.tolist()


def _points(npz, path: str, query_ids: List[str]) -> np.ndarray:
    """float64 [Q, 2] points, one per query id; NaN (no answer) allowed, infinities not."""
    points = get_array(npz, path, "points", 2, "fiu").astype(np.float64)
    if points.shape[1:] != (2,):
        raise bad_key(path, "points", f"expected shape [queries, 2] as (x, y), got {points.shape}")
    check_length(path, "points", points, len(query_ids), "entries in 'query_id'")
    check_finite(path, "points", points, query_ids, allow_nan=True)
    return points


def load_points(path: str) -> Tuple[List[str], np.ndarray]:
    """``(query_ids [Q] str, points float64 [Q, 2])`` of a points file (or predictions file)."""
    with load_npz(path, "a points file", "query_id, points") as npz:
        query_ids = _query_ids(npz, path)
        return query_ids, _points(npz, path, query_ids)


def load_heatmaps(path: str) -> Tuple[List[str], np.ndarray, Optional[str]]:
    """``(query_ids [Q] str, heatmaps float [Q, h, w], point_mode or None)`` of a heatmaps file."""
    with load_npz(path, "a heatmaps file", "query_id, heatmaps[, point_mode]") as npz:
        query_ids = _query_ids(npz, path)
        heatmaps = get_array(npz, path, "heatmaps", 3, "f")
        check_length(path, "heatmaps", heatmaps, len(query_ids), "entries in 'query_id'")
        if heatmaps.shape[1] * heatmaps.shape[2] == 0:
            raise bad_key(path, "heatmaps", f"empty maps of size {heatmaps.shape[1:]}")
        mode = scalar(npz, path, "point_mode", "U") if "point_mode" in npz.files else None
    check_rows(path, "heatmaps", np.isnan(heatmaps), query_ids, "numbers, not NaN (a NaN map has no maximum)")
    if mode is not None and mode not in POINT_MODES:
        raise bad_key(path, "point_mode", f"must be one of {POINT_MODES}, got {mode!r}")
    return query_ids, heatmaps, mode


def _protocol(npz, path: str) -> PointingProtocol:
    hit_rule, tolerance = scalar(npz, path, "hit_rule", "U"), scalar(npz, path, "tolerance", "f")
    try:
        return PointingProtocol.checked(hit_rule, tolerance)
    except ValueError as e:
        raise BadFileError(f"{path}: keys 'hit_rule' and 'tolerance': {e}") from None


def load_pointing_predictions(path: str) -> dict:
    """Read ``pointing_predictions.npz``: dict with ``query_id``, ``image_id`` (lists of str),
    ``points`` [Q, 2], ``boxes`` [Q, 4] (float64), ``hits`` ``{rule_key: bool [Q]}`` and
    ``protocol`` (:class:`PointingProtocol`)."""
    keys = "query_id, image_id, points, boxes, hit_<rule>, hit_rule, tolerance"
    with load_npz(path, "a pointing predictions file", keys) as npz:
        query_ids = _query_ids(npz, path)
        out = {"query_id": query_ids, "points": _points(npz, path, query_ids)}
        out["image_id"] = get_array(npz, path, "image_id", 1, "U").tolist()
        check_length(path, "image_id", out["image_id"], len(query_ids), "entries in 'query_id'")
        out["boxes"] = get_array(npz, path, "boxes", 2, "f").astype(np.float64)
        if out["boxes"].shape[1:] != (4,):
            raise bad_key(path, "boxes", f"expected shape [queries, 4] as [x1, y1, x2, y2], got {out['boxes'].shape}")
        check_length(path, "boxes", out["boxes"], len(query_ids), "entries in 'query_id'")
        check_finite(path, "boxes", out["boxes"], query_ids)
        out["protocol"] = _protocol(npz, path)
        out["hits"] = {k: get_array(npz, path, f"hit_{k}", 1, "b") for k in rule_keys(out["protocol"].tolerance)}
        for k, hits in out["hits"].items():
            check_length(path, f"hit_{k}", hits, len(query_ids), "entries in 'query_id'")
    return out
