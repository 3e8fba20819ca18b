"""Detectron2 ``DatasetEvaluator`` for the pointing game (paper 004)."""
import logging
import os
from typing import List, Optional, Tuple

import numpy as np
from detectron2.evaluation import DatasetEvaluator

from .dataset import load_pointing_split
from .files import (POINTING_PREDICTIONS_FILE, POINTING_RESULTS_FILE, save_pointing_predictions,
                    write_pointing_results)
from .hit_rules import DEFAULT_TOLERANCE
from .metrics import PointingProtocol
from .outputs import OutputPoints
from .pointing_game import evaluate_points
from .report import format_pointing_table, pointing_title
from ..distributed import DistributedEvaluatorMixin

__all__ = ["PointingGameEvaluator"]


class PointingGameEvaluator(DistributedEvaluatorMixin, DatasetEvaluator):
    """Pointing-game accuracy of a model and of the centre baseline, under every hit rule, on a
    registered pointing split (records with ``image_id``, ``height``, ``width`` and ``queries``;
    ``dataset.py``).

    Each input needs only ``image_id``; its queries, boxes and size come from the split. Each
    output is either ``{"points": [Q_i, 2]}`` (DSVE-loc; one (x, y) per query of the image in
    record order, original-image pixels) or a phrase detector's ``{"phrases", "scores",
    "boxes"}`` (the centre of the top box of the query's phrase; ``outputs.py``). Queries are
    ordered as in the dataset, so the result depends neither on the arrival order nor on the
    number of processes. Definitions: docs/EVALUATION.md, "Pointing game".

    Parameters
    ----------
    dataset_name : str
        Registered pointing split.
    hit_rule : "strict", "inclusive" or "tolerance"
        The main rule (keys ``accuracy`` and ``centre_accuracy``); every rule is reported too.
    tolerance : float
        Pixels of the original image for the ``"tolerance"`` rule (key ``accuracy_tol<tolerance>``).
    output_dir : str, optional
        Where ``pointing_results.json`` and ``pointing_predictions.npz`` are written (main process).
    save_predictions : bool
        With ``output_dir``: write every query's point, box and hits (``files.py``), readable by
        ``tools/evaluation/evaluate_pointing.py --points``.
    distributed : bool
        Gather the points of all processes to the main one (others return {}). If False, each
        process evaluates what it saw, which must then be every image with queries.
    """

    def __init__(self, dataset_name: str, hit_rule: str = "strict", tolerance: float = DEFAULT_TOLERANCE,
                 output_dir: Optional[str] = None, save_predictions: bool = True, distributed: bool = True):
        self._logger = logging.getLogger(__name__)
        self._dataset_name = dataset_name
        self.protocol = PointingProtocol.checked(hit_rule, tolerance)  # fails before inference
        self._gt = load_pointing_split(dataset_name)
        if self._gt.num_queries == 0:
            raise ValueError(f"dataset {dataset_name!r} has no query: nothing to evaluate")
        self._output_dir = output_dir
        self._save_predictions = bool(save_predictions and output_dir)
        self._distributed = distributed
        self._to_points = OutputPoints()
        self._seen: List[Tuple[int, np.ndarray]] = []

    def reset(self):
        self._seen = []

    def process(self, inputs, outputs):
        for inp, out in zip(inputs, outputs):
            image_id = str(inp["image_id"])
            n = self._gt.image_index.get(image_id)
            if n is None:
                raise ValueError(f"image_id {image_id!r} is not in dataset {self._dataset_name!r}")
            queries = self._gt.queries_of(n)
            self._seen.append((n, self._to_points(image_id, out, self._gt.phrases[queries])))

    # ------------------------------------------------------------------ gathering and assembly
    def _assemble(self, seen) -> np.ndarray:
        """Points [Q, 2] in dataset order; ValueError when an image was seen twice, or an image
        with queries never."""
        gt = self._gt
        times = np.bincount(np.asarray([n for n, _ in seen], dtype=np.int64), minlength=len(gt.image_ids))
        if (times > 1).any():
            twice = [gt.image_ids[n] for n in np.flatnonzero(times > 1)[:5]]
            raise ValueError(f"{int((times > 1).sum())} images of {self._dataset_name!r} were evaluated more than "
                             f"once, e.g. image_id {twice}")
        missing = np.flatnonzero((times == 0) & (np.diff(gt.query_starts) > 0))
        if len(missing):
            queries = int(np.diff(gt.query_starts)[missing].sum())
            raise ValueError(f"{len(missing)} of the {gt.num_images} images with queries of {self._dataset_name!r} "
                             f"were never processed ({queries} of {gt.num_queries} queries), e.g. image_id "
                             f"{[gt.image_ids[n] for n in missing[:5]]}")
        points = np.empty((gt.num_queries, 2), np.float64, order="F")  # contiguous columns: faster hit rules
        for n, p in seen:
            points[gt.queries_of(n)] = p
        return points

    # ------------------------------------------------------------------ evaluation
    def _save(self, results: dict, points: np.ndarray, hits: dict) -> None:
        os.makedirs(self._output_dir, exist_ok=True)
        write_pointing_results(self._output_path(POINTING_RESULTS_FILE), results, self.protocol)
        if self._save_predictions:
            save_pointing_predictions(self._output_path(POINTING_PREDICTIONS_FILE), self._gt, points, hits,
                                      self.protocol)

    def evaluate(self):
        seen = self._gather_seen(self._seen)
        if seen is None:
            return {}
        points = self._assemble(seen)
        results, hits = evaluate_points(self._gt, points, self.protocol)
        metrics = results["pointing"]
        self._logger.info("%s\n%s", pointing_title(self._dataset_name, metrics, self.protocol),
                          format_pointing_table(metrics, self.protocol))
        if self._output_dir:
            self._save(results, points, hits)
        return results
