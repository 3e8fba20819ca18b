"""Pictures of DSVE-loc's text heatmaps: the image, the heatmap resized onto it, the predicted
point (a red disc) and the ground-truth box (green), titled with the text.

- :func:`draw_heatmap`: one picture from arrays.
- :func:`pointing_heatmaps`: heatmaps and points of any texts in one image, from a ``DSVELoc``.
- :func:`save_pointing_visualizations`: PNGs of the first queries of a pointing split (saved
  after evaluation by ``tools/train_net.py``; ``tools/evaluation/visualize_heatmap.py`` draws any image and texts).
"""
import os
from typing import List, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from detectron2.data import DatasetCatalog
from detectron2.data import detection_utils as utils
from detectron2.utils.visualizer import Visualizer
from matplotlib import colormaps
from PIL import Image

from phrasedet.data import PointingDatasetMapper

from .visualize import upscale_factor

__all__ = ["draw_heatmap", "pointing_heatmaps", "save_pointing_visualizations"]


def _overlay(image_rgb: np.ndarray, heatmap: np.ndarray, alpha: float) -> np.ndarray:
    h, w = image_rgb.shape[:2]
    resized = F.interpolate(torch.as_tensor(heatmap, dtype=torch.float32)[None, None], size=(h, w), mode="bilinear",
                            align_corners=False)[0, 0].numpy()
    span = float(resized.max() - resized.min())
    norm = (resized - resized.min()) / span if span > 0 else np.zeros_like(resized)
    colours = colormaps["jet"](norm)[..., :3] * 255.0
    return (image_rgb * (1 - alpha) + colours * alpha).astype(np.uint8)


def draw_heatmap(image_rgb: np.ndarray, heatmap: np.ndarray, point=None, box=None, text: str = "",
                 alpha: float = 0.5, min_size: int = 384) -> np.ndarray:
    """image [H, W, 3] uint8 RGB, heatmap [h, w], point (x, y) and box [x1, y1, x2, y2] in the
    image's pixels (either may be None) -> RGB picture, upscaled by an integer factor so its
    shorter side is at least ``min_size``."""
    factor = upscale_factor(*image_rgb.shape[:2], min_size)
    big = np.kron(image_rgb, np.ones((factor, factor, 1), dtype=np.uint8)) if factor > 1 else image_rgb
    vis = Visualizer(_overlay(big, np.asarray(heatmap), alpha))
    if box is not None:
        vis.draw_box(np.asarray(box, dtype=np.float64) * factor, edge_color=(0.1, 0.9, 0.1))
    if point is not None:
        x, y = (float(v) * factor for v in point)
        vis.draw_circle((x, y), color=(1.0, 0.1, 0.1), radius=max(3, factor * 2))
    if text:
        vis.draw_text(text, (4, 4), color=(1.0, 1.0, 1.0), horizontal_alignment="left")
    return vis.output.get_image()


def pointing_heatmaps(model, cfg, record: dict, texts: Sequence[str], mapper: Optional[PointingDatasetMapper] = None):
    """Heatmaps [Q, h, w] and points [Q, 2] (original pixels) of ``texts`` in the image of
    ``record`` (``file_name``, ``height``, ``width``), resized as the pointing mapper does
    (``mapper``, built from ``cfg`` when not given)."""
    mapped = (mapper or PointingDatasetMapper(cfg))({**record, "queries": [{"text": t} for t in texts]})
    was_training = model.training
    model.eval()
    try:
        out = model([mapped])[0]
    finally:
        model.train(was_training)
    return out["heatmaps"].cpu().numpy(), out["points"].cpu().numpy()


def save_pointing_visualizations(cfg, model, dataset_name: str, output_dir: str, num_queries: int = 4,
                                 records: Optional[list] = None) -> List[str]:
    """``<output_dir>/<image_id>_<k>.png`` for the first ``num_queries`` queries of a pointing
    split (``DatasetCatalog`` order): heatmap, point and ground-truth box. Returns the paths."""
    os.makedirs(output_dir, exist_ok=True)
    paths, left, mapper = [], max(int(num_queries), 0), PointingDatasetMapper(cfg)
    for record in records if records is not None else DatasetCatalog.get(dataset_name):
        if left <= 0:
            break
        queries = record["queries"][:left]
        heatmaps, points = pointing_heatmaps(model, cfg, record, [q["text"] for q in queries], mapper)
        image = utils.convert_image_to_rgb(utils.read_image(record["file_name"], format=cfg.INPUT.FORMAT), cfg.INPUT.FORMAT)
        for k, (q, heatmap, point) in enumerate(zip(queries, heatmaps, points)):
            path = os.path.join(output_dir, f"{str(record['image_id']).replace(os.sep, '_')}_{k}.png")
            Image.fromarray(draw_heatmap(image, heatmap, point, q.get("bbox"), q["text"])).save(path)
            paths.append(path)
        left -= len(queries)
    return paths
