"""Pointing-game hit rules: is a point (x, y) on its query's box [x1, y1, x2, y2]?

Points and boxes are in the same frame: continuous pixel coordinates of the original image
(Detectron2's XYXY_ABS; a box covering the whole image is ``[0, 0, W, H]``). Every rule is
vectorized over N (point, box) pairs, computed in float64:

* ``"strict"``: ``x1 < x < x2 and y1 < y < y2`` (the released DSVE-loc ``pointing_game.py``);
  a point on an edge misses.
* ``"inclusive"``: ``x1 <= x <= x2 and y1 <= y <= y2``; a point on an edge hits.
* ``"tolerance"``: the Euclidean distance from the point to the closed box is at most
  ``tolerance`` pixels, ``dx^2 + dy^2 <= tolerance^2`` with ``dx = max(x1 - x, 0, x - x2)`` and
  ``dy`` likewise (0 inside the box). ``tolerance = 0`` is ``"inclusive"``. This is the 15-pixel
  rule of Zhang et al.'s pointing game (excitation backprop) in continuous form. TorchRay's
  ``PointingGame`` tests the same on a pixel grid: a hit when a box pixel's integer
  coordinates lie at a distance ``< tolerance`` (strictly) from the point. So the two can differ
  only by that grid rounding and at exactly ``tolerance``.

A NaN coordinate (a query the model gave no point) misses under every rule.

Speed: each rule reads the coordinate columns ``points[:, 0]``, ``boxes[:, 2]``, ...; arrays in
column-major (Fortran) order make those contiguous, about twice as fast on large N (the split's
boxes and the evaluator's points are stored so).
"""
import math
from typing import Dict, Tuple

import numpy as np

__all__ = ["DEFAULT_TOLERANCE", "HIT_RULES", "all_rule_hits", "box_distances", "check_hit_rule", "describe_rule",
           "inclusive_hits", "point_hits", "rule_key", "rule_keys", "strict_hits", "tolerance_hits"]

HIT_RULES = ("strict", "inclusive", "tolerance")
DEFAULT_TOLERANCE = 15.0


def check_hit_rule(hit_rule: str, tolerance: float = DEFAULT_TOLERANCE) -> Tuple[str, float]:
    """``(hit_rule, tolerance as float)``; ValueError for an unknown rule or a tolerance that is
    not a finite number >= 0 (checked whatever the rule: every rule is always reported)."""
    if hit_rule not in HIT_RULES:
        raise ValueError(f"hit_rule must be one of {HIT_RULES}, got {hit_rule!r}")
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float, np.integer, np.floating)) \
            or not math.isfinite(tolerance) or tolerance < 0:
        raise ValueError(f"tolerance must be a finite number of pixels >= 0, got {tolerance!r}")
    return hit_rule, float(tolerance)


def rule_key(hit_rule: str, tolerance: float = DEFAULT_TOLERANCE) -> str:
    """Name of a rule in result keys: ``"strict"``, ``"inclusive"``, ``"tol15"``, ``"tol7.5"``."""
    hit_rule, tolerance = check_hit_rule(hit_rule, tolerance)
    return f"tol{tolerance:g}" if hit_rule == "tolerance" else hit_rule


def rule_keys(tolerance: float = DEFAULT_TOLERANCE) -> Tuple[str, ...]:
    """The keys of every rule, in :data:`HIT_RULES` order."""
    return tuple(rule_key(r, tolerance) for r in HIT_RULES)


def describe_rule(hit_rule: str, tolerance: float = DEFAULT_TOLERANCE) -> str:
    """The rule's hit test as text, e.g. ``"x1 < x < x2 and y1 < y < y2"``."""
    hit_rule, tolerance = check_hit_rule(hit_rule, tolerance)
    if hit_rule == "strict":
        return "x1 < x < x2 and y1 < y < y2"
    if hit_rule == "inclusive":
        return "x1 <= x <= x2 and y1 <= y <= y2"
    return f"distance(point, box) <= {tolerance:g} px"


