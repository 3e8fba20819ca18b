"""Heatmap pictures: the drawing, and tools/evaluation/visualize_heatmap.py on a built-in image with an
untrained DSVE-loc (its points, its pictures, its errors)."""
import os
import sys

import numpy as np
import pytest
from PIL import Image

from phrasedet.utils import draw_heatmap

from .test_visualize import _load_tool

ROOT = os.path.join(os.path.dirname(__file__), "..")
CONFIG = os.path.join(ROOT, "configs", "pointing", "dsve_loc.yaml")
SMALL = ["MODEL.RETRIEVAL.EMBED_DIM", "16", "MODEL.RETRIEVAL.ADAPTATION_DIM", "8", "MODEL.RETRIEVAL.RNN.NUM_LAYERS", "1",
         "MODEL.POINTING.HEATMAP_TOPK", "2", "PHRASEDET.TEXT.WORD2VEC_EPOCHS", "1"]


def test_draw_heatmap_marks_the_point_and_upscales():
    image = np.full((10, 20, 3), 128, np.uint8)
    heat = np.zeros((2, 4))
    heat[1, 3] = 1.0
    out = draw_heatmap(image, heat, point=(15.0, 7.5), box=[1, 1, 9, 9], text="a", min_size=40)
    assert out.shape == (40, 80, 3)  # factor 4
    r, g, b = (int(v) for v in out[30, 60])  # the point, x4: a red disc
    assert r > 200 and g < 100 and b < 100


def test_tool_draws_one_picture_per_text_with_its_point(builtin_root, tmp_path, capsys):
    image = sorted(os.listdir(os.path.join(builtin_root, "flickr30k-images")))[0]
    path = os.path.join(builtin_root, "flickr30k-images", image)
    code = _load_tool("visualize_heatmap").main(["--config-file", CONFIG, "--image", path, "--texts", "a red cross",
                                                 "the caracal", "--output-dir", str(tmp_path), *SMALL])
    out = capsys.readouterr().out
    assert code == 0 and sorted(os.listdir(tmp_path)) == ["heatmap_0.png", "heatmap_1.png"]
    assert "'a red cross': point (" in out and "heatmap 16x16" in out  # 128 x 128 at the built-in CNN's res4 (stride 8): 16 x 16 cells
    assert Image.open(tmp_path / "heatmap_0.png").size[0] >= 384


def test_tool_errors(builtin_root, tmp_path):
    tool = _load_tool("visualize_heatmap")
    with pytest.raises(SystemExit):
        tool.main(["--config-file", CONFIG, "--image", str(tmp_path / "missing.jpg"), "--texts", "a"])
    with pytest.raises(SystemExit):
        tool.main(["--config-file", CONFIG, "--image", CONFIG, "--texts"])
