"""IoU of axis-aligned boxes in Detectron2's continuous ``[x1, y1, x2, y2]`` convention.

Areas are ``(x2 - x1) * (y2 - y1)`` with no ``+ 1`` (docs/DATA.md: ``[0, 0, W, H]`` is the whole
image). A box with ``x2 <= x1`` or ``y2 <= y1`` has area 0; a NaN coordinate gives IoU NaN, which
compares false with any threshold (a missing detection never matches).
"""
import numpy as np

__all__ = ["paired_iou", "pairwise_iou"]


def paired_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of corresponding boxes.

    Parameters
    ----------
    a, b : array [..., 4]
        Boxes, broadcastable against each other.

    Returns
    -------
    array [...], float64
        ``|a ∩ b| / |a ∪ b|``; 0 where the union is empty.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    # infinite coordinates make inf - inf (NaN, returned as such) without a warning; no division
    # by zero happens (a non-positive union is divided as 1)
    with np.errstate(invalid="ignore"):
        iw = np.minimum(a[..., 2], b[..., 2]) - np.maximum(a[..., 0], b[..., 0])
        ih = np.minimum(a[..., 3], b[..., 3]) - np.maximum(a[..., 1], b[..., 1])
        inter = np.clip(iw, 0, None) * np.clip(ih, 0, None)
        area_a = np.clip(a[..., 2] - a[..., 0], 0, None) * np.clip(a[..., 3] - a[..., 1], 0, None)
        area_b = np.clip(b[..., 2] - b[..., 0], 0, None) * np.clip(b[..., 3] - b[..., 1], 0, None)
        union = area_a + area_b - inter
        return np.where(union > 0, inter / np.where(union > 0, union, 1.0), np.where(np.isnan(union), np.nan, 0.0))


def pairwise_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU matrix ``[N, M]`` of boxes ``a [N, 4]`` and ``b [M, 4]`` (float64, as
    :func:`paired_iou`, which casts); a single box ``[4]`` is one row, an empty list none."""
    a = np.reshape(a, (-1, 4))
    b = np.reshape(b, (-1, 4))
    return paired_iou(a[:, None, :], b[None, :, :])
