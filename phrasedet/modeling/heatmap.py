"""Text-conditioned heatmaps and their points (paper 004, Sec. 3.3, Eq. 8-9).

For an image, ``G'`` = A . G is the linear part A [D, C] of the image projection applied as a
1x1 convolution to the pre-pooling maps G [C, h, w] (computed once per image). For a text with
unit embedding v [D], the heatmap is the sum of the maps of the k selected coordinates of v,
each weighted by |v_u|:

    H = sum_{u in K(v)} |v_u| G'[u]            K(v): the k largest v_u ("value", the released code)
                                                or the k largest |v_u| ("magnitude")

The predicted point is the heatmap's maximum, mapped to image pixels in one of three ways:

* ``"corner"``: the argmax cell (i, j) of the coarse h x w map at its top-left corner,
  (x, y) = (j W / w, i H / h), as the released ``pointing_game.py``;
* ``"centre"``: the cell's centre, ((j + 0.5) W / w, (i + 0.5) H / h);
* ``"upsampled"``: the argmax pixel (px, py) of the map bilinearly resized to H x W, at its
  centre (px + 0.5, py + 0.5).

Ties go to the first maximum in column-major order: the smallest column x, then the smallest row
y, as the released code's ``np.unravel_index(heat.T.argmax(), heat.T.shape)`` (docs/DECISIONS.md).
Points are continuous pixel coordinates of the original image (W x H), the frame of its boxes.
"""
import torch
import torch.nn.functional as F

__all__ = ["TOPK_SELECT", "POINT_MODES", "project_maps", "text_heatmaps", "heatmap_points"]

TOPK_SELECT = ("value", "magnitude")
POINT_MODES = ("corner", "centre", "upsampled")


def project_maps(maps: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Eq. 8: maps [C, h, w] (or [B, C, h, w]) and the projection weight A [D, C] -> [D, h, w]
    (or [B, D, h, w]); bias, dropout and normalization are left out, as in the paper."""
    return torch.einsum("dc,...chw->...dhw", weight, maps)


def text_heatmaps(projected: torch.Tensor, text_embeddings: torch.Tensor, k: int, select: str = "value") -> torch.Tensor:
    """Eq. 9: projected maps G' [D, h, w] and Q text embeddings [Q, D] -> heatmaps [Q, h, w].

    ``k`` larger than D uses every coordinate; ``select`` is ``"value"`` or ``"magnitude"``."""
    if select not in TOPK_SELECT:
        raise ValueError(f"heatmap top-k selection must be one of {TOPK_SELECT}, got {select!r}")
    if k < 1:
        raise ValueError(f"the heatmap needs k >= 1 coordinates, got {k}")
    keys = text_embeddings if select == "value" else text_embeddings.abs()
    index = keys.topk(min(int(k), keys.shape[1]), dim=1).indices  # [Q, k]
    weights = torch.zeros_like(text_embeddings).scatter_(1, index, text_embeddings.gather(1, index).abs())
    return torch.einsum("qd,dhw->qhw", weights, projected)


def heatmap_points(heatmaps: torch.Tensor, image_size, mode: str = "corner") -> torch.Tensor:
    """heatmaps [Q, h, w] of an image of ``image_size`` = (H, W) pixels -> points [Q, 2] as (x, y)
    in that image's pixels (see the module docstring for ``mode``)."""
    if mode not in POINT_MODES:
        raise ValueError(f"heatmap point mode must be one of {POINT_MODES}, got {mode!r}")
    height, width = float(image_size[0]), float(image_size[1])
    if mode == "upsampled":
        heatmaps = F.interpolate(heatmaps[:, None], size=(int(image_size[0]), int(image_size[1])), mode="bilinear",
                                 align_corners=False)[:, 0]
    q, h, w = heatmaps.shape
    # over the transposed map [w, h], so the first maximum is column-major (the released heat.T.argmax())
    flat = heatmaps.transpose(1, 2).reshape(q, w * h).argmax(dim=1)
    cols, rows = (flat // h).to(torch.float64), (flat % h).to(torch.float64)
    offset = 0.0 if mode == "corner" else 0.5
    return torch.stack([(cols + offset) * width / w, (rows + offset) * height / h], dim=1)
