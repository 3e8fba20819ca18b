"""Recall@K, median and mean rank from 1-based ranks (the released VSE++ evaluation's conventions)."""
import math
from typing import Dict, Sequence

import numpy as np

__all__ = ["DIRECTIONS", "METRIC_KEYS", "PER_DIRECTION", "RECALL_KS", "average_metrics", "recall_metrics"]

RECALL_KS = (1, 5, 10)
#: ``i2t``: image query, captions ranked (caption retrieval); ``t2i``: caption query, images ranked.
DIRECTIONS = ("i2t", "t2i")
#: Metrics of each direction, keyed ``<direction>_<metric>``; ``rsum`` sums the six recalls.
PER_DIRECTION = tuple(f"R@{k}" for k in RECALL_KS) + ("medr", "meanr")
METRIC_KEYS = tuple(f"{d}_{m}" for d in DIRECTIONS for m in PER_DIRECTION) + ("rsum",)


def _direction_metrics(ranks: np.ndarray, direction: str) -> Dict[str, float]:
    """R@K (%), medr = floor(median of the 0-based ranks) + 1 and meanr (mean 1-based rank) of one
    direction's queries; NaN when there is none."""
    ranks = np.asarray(ranks)
    if ranks.ndim != 1 or (len(ranks) and ranks.min() < 1):
        raise ValueError(f"{direction} ranks must be a 1-D array of 1-based ranks (>= 1), got shape {ranks.shape}"
                         + (f" with minimum {ranks.min()}" if ranks.size else ""))
    if not len(ranks):
        return {f"{direction}_{m}": math.nan for m in PER_DIRECTION}
    out = {f"{direction}_R@{k}": 100.0 * float(np.count_nonzero(ranks <= k)) / len(ranks) for k in RECALL_KS}
    out[f"{direction}_medr"] = float(math.floor(np.median(ranks - 1))) + 1.0
    out[f"{direction}_meanr"] = float(np.mean(ranks, dtype=np.float64))
    return out


def recall_metrics(i2t_ranks: np.ndarray, t2i_ranks: np.ndarray) -> Dict[str, float]:
    """Metrics of one evaluated set.

    Parameters
    ----------
    i2t_ranks : int [N_q]
        1-based rank of each image query's best ground-truth caption.
    t2i_ranks : int [M]
        1-based rank of each caption query's image.

    Returns
    -------
    dict of float, keys :data:`METRIC_KEYS`: ``{i2t,t2i}_R@{1,5,10}`` (percent), ``{i2t,t2i}_medr``,
    ``{i2t,t2i}_meanr`` and ``rsum`` (the six recalls summed).
    """
    out = {**_direction_metrics(i2t_ranks, "i2t"), **_direction_metrics(t2i_ranks, "t2i")}
    out["rsum"] = sum(out[f"{d}_R@{k}"] for d in DIRECTIONS for k in RECALL_KS)
    return {k: out[k] for k in METRIC_KEYS}


def average_metrics(per_fold: Sequence[Dict[str, float]]) -> Dict[str, float]:
    """Every metric (medr and meanr included) averaged over the folds, as VSE++'s COCO 1K numbers."""
    return {k: float(np.mean([m[k] for m in per_fold])) for k in METRIC_KEYS}
