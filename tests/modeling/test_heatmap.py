"""Paper 004's heatmaps (Eq. 8-9) and their points, against hand computations."""
import numpy as np
import pytest
import torch

from phrasedet.modeling.heatmap import heatmap_points, project_maps, text_heatmaps

G = torch.arange(12, dtype=torch.float64).reshape(3, 2, 2)  # 3 projected maps of 2 x 2
V = torch.tensor([[0.6, -0.8, 0.0]], dtype=torch.float64)


@pytest.mark.parametrize("k, select, expected", [
    (1, "value", 0.6 * G[0]),                      # the largest entry: 0.6
    (1, "magnitude", 0.8 * G[1]),                  # the largest |entry|: -0.8, weighted by 0.8
    (2, "value", 0.6 * G[0] + 0.0 * G[2]),         # 0.6 and 0.0 (not -0.8)
    (2, "magnitude", 0.6 * G[0] + 0.8 * G[1]),
    (5, "value", 0.6 * G[0] + 0.8 * G[1]),         # k > D: every coordinate, weights |v|
])
def test_text_heatmap_sums_the_selected_maps_weighted_by_magnitude(k, select, expected):
    assert torch.allclose(text_heatmaps(G, V, k, select)[0], expected)


def test_a_text_that_selects_one_map_points_at_its_maximum():
    torch.manual_seed(0)
    maps = torch.randn(8, 5, 7)
    for u in range(8):
        v = torch.zeros(1, 8)
        v[0, u] = 1.0
        heat = text_heatmaps(maps, v, 1)
        row, col = divmod(int(maps[u].argmax()), 7)
        point = heatmap_points(heat, (50, 70), "centre")[0]
        assert point.tolist() == [(col + 0.5) * 10, (row + 0.5) * 10]


def test_project_maps_is_the_projection_as_a_1x1_convolution():
    torch.manual_seed(0)
    weight, maps = torch.randn(4, 3), torch.randn(2, 3, 5, 6)
    conv = torch.nn.functional.conv2d(maps, weight[:, :, None, None])
    assert torch.allclose(project_maps(maps, weight), conv, atol=1e-6)
    assert torch.allclose(project_maps(maps[0], weight), conv[0], atol=1e-6)


def _peak_map():
    heat = torch.zeros(1, 2, 4)
    heat[0, 1, 2], heat[0, 1, 1] = 1.0, 0.5  # the maximum at row 1, column 2; its left neighbour at half
    return heat


@pytest.mark.parametrize("mode, expected", [
    ("corner", [2 * 200 / 4, 1 * 100 / 2]),          # the cell's top-left corner, as the released code
    ("centre", [2.5 * 200 / 4, 1.5 * 100 / 2]),
    # bilinear x50: pixel column 124 samples source column 1.99 (0.01 x 0.5 + 0.99 x 1), the largest;
    # rows 75..99 all sample row 1 (clamped), the first wins; the point is the pixel's centre
    ("upsampled", [124.5, 75.5]),
])
def test_heatmap_points_by_mode(mode, expected):
    assert heatmap_points(_peak_map(), (100, 200), mode)[0].tolist() == pytest.approx(expected)


def test_ties_go_to_the_first_maximum_in_column_major_order():
    heat = torch.ones(1, 3, 3)
    assert heatmap_points(heat, (30, 30), "corner")[0].tolist() == [0.0, 0.0]
    heat = torch.zeros(1, 3, 4)  # maxima at (row 0, col 3) and (row 2, col 1): the smaller column wins
    heat[0, 0, 3] = heat[0, 2, 1] = 2.0
    assert heatmap_points(heat, (30, 40), "corner")[0].tolist() == [10.0, 20.0]  # x = 1 * 40 / 4, y = 2 * 30 / 3
    # as the released pointing game: np.unravel_index(heat.T.argmax(), heat.T.shape) = (x, y) = (1, 2)
    assert np.unravel_index(heat[0].numpy().T.argmax(), heat[0].numpy().T.shape) == (1, 2)


@pytest.mark.parametrize("call, message", [
    (lambda: text_heatmaps(G, V, 1, "abs"), "top-k selection must be one of"),
    (lambda: text_heatmaps(G, V, 0), "k >= 1"),
    (lambda: heatmap_points(_peak_map(), (1, 1), "middle"), "point mode must be one of"),
])
def test_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()
