"""Pointing-game boundaries (issue 14): each edge of the box from outside, on it and inside under
every rule, the tolerance rule exactly at T on a 3-4-5 triangle off each corner, the centre of
odd-sized images, heatmap argmax ties (column-major, as the released code) and the scaling of cells to original-image pixels,
through the chunked ``points_of_heatmaps``. Definitions: docs/EVALUATION.md, "Pointing game"."""
import numpy as np
import pytest
import torch

from phrasedet.evaluation import all_rule_hits, box_distances, centre_points, points_of_heatmaps, query_centre_points
from phrasedet.evaluation.pointing import heatmaps as heatmaps_module

BOX = [10.0, 20.0, 50.0, 60.0]  # x1, y1, x2, y2


def _hits(points, tolerance):
    points = np.asarray(points, dtype=float).reshape(-1, 2)
    return all_rule_hits(points, np.tile(BOX, (len(points), 1)), tolerance)


# ----------------------------------------------------------------------------- the four edges
# (point, strict, inclusive, tol0, tol0.5): each point crosses ONE edge only (the other coordinate
# is mid-box), 0.5 px outside, on it, 0.5 px inside. tol0 is inclusive; tol0.5 reaches exactly
# 0.5 px out (0.5^2 <= 0.5^2).
EDGES = [
    # left edge x = x1 = 10
    ((9.5, 40.0), False, False, False, True),
    ((10.0, 40.0), False, True, True, True),
    ((10.5, 40.0), True, True, True, True),
    # right edge x = x2 = 50
    ((50.5, 40.0), False, False, False, True),
    ((50.0, 40.0), False, True, True, True),
    ((49.5, 40.0), True, True, True, True),
    # top edge y = y1 = 20
    ((30.0, 19.5), False, False, False, True),
    ((30.0, 20.0), False, True, True, True),
    ((30.0, 20.5), True, True, True, True),
    # bottom edge y = y2 = 60
    ((30.0, 60.5), False, False, False, True),
    ((30.0, 60.0), False, True, True, True),
    ((30.0, 59.5), True, True, True, True),
]


@pytest.mark.parametrize("point, strict, inclusive, tol0, tol_half", EDGES)
def test_each_edge_from_outside_on_it_and_inside(point, strict, inclusive, tol0, tol_half):
    hits = {k: v.tolist() for k, v in _hits([point], 0.0).items()}
    assert hits == {"strict": [strict], "inclusive": [inclusive], "tol0": [tol0]}
    assert _hits([point], 0.5)["tol0.5"].tolist() == [tol_half]


@pytest.mark.parametrize("corner", [(10.0, 20.0), (50.0, 20.0), (10.0, 60.0), (50.0, 60.0)])
def test_every_corner_is_an_inclusive_hit_and_a_strict_miss(corner):
    x, y = corner
    hits = _hits([corner, (x + np.sign(30 - x) * 0.5, y + np.sign(40 - y) * 0.5),  # 0.5 px inside, diagonally
                  (x - np.sign(30 - x) * 0.5, y)], 0.0)  # 0.5 px outside along x
    assert hits["strict"].tolist() == [False, True, False]
    assert hits["inclusive"].tolist() == hits["tol0"].tolist() == [True, True, False]


# ----------------------------------------------------------------------------- tolerance at exactly T
# 3-4-5 triangles off each corner: (dx, dy) = (3, 4) or (4, 3), distance exactly 5 (9 + 16 = 25
# in float64). Moving 0.01 px further or nearer along x crosses the circle: dx 3.01 -> 9.0601 + 16
# > 25, dx 2.99 -> 8.9401 + 16 < 25 (and likewise for dx 4 -> 4.01 / 3.99 with dy 3).
CORNERS_345 = [
    # (point at distance 5, the unit step AWAY from the box along x)
    ((7.0, 16.0), -1.0),   # top-left (10, 20): dx 3, dy 4
    ((53.0, 16.0), 1.0),   # top-right (50, 20): dx 3, dy 4
    ((6.0, 63.0), -1.0),   # bottom-left (10, 60): dx 4, dy 3
    ((54.0, 63.0), 1.0),   # bottom-right (50, 60): dx 4, dy 3
]


