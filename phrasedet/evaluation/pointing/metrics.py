"""Pointing-game accuracy of the model and of the centre baseline under every hit rule.

Accuracy = hits / queries, in percent (NaN without queries). The result dict holds numbers only
(Detectron2's ``print_csv_format`` and ``EvalHook`` need floats); the main rule is the
evaluation's :class:`PointingProtocol`, which every table and saved file states::

    {"accuracy": ..., "centre_accuracy": ...,                     # the main rule
     "accuracy_strict": ..., "accuracy_inclusive": ..., "accuracy_tol15": ...,
     "centre_accuracy_strict": ..., "centre_accuracy_inclusive": ..., "centre_accuracy_tol15": ...,
     "num_queries": Q, "num_images": N, "tolerance": 15.0}
"""
from typing import Dict, NamedTuple, Tuple

import numpy as np

from .hit_rules import DEFAULT_TOLERANCE, all_rule_hits, check_hit_rule, describe_rule, rule_key, rule_keys

__all__ = ["PointingProtocol", "pointing_accuracy", "pointing_metrics", "score_points"]


class PointingProtocol(NamedTuple):
    """The main hit rule and the tolerance (pixels of the original image) of an evaluation."""

    hit_rule: str = "strict"
    tolerance: float = DEFAULT_TOLERANCE

    @classmethod
    def checked(cls, hit_rule: str = "strict", tolerance: float = DEFAULT_TOLERANCE) -> "PointingProtocol":
        return cls(*check_hit_rule(hit_rule, tolerance))

    @property
    def key(self) -> str:
        """The main rule's key in the results (``"strict"``, ``"inclusive"``, ``"tol15"``)."""
        return rule_key(self.hit_rule, self.tolerance)

    def describe(self) -> str:
        """E.g. ``"hit rule strict (x1 < x < x2 and y1 < y < y2); tolerance 15 px"``."""
        return f"hit rule {self.key} ({describe_rule(self.hit_rule, self.tolerance)}); tolerance {self.tolerance:g} px"

    def as_dict(self) -> dict:
        """JSON form: ``{"hit_rule", "tolerance", "main_key", "description"}``."""
        return {"hit_rule": self.hit_rule, "tolerance": self.tolerance, "main_key": self.key,
                "description": self.describe()}


def pointing_accuracy(hits: np.ndarray) -> float:
    """Percentage of True in ``hits`` (NaN when empty)."""
    return 100.0 * float(np.count_nonzero(hits)) / len(hits) if len(hits) else float("nan")


def score_points(points, boxes, centres, tolerance: float = DEFAULT_TOLERANCE
                 ) -> Tuple[Dict[str, np.ndarray], Dict[str, np.ndarray]]:
    """``(model hits, centre hits)``, each ``{rule_key: bool [Q]}`` of every rule, for the model's
    ``points [Q, 2]`` and the baseline's ``centres [Q, 2]`` against ``boxes [Q, 4]``."""
    return all_rule_hits(points, boxes, tolerance), all_rule_hits(centres, boxes, tolerance)


def pointing_metrics(hits: Dict[str, np.ndarray], centre_hits: Dict[str, np.ndarray], protocol: PointingProtocol,
                     num_images: int) -> Dict[str, float]:
    """The result dict (module docstring) from :func:`score_points`'s hits."""
    out = {"accuracy": pointing_accuracy(hits[protocol.key]),
           "centre_accuracy": pointing_accuracy(centre_hits[protocol.key])}
    keys = rule_keys(protocol.tolerance)
    out.update({f"accuracy_{k}": pointing_accuracy(hits[k]) for k in keys})
    out.update({f"centre_accuracy_{k}": pointing_accuracy(centre_hits[k]) for k in keys})
    out.update(num_queries=len(hits[protocol.key]), num_images=int(num_images), tolerance=protocol.tolerance)
    return out
