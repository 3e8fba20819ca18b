"""Points of saved heatmaps, each in its own image's pixels (``phrasedet.modeling.heatmap``)."""
import numpy as np
import torch

from phrasedet.modeling.heatmap import POINT_MODES, heatmap_points

__all__ = ["points_of_heatmaps"]

# Upsampled maps are resized to the image: at most this many upsampled pixels at a time.
_UPSAMPLED_PIXELS = 1 << 24
_ROWS = 1 << 16


def _chunk_rows(mode: str, height: int, width: int) -> int:
    return max(1, _UPSAMPLED_PIXELS // (height * width)) if mode == "upsampled" else _ROWS


def points_of_heatmaps(heatmaps, image_sizes, mode: str = "corner") -> np.ndarray:
    """``heatmaps [Q, h, w]`` (numpy or torch) and the ``(height, width)`` of each map's image
    ``image_sizes [Q, 2]`` -> points float64 [Q, 2] as (x, y) in those images' pixels, by
    :func:`phrasedet.modeling.heatmap.heatmap_points` (``mode``: corner, centre or upsampled).
    Maps are grouped by image size and taken in chunks (bounded memory for ``"upsampled"``)."""
    if mode not in POINT_MODES:
        raise ValueError(f"heatmap point mode must be one of {POINT_MODES}, got {mode!r}")
    maps = torch.as_tensor(heatmaps)
    sizes = np.asarray(image_sizes).reshape(-1, 2)
    if maps.dim() != 3 or len(sizes) != maps.shape[0]:
        raise ValueError(f"need heatmaps [Q, h, w] and one image size per map, got heatmaps {tuple(maps.shape)} "
                         f"and {len(sizes)} image sizes")
    points = np.empty((len(sizes), 2), np.float64)
    unique, group = np.unique(sizes, axis=0, return_inverse=True)
    order = np.argsort(group.reshape(-1), kind="stable")
    bounds = np.searchsorted(group.reshape(-1)[order], np.arange(len(unique) + 1))
    for g, (height, width) in enumerate(unique.tolist()):
        rows = order[bounds[g]:bounds[g + 1]]
        step = _chunk_rows(mode, int(height), int(width))
        for start in range(0, len(rows), step):
            part = torch.as_tensor(rows[start:start + step])
            points[part.numpy()] = heatmap_points(maps[part], (height, width), mode).numpy()
    return points