@pytest.mark.parametrize("point, away", CORNERS_345)
def test_tolerance_5_on_a_3_4_5_triangle_off_each_corner(point, away):
    x, y = point
    points = [(x, y), (x + 0.01 * away, y), (x - 0.01 * away, y)]  # at 5, just outside, just inside
    assert box_distances(points[:1], [BOX]).tolist() == [5.0]
    hits = _hits(points, 5.0)
    assert hits["tol5"].tolist() == [True, False, True]  # dx^2 + dy^2 <= T^2: exactly T is a hit
    # an L1 distance (7) or a rule on one axis only would decide otherwise; the box rules all miss
    assert not hits["strict"].any() and not hits["inclusive"].any()
    # the same point at tolerance 4.99 misses, at 5.01 hits
    assert _hits(points[:1], 4.99)["tol4.99"].tolist() == [False]
    assert _hits(points[:1], 5.01)["tol5.01"].tolist() == [True]


def test_tolerance_exactly_t_straight_out_of_each_edge():
    # 5 px left, right, above and below the box, each with the other coordinate mid-box: hits at
    # T = 5, misses at T = 4.99
    points = [(5.0, 40.0), (55.0, 40.0), (30.0, 15.0), (30.0, 65.0)]
    assert _hits(points, 5.0)["tol5"].tolist() == [True] * 4
    assert _hits(points, 4.99)["tol4.99"].tolist() == [False] * 4


# ----------------------------------------------------------------------------- the centre baseline
def test_the_centre_of_odd_and_even_sized_images_is_half_the_size_in_continuous_pixels():
    # (height, width): 3 x 5 -> (x, y) = (2.5, 1.5), not the pixel (2, 1); 4 x 6 -> (3, 2); 1 x 1 -> (0.5, 0.5)
    sizes = np.array([[3, 5], [4, 6], [1, 1]])
    assert centre_points(sizes).tolist() == [[2.5, 1.5], [3.0, 2.0], [0.5, 0.5]]
    assert query_centre_points(sizes, [2, 0, 0]).tolist() == [[0.5, 0.5], [2.5, 1.5], [2.5, 1.5]]


def test_the_centre_of_an_odd_sized_image_on_and_off_a_box_edge():
    # image 3 x 5, centre (2.5, 1.5). Box A has its left edge exactly at x = 2.5: strict miss,
    # inclusive hit. Box B ends at x = 2 (the integer centre pixel's x): the centre is 0.5 px
    # right of it, a miss for both rules and a hit at tolerance 0.5.
    centres = query_centre_points([[3, 5]], [0, 0])
    boxes = np.array([[2.5, 0.0, 5.0, 3.0], [0.0, 0.0, 2.0, 3.0]])
    hits = all_rule_hits(centres, boxes, 0.5)
    assert hits["strict"].tolist() == [False, False]
    assert hits["inclusive"].tolist() == [True, False]
    assert hits["tol0.5"].tolist() == [True, True]


# ----------------------------------------------------------------------------- heatmap points
def _two_way_tie():
    """A 2 x 3 map whose maximum 1.0 is at (row 0, col 2) and at (row 1, col 0): column-major order
    (the released DSVE-loc ``heat.T.argmax()``: smallest column first) meets (1, 0) first (index 1
    of the transposed map, against 4); row-major order would give (0, 2)."""
    heat = np.zeros((1, 2, 3), np.float32)
    heat[0, 0, 2] = heat[0, 1, 0] = 1.0
    return heat


