"""One point per query from a model's output for one image.

Two output kinds are read (``inputs`` give only ``image_id``; the queries come from the split):

* **points** (DSVE-loc): ``{"points": Tensor[Q_i, 2]}``, (x, y) in original-image pixels, one per
  query of the image in record order. Other keys (e.g. ``"heatmaps"``) are ignored.
* **phrase detections** (``PhraseRCNN``): ``{"phrases": list[str] (P), "scores": Tensor[P, K],
  "boxes": Tensor[P, K, 4]}`` (boxes xyxy in original-image pixels). A query's point is the centre
  ``((x1 + x2) / 2, (y1 + y2) / 2)`` of the top-scoring of the K boxes of the row whose phrase
  equals the query's ``phrase`` (the first such row if the phrase is listed twice). Equal scores:
  the smaller k. NaN scores are "no detection"; a row without any gives the point (NaN, NaN), a
  miss under every rule. The box of a score that is not NaN must be finite, and a point may be
  NaN (no answer) but not infinite: ValueError naming the image, the key and the row. A query phrase that is not in ``phrases`` is an error naming the image
  and the phrase.

Points are returned as float64.
"""
from typing import Sequence

import numpy as np
import torch

from phrasedet.text import nfc

from ..output_checks import check_output_rows
from ..phrase_detection.detections import check_detections, detection_arrays

__all__ = ["OutputPoints", "box_centres", "detection_points"]


def _float64(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().to(torch.float64).numpy()  # float64 first: NumPy has no bfloat16
    return np.asarray(x, dtype=np.float64)


def box_centres(boxes) -> np.ndarray:
    """Boxes [..., 4] xyxy -> centres [..., 2] as (x, y)."""
    b = _float64(boxes)
    return np.stack([(b[..., 0] + b[..., 2]) / 2.0, (b[..., 1] + b[..., 3]) / 2.0], axis=-1)


def detection_points(rows: np.ndarray, scores, boxes) -> np.ndarray:
    """The centre of the top-scoring box of each of ``rows`` [Q] of ``scores [P, K]`` and
    ``boxes [P, K, 4]`` -> [Q, 2]; (NaN, NaN) for a row whose scores are all NaN."""
    s, b = detection_arrays(scores, boxes, np.float64)
    s, b = s[rows], b[rows]
    none = np.isnan(s)
    top = np.where(none, -np.inf, s).argmax(axis=1)  # first maximum: the smaller k on ties
    points = box_centres(b[np.arange(len(rows)), top])
    points[none.all(axis=1)] = np.nan
    return points


class OutputPoints:
    """Callable ``(image_id, output, query_phrases) -> points float64 [Q_i, 2]`` (module docstring).

    The phrase -> row index of a detector's ``phrases`` is built once per distinct list (an
    open-vocabulary model passes the same list for every image).
    """

    def __init__(self):
        self._phrases = None
        self._index = {}

    def _row_index(self, phrases: Sequence[str]) -> dict:
        if phrases is not self._phrases and not (self._phrases is not None and phrases == self._phrases):
            index = {}
            for r, p in enumerate(phrases):
                index.setdefault(nfc(p), r)  # query phrases are NFC (phrasedet.text.nfc)
            self._phrases, self._index = phrases, index
        return self._index

    def _points(self, image_id: str, points, query_phrases: Sequence[str]) -> np.ndarray:
        p = _float64(points)
        if p.shape != (len(query_phrases), 2):
            raise ValueError(f"image_id {image_id!r}: 'points' must have shape [{len(query_phrases)}, 2] (one (x, y) "
                             f"per query of the image, in record order), got {tuple(p.shape)}")
        check_output_rows(image_id, "points", np.isinf(p), p, query_phrases, "finite numbers or NaN (no answer)")
        return p

    def _detections(self, image_id: str, output: dict, query_phrases: Sequence[str]) -> np.ndarray:
        for key in ("scores", "boxes"):
            if key not in output:
                raise ValueError(f"image_id {image_id!r}: the model output has 'phrases' but no {key!r}")
        index = self._row_index(output["phrases"])
        rows = []
        for phrase in query_phrases:
            if phrase not in index:
                raise ValueError(f"image_id {image_id!r}: query phrase {phrase!r} is not among the "
                                 f"{len(output['phrases'])} phrases of the model output")
            rows.append(index[phrase])
        scores, boxes = detection_arrays(output["scores"], output["boxes"], np.float64)
        check_detections(image_id, output["phrases"], scores, boxes)
        return detection_points(np.asarray(rows, dtype=np.int64), scores, boxes)

    def __call__(self, image_id: str, output: dict, query_phrases: Sequence[str]) -> np.ndarray:
        if "points" in output:
            return self._points(image_id, output["points"], query_phrases)
        if "phrases" in output:
            return self._detections(image_id, output, query_phrases)
        raise ValueError(f"image_id {image_id!r}: the model output has neither 'points' (DSVE-loc) nor 'phrases', "
                         f"'scores', 'boxes' (a phrase detector); keys: {sorted(output)}")
