"""The pointing game on points in dataset order, and on saved points or heatmaps files.

The in-loop evaluator and ``tools/evaluation/evaluate_pointing.py`` share :func:`evaluate_points`, so a saved
file gives the in-loop numbers.
"""
import logging
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .centre import query_centre_points
from .dataset import PointingGroundTruth, load_pointing_split
from .files import load_heatmaps, load_points
from .heatmaps import points_of_heatmaps
from .hit_rules import DEFAULT_TOLERANCE
from .metrics import PointingProtocol, pointing_metrics, score_points

__all__ = ["align_queries", "evaluate_heatmaps_file", "evaluate_points", "evaluate_points_file"]

logger = logging.getLogger(__name__)


def evaluate_points(gt: PointingGroundTruth, points, protocol: PointingProtocol
                    ) -> Tuple[Dict[str, Dict[str, float]], Dict[str, np.ndarray]]:
    """``({"pointing": metrics}, hits)`` of ``points [Q, 2]`` (one (x, y) per query of ``gt`` in
    dataset order), the centre baseline scored on the same queries; ``hits`` is
    ``{rule_key: bool [Q]}`` of the model (``metrics.py`` for the keys)."""
    points = np.asarray(points, dtype=np.float64)
    if points.shape != (gt.num_queries, 2):
        raise ValueError(f"dataset {gt.name!r}: expected points of shape [{gt.num_queries}, 2] (one per query), "
                         f"got {points.shape}")
    centres = query_centre_points(gt.image_sizes, gt.query_image)
    hits, centre_hits = score_points(points, gt.boxes, centres, protocol.tolerance)
    return {"pointing": pointing_metrics(hits, centre_hits, protocol, gt.num_images)}, hits


def _examples(ids: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(repr(i) for i in ids[:limit])
    return shown + (", ..." if len(ids) > limit else "")


def align_queries(path: str, gt: PointingGroundTruth, query_ids: List[str]) -> np.ndarray:
    """int64 [Q]: the row of the file ``path`` (whose rows are ``query_ids``) of each query of
    ``gt``, in dataset order. ValueError naming the file and the query ids for a repeated query,
    a query that is not in the dataset (extra) or a query of the dataset the file lacks."""
    rows = np.full(gt.num_queries, -1, dtype=np.int64)
    extra, repeated = [], []
    for r, query_id in enumerate(query_ids):
        q = gt.query_index.get(query_id)
        if q is None:
            extra.append(query_id)
        elif rows[q] >= 0:
            repeated.append(query_id)
        else:
            rows[q] = r
    if repeated:
        raise ValueError(f"{path}: key 'query_id': {len(repeated)} query ids appear more than once, e.g. "
                         f"query_id {_examples(repeated)}")
    if extra:
        raise ValueError(f"{path}: key 'query_id': {len(extra)} query ids are not queries of dataset {gt.name!r}, "
                         f"e.g. query_id {_examples(extra)}")
    missing = np.flatnonzero(rows < 0)
    if len(missing):
        raise ValueError(f"{path}: {len(missing)} of the {gt.num_queries} queries of dataset {gt.name!r} are missing, "
                         f"e.g. query_id {_examples([gt.query_ids[q] for q in missing[:4]])}")
    return rows


def evaluate_points_file(path: str, dataset_name: str, hit_rule: str = "strict",
                         tolerance: float = DEFAULT_TOLERANCE) -> Dict[str, Dict[str, float]]:
    """``{"pointing": metrics}`` of a points file (``files.py``; the evaluator's
    ``pointing_predictions.npz`` is one) on the registered split ``dataset_name``."""
    protocol = PointingProtocol.checked(hit_rule, tolerance)
    gt = load_pointing_split(dataset_name)
    query_ids, points = load_points(path)
    return evaluate_points(gt, points[align_queries(path, gt, query_ids)], protocol)[0]


def _point_mode(path: str, in_file: Optional[str], given: Optional[str]) -> str:
    if given is not None and in_file is not None and given != in_file:
        raise ValueError(f"{path}: key 'point_mode': the file says {in_file!r}, but point mode {given!r} was asked")
    return given or in_file or "corner"


def evaluate_heatmaps_file(path: str, dataset_name: str, point_mode: Optional[str] = None, hit_rule: str = "strict",
                           tolerance: float = DEFAULT_TOLERANCE) -> Dict[str, Dict[str, float]]:
    """``{"pointing": metrics}`` of a heatmaps file (``files.py``) on ``dataset_name``: each map's
    maximum becomes a point in its image's pixels by ``point_mode`` (default: the file's
    ``point_mode``, else ``"corner"``, the released code's; a different one than the file's is an
    error)."""
    protocol = PointingProtocol.checked(hit_rule, tolerance)
    gt = load_pointing_split(dataset_name)
    query_ids, heatmaps, in_file = load_heatmaps(path)
    mode = _point_mode(path, in_file, point_mode)
    logger.info("%s: %d heatmaps of %d x %d, point mode %r", path, len(query_ids), *heatmaps.shape[1:], mode)
    rows = align_queries(path, gt, query_ids)  # a permutation: every row is a query, every query a row
    query_of_row = np.empty_like(rows)
    query_of_row[rows] = np.arange(len(rows))
    points = points_of_heatmaps(heatmaps, gt.image_sizes[gt.query_image[query_of_row]], mode)  # file order
    return evaluate_points(gt, points[rows], protocol)[0]