def _as_array(x, name: str, shape_tail: tuple) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1 + len(shape_tail) or a.shape[1:] != shape_tail:
        raise ValueError(f"{name} must have shape [N, {', '.join(map(str, shape_tail))}], got {a.shape}")
    return a


def _pairs(points, boxes) -> Tuple[np.ndarray, np.ndarray]:
    """``(points [N, 2], boxes [N, 4])`` as float64, checked to pair up."""
    points, boxes = _as_array(points, "points", (2,)), _as_array(boxes, "boxes", (4,))
    if len(points) != len(boxes):
        raise ValueError(f"{len(points)} points for {len(boxes)} boxes: one point per box is needed")
    return points, boxes


def _inside(p: np.ndarray, b: np.ndarray, less) -> np.ndarray:
    """``less(x1, x) & less(x, x2) & less(y1, y) & less(y, y2)``, combined in place."""
    x, y = p[:, 0], p[:, 1]
    hit = less(b[:, 0], x)
    hit &= less(x, b[:, 2])
    hit &= less(b[:, 1], y)
    hit &= less(y, b[:, 3])
    return hit


def strict_hits(points, boxes) -> np.ndarray:
    """bool [N]: ``x1 < x < x2 and y1 < y < y2`` (points [N, 2] as (x, y), boxes [N, 4] xyxy)."""
    return _inside(*_pairs(points, boxes), np.less)


def inclusive_hits(points, boxes) -> np.ndarray:
    """bool [N]: ``x1 <= x <= x2 and y1 <= y <= y2``."""
    return _inside(*_pairs(points, boxes), np.less_equal)


def _axis_gap(v: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``max(low - v, v - high, 0)``: how far ``v`` lies outside ``[low, high]`` (NaN stays NaN)."""
    gap = np.subtract(low, v)
    np.maximum(gap, v - high, out=gap)
    return np.maximum(gap, 0.0, out=gap)


def _squared_box_distances(p: np.ndarray, b: np.ndarray) -> np.ndarray:
    dx, dy = _axis_gap(p[:, 0], b[:, 0], b[:, 2]), _axis_gap(p[:, 1], b[:, 1], b[:, 3])
    dx *= dx
    dy *= dy
    dx += dy
    return dx


def box_distances(points, boxes) -> np.ndarray:
    """float64 [N]: Euclidean distance from each point to its closed box (0 inside or on an edge)."""
    return np.sqrt(_squared_box_distances(*_pairs(points, boxes)))


def tolerance_hits(points, boxes, tolerance: float = DEFAULT_TOLERANCE) -> np.ndarray:
    """bool [N]: ``dx^2 + dy^2 <= tolerance^2`` (module docstring), the point within ``tolerance``
    pixels of the box."""
    _, tolerance = check_hit_rule("tolerance", tolerance)
    return _squared_box_distances(*_pairs(points, boxes)) <= tolerance * tolerance


def point_hits(points, boxes, hit_rule: str = "strict", tolerance: float = DEFAULT_TOLERANCE) -> np.ndarray:
    """bool [N]: the hits of one rule of :data:`HIT_RULES`."""
    hit_rule, tolerance = check_hit_rule(hit_rule, tolerance)
    if hit_rule == "tolerance":
        return tolerance_hits(points, boxes, tolerance)
    return strict_hits(points, boxes) if hit_rule == "strict" else inclusive_hits(points, boxes)


def all_rule_hits(points, boxes, tolerance: float = DEFAULT_TOLERANCE) -> Dict[str, np.ndarray]:
    """``{rule_key: bool [N]}`` for every rule (:func:`rule_keys` order); arrays are converted once."""
    points, boxes = _pairs(points, boxes)
    return {rule_key(r, tolerance): point_hits(points, boxes, r, tolerance) for r in HIT_RULES}