@pytest.mark.parametrize("mode, expected", [
    # image 20 x 30 (H x W), cells of 10 x 10 px: corner of (row 1, col 0) = (0 x 30 / 3, 1 x 20 / 2)
    # = (0, 10); its centre (0.5 x 10, 1.5 x 10) = (5, 15); row-major (0, 2) would give (20, 0) and (25, 5)
    ("corner", [0.0, 10.0]),
    ("centre", [5.0, 15.0]),
])
def test_a_heatmap_tie_goes_to_the_first_maximum_in_column_major_order_as_the_released_code(mode, expected):
    assert points_of_heatmaps(_two_way_tie(), [[20, 30]], mode).tolist() == [expected]
    assert points_of_heatmaps(torch.from_numpy(_two_way_tie()), [[20, 30]], mode).tolist() == [expected]


def test_an_upsampled_constant_map_points_at_the_first_pixel_centre():
    # every pixel of the 20 x 30 resize ties (bilinear of zeros is exactly zero): the first one,
    # pixel (0, 0), at its centre (0.5, 0.5) -- the last would be (29.5, 19.5)
    assert points_of_heatmaps(np.zeros((1, 2, 3), np.float32), [[20, 30]], "upsampled").tolist() == [[0.5, 0.5]]


def _peaks():
    """5 maps of 2 x 3, one peak each, for images of two sizes (H, W) in alternation."""
    cells = [(0, 1), (1, 2), (1, 0), (0, 2), (1, 1)]
    sizes = [[20, 30], [10, 60], [20, 30], [10, 60], [20, 30]]
    heat = np.zeros((5, 2, 3), np.float32)
    for n, (i, j) in enumerate(cells):
        heat[n, i, j] = 1.0
    return heat, sizes


# cell (i, j) of a 2 x 3 map in an H x W image: corner (j W / 3, i H / 2), centre ((j + .5) W / 3, (i + .5) H / 2)
# map 0 (0, 1) in 20 x 30: (10, 0) / (15, 5);   map 1 (1, 2) in 10 x 60: (40, 5) / (50, 7.5)
# map 2 (1, 0) in 20 x 30: (0, 10) / (5, 15);   map 3 (0, 2) in 10 x 60: (40, 0) / (50, 2.5)
# map 4 (1, 1) in 20 x 30: (10, 10) / (15, 15): the last cell's corner is (w - 1) W / w, never W
CORNER = [[10.0, 0.0], [40.0, 5.0], [0.0, 10.0], [40.0, 0.0], [10.0, 10.0]]
CENTRE = [[15.0, 5.0], [50.0, 7.5], [5.0, 15.0], [50.0, 2.5], [15.0, 15.0]]


@pytest.mark.parametrize("rows_per_chunk", [1, 2, 3, 1 << 16])
def test_cells_scale_to_each_maps_own_image_whatever_the_chunking(monkeypatch, rows_per_chunk):
    # images of one size are taken rows_per_chunk maps at a time: with 2, the three 20 x 30 maps
    # (rows 0, 2, 4) are split 2 + 1 across a chunk boundary
    monkeypatch.setattr(heatmaps_module, "_ROWS", rows_per_chunk)
    heat, sizes = _peaks()
    assert points_of_heatmaps(heat, sizes, "corner").tolist() == CORNER
    assert points_of_heatmaps(heat, sizes, "centre").tolist() == CENTRE


# Upsampled by bilinear resizing (align_corners=False): output pixel p of an axis scaled s times
# samples source u = (p + 0.5) / s - 0.5, clamped to [0, n - 1]. For a one-hot cell c:
# * c = 0 (first cell): every p with u <= 0 reads 1.0, the first is p = 0 -> 0.5;
# * c = n - 1 (last cell): the first p with u >= n - 1 reads 1.0: 2 x 3 maps, s = 10 (20 x 30):
#   rows p >= 14.5 -> 15 -> 15.5; s = 20 (W 60): columns p >= 49.5 -> 50 -> 50.5; s = 5 (H 10): rows
#   p >= 7 -> 7.5;
# * c = 1 of 3 columns, s = 10: p = 14 (u 0.95) and p = 15 (u 1.05) both read 0.95, the first
#   wins -> 14.5.
UPSAMPLED = [[14.5, 0.5], [50.5, 7.5], [0.5, 15.5], [50.5, 0.5], [14.5, 15.5]]


