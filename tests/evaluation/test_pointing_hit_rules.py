"""Pointing-game hit rules on hand cases: edges, the tolerance boundary, the centre baseline."""
import math

import numpy as np
import pytest

from phrasedet.evaluation import (HIT_RULES, PointingProtocol, all_rule_hits, box_distances, centre_points,
                                  check_hit_rule, describe_rule, inclusive_hits, point_hits, pointing_accuracy,
                                  query_centre_points, rule_key, rule_keys, strict_hits, tolerance_hits)

BOX = [10.0, 20.0, 50.0, 60.0]


def _hits(points, box=BOX, tolerance=15.0):
    points = np.asarray(points, dtype=float).reshape(-1, 2)
    return all_rule_hits(points, np.tile(box, (len(points), 1)), tolerance)


def test_a_point_on_an_edge_misses_strictly_and_hits_inclusively():
    on_edges = [(10.0, 40.0), (50.0, 40.0), (30.0, 20.0), (30.0, 60.0), (10.0, 20.0), (50.0, 60.0)]
    hits = _hits(on_edges)
    assert not hits["strict"].any()
    assert hits["inclusive"].all() and hits["tol15"].all()
    inside = _hits([(30.0, 40.0), (10.000001, 59.999999)])
    assert all(h.all() for h in inside.values())


def test_tolerance_is_the_distance_to_the_box_at_most_tolerance():
    # right of the box by exactly 15 px, and by 15.01; diagonal from the corner (50, 60) by (9, 12): 15 px
    points = [(65.0, 40.0), (65.01, 40.0), (59.0, 72.0), (59.0, 72.01), (30.0, 4.99), (30.0, 5.0)]
    hits = _hits(points)
    assert hits["tol15"].tolist() == [True, False, True, False, False, True]
    assert not hits["strict"].any() and not hits["inclusive"].any()
    assert box_distances(points, np.tile(BOX, (6, 1)))[[0, 2, 5]].tolist() == [15.0, 15.0, 15.0]
    assert tolerance_hits([(65.0, 40.0)], [BOX], tolerance=14.99).tolist() == [False]
    assert tolerance_hits([(50.0, 40.0)], [BOX], tolerance=0).tolist() == [True]  # tolerance 0 == inclusive


def test_one_rule_at_a_time_and_nan_points_miss():
    points = np.array([[50.0, 40.0], [np.nan, 40.0], [30.0, np.nan]])
    boxes = np.tile(BOX, (3, 1))
    assert strict_hits(points, boxes).tolist() == [False, False, False]
    assert inclusive_hits(points, boxes).tolist() == [True, False, False]
    assert point_hits(points, boxes, "tolerance", 15).tolist() == [True, False, False]
    assert point_hits(points, boxes).tolist() == strict_hits(points, boxes).tolist()  # strict is the default


def test_rule_names_and_descriptions():
    assert HIT_RULES == ("strict", "inclusive", "tolerance")
    assert rule_keys(15.0) == ("strict", "inclusive", "tol15") and rule_key("tolerance", 7.5) == "tol7.5"
    assert describe_rule("strict") == "x1 < x < x2 and y1 < y < y2"
    assert describe_rule("inclusive") == "x1 <= x <= x2 and y1 <= y <= y2"
    assert describe_rule("tolerance", 15) == "distance(point, box) <= 15 px"
    protocol = PointingProtocol.checked("tolerance", 10)
    assert protocol.key == "tol10" and protocol.tolerance == 10.0
    assert protocol.describe() == "hit rule tol10 (distance(point, box) <= 10 px); tolerance 10 px"


@pytest.mark.parametrize("rule, tolerance, message", [
    ("inside", 15, "hit_rule must be one of ('strict', 'inclusive', 'tolerance'), got 'inside'"),
    ("strict", -1, "tolerance must be a finite number of pixels >= 0, got -1"),
    ("tolerance", math.inf, "tolerance must be a finite number of pixels >= 0, got inf"),
    ("tolerance", "15", "tolerance must be a finite number of pixels >= 0, got '15'"),
])
def test_bad_rules_and_tolerances(rule, tolerance, message):
    with pytest.raises(ValueError, match=r"^" + message.replace("(", r"\(").replace(")", r"\)") + "$"):
        check_hit_rule(rule, tolerance)


