import pytest
import torch

from phrasedet.modeling.pooling import GlobalAvgPool, GlobalMaxPool, WeldonPool, build_global_pooling

# one image, two channels, 2 x 3 positions
X = torch.tensor([[[[1.0, 5.0, 3.0], [2.0, 0.0, 4.0]],
                   [[-1.0, -2.0, 6.0], [0.5, 0.5, -3.0]]]])


def test_average_and_max():
    assert GlobalAvgPool()(X)[0].tolist() == pytest.approx([15 / 6, 1 / 6])
    assert GlobalMaxPool()(X)[0].tolist() == [5.0, 6.0]


def test_weldon_is_max_plus_min_with_k_1():
    assert WeldonPool(1, 1)(X)[0].tolist() == pytest.approx([5.0 + 0.0, 6.0 - 3.0])


def test_weldon_means_of_the_top_and_bottom_k():
    # channel 0 sorted: 0 1 2 3 4 5 -> top 2 mean 4.5, bottom 2 mean 0.5
    # channel 1 sorted: -3 -2 -1 0.5 0.5 6 -> top 2 mean 3.25, bottom 2 mean -2.5
    assert WeldonPool(2, 2)(X)[0].tolist() == pytest.approx([5.0, 0.75])
    assert WeldonPool(2, 0)(X)[0].tolist() == pytest.approx([4.5, 3.25])  # no minimum term
    assert WeldonPool(100, 100)(X)[0].tolist() == pytest.approx((2 * GlobalAvgPool()(X))[0].tolist())  # k > positions: all


def test_build_and_errors():
    assert isinstance(build_global_pooling("weldon", 15, 15), WeldonPool)
    assert build_global_pooling("weldon", 15, 15).k_max == 15
    with pytest.raises(ValueError, match="pooling must be one of"):
        build_global_pooling("gem")
    with pytest.raises(ValueError, match="k_max >= 1"):
        WeldonPool(0, 1)