@pytest.mark.parametrize("maps_per_chunk", [1, 2, 5])
def test_upsampled_points_by_hand_across_chunk_boundaries(monkeypatch, maps_per_chunk):
    # upsampled chunks hold _UPSAMPLED_PIXELS // (H W) maps of 600-pixel images: 1200 -> 2 maps
    monkeypatch.setattr(heatmaps_module, "_UPSAMPLED_PIXELS", 600 * maps_per_chunk)
    heat, sizes = _peaks()
    assert points_of_heatmaps(heat, sizes, "upsampled").tolist() == UPSAMPLED


def test_corner_is_the_default_point_mode():
    heat, sizes = _peaks()
    assert points_of_heatmaps(heat, sizes).tolist() == CORNER


@pytest.mark.parametrize("mode, pixels, calls", [
    # upsampled: _UPSAMPLED_PIXELS // (H W) maps of 600-pixel images per call: 1200 -> 2 maps, the
    # three 20 x 30 maps split 2 + 1 (sizes are grouped in sorted order: 10 x 60 first)
    ("upsampled", 1200, [((10, 60), 2), ((20, 30), 2), ((20, 30), 1)]),
    # an image larger than the bound still goes one map at a time
    ("upsampled", 500, [((10, 60), 1)] * 2 + [((20, 30), 1)] * 3),
    # corner and centre are not resized: one call per image size (_ROWS maps at most)
    ("corner", 500, [((10, 60), 2), ((20, 30), 3)]),
    ("centre", 1200, [((10, 60), 2), ((20, 30), 3)]),
])
def test_maps_are_taken_in_bounded_chunks_per_image_size(monkeypatch, mode, pixels, calls):
    """The memory bound of points_of_heatmaps: each call of heatmap_points gets maps of one image
    size, at most _UPSAMPLED_PIXELS upsampled pixels (and at least one map) in upsampled mode."""
    seen, heatmap_points = [], heatmaps_module.heatmap_points

    def recording(maps, size, point_mode):
        seen.append((tuple(int(v) for v in size), len(maps)))
        return heatmap_points(maps, size, point_mode)

    monkeypatch.setattr(heatmaps_module, "heatmap_points", recording)
    monkeypatch.setattr(heatmaps_module, "_UPSAMPLED_PIXELS", pixels)
    heat, sizes = _peaks()
    expected = {"upsampled": UPSAMPLED, "corner": CORNER, "centre": CENTRE}[mode]
    assert points_of_heatmaps(heat, sizes, mode).tolist() == expected
    assert seen == calls


@pytest.mark.parametrize("heat, sizes, mode, message", [
    (np.zeros((1, 2, 3)), [[20, 30]], "middle",
     "heatmap point mode must be one of ('corner', 'centre', 'upsampled'), got 'middle'"),
    # one size per map but the maps are not [Q, h, w]
    (np.zeros((2, 3)), [[20, 30], [20, 30]], "corner",
     "need heatmaps [Q, h, w] and one image size per map, got heatmaps (2, 3) and 2 image sizes"),
    (np.zeros((2, 2, 3)), [[20, 30]], "corner",
     "need heatmaps [Q, h, w] and one image size per map, got heatmaps (2, 2, 3) and 1 image sizes"),
])
def test_bad_heatmaps_and_modes(heat, sizes, mode, message):
    with pytest.raises(ValueError) as e:
        points_of_heatmaps(heat, sizes, mode)
    assert str(e.value) == message


def test_a_column_shaped_unique_inverse_is_flattened(monkeypatch):
    """NumPy 2.0.0 returned ``np.unique(..., axis=0, return_inverse=True)``'s inverse as a column
    [Q, 1] (fixed in 2.0.1); the maps must still be grouped by image size."""
    unique = np.unique

    def column_inverse(*args, **kwargs):
        values, inverse = unique(*args, **kwargs)
        return values, inverse.reshape(-1, 1)

    monkeypatch.setattr(np, "unique", column_inverse)
    heat, sizes = _peaks()
    assert points_of_heatmaps(heat, sizes, "corner").tolist() == CORNER