@pytest.mark.parametrize("points, boxes, message", [
    ([1.0, 2.0, 3.0], [BOX], "points must have shape [N, 2], got (3,)"),
    ([[1.0, 2.0, 3.0]], [BOX], "points must have shape [N, 2], got (1, 3)"),  # 2-D, but 3 columns
    ([(1.0, 2.0)], BOX, "boxes must have shape [N, 4], got (4,)"),
    ([(1.0, 2.0)], [BOX[:3]], "boxes must have shape [N, 4], got (1, 3)"),
    ([(1.0, 2.0), (3.0, 4.0)], [BOX], "2 points for 1 boxes: one point per box is needed"),
])
@pytest.mark.parametrize("rule", [strict_hits, inclusive_hits, tolerance_hits, box_distances])
def test_shape_errors(rule, points, boxes, message):
    """Every rule checks points [N, 2] against boxes [N, 4] and names the bad argument."""
    with pytest.raises(ValueError) as e:
        rule(points, boxes)
    assert str(e.value) == message


def test_integer_coordinates_are_computed_in_float64():
    """Points and boxes given as Python ints (as read from JSON) are converted to float64: the
    distances from (0, 0) and from (13, 14) to the box [3, 4, 10, 10] are both 5 (dx 3, dy 4)."""
    boxes = [[3, 4, 10, 10]] * 3
    distances = box_distances([[0, 0], [13, 14], [5, 5]], boxes)
    assert distances.dtype == np.float64 and distances.tolist() == [5.0, 5.0, 0.0]
    assert tolerance_hits([[0, 0], [13, 15]], boxes[:2], tolerance=5).tolist() == [True, False]


def test_centre_baseline_on_a_hand_case():
    # image 0: 200 wide, 100 high -> centre (100, 50); image 1: 80 x 40 -> (40, 20)
    sizes = np.array([[100, 200], [40, 80]])
    assert centre_points(sizes).tolist() == [[100.0, 50.0], [40.0, 20.0]]
    centres = query_centre_points(sizes, [0, 0, 1, 1])
    boxes = np.array([[90, 40, 110, 60], [150, 20, 190, 50], [0, 0, 40, 40], [0, 0, 40, 5]], dtype=float)
    hits = all_rule_hits(centres, boxes, 15.0)
    # inside / 50 px away / on the right edge / 15 px below the box
    assert hits["strict"].tolist() == [True, False, False, False]
    assert hits["inclusive"].tolist() == [True, False, True, False]
    assert hits["tol15"].tolist() == [True, False, True, True]


@pytest.mark.parametrize("sizes, shape", [([100, 200], "(2,)"), ([[100, 200, 3]], "(1, 3)")])
def test_image_sizes_must_be_height_width_pairs(sizes, shape):
    with pytest.raises(ValueError) as e:
        centre_points(sizes)
    assert str(e.value) == f"image sizes must have shape [N, 2] as (height, width), got {shape}"


def test_centres_are_float64_in_column_major_order():
    """Documented layout: float64 centres whatever the sizes' dtype, and query centres with
    contiguous x and y columns (what the hit rules read); no query gives an empty [0, 2]."""
    sizes = np.array([[3, 5], [40, 80]], np.float32)
    centres = centre_points(sizes)
    assert centres.dtype == np.float64 and centres.tolist() == [[2.5, 1.5], [40.0, 20.0]]
    per_query = query_centre_points(sizes, [1, 0, 1])
    assert per_query.dtype == np.float64 and per_query.flags.f_contiguous
    assert per_query.tolist() == [[40.0, 20.0], [2.5, 1.5], [40.0, 20.0]]
    assert query_centre_points(sizes, []).shape == (0, 2)


def test_accuracy_is_a_percentage_and_nan_without_queries():
    assert pointing_accuracy(np.array([True, False, False, True])) == 50.0
    assert math.isnan(pointing_accuracy(np.array([], dtype=bool)))


def test_the_default_protocol_is_strict_at_15_px():
    assert PointingProtocol.checked() == ("strict", 15.0)
    assert PointingProtocol.checked().key == "strict"
