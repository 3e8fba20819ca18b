"""``DSVELoc``: paper 004's semantic-visual embedding with localization (the pointing-game family).

The embedding is :class:`ImageTextEmbedding`'s, configured by ``MODEL.RETRIEVAL`` as in
``configs/pointing/``: a fully convolutional image path (backbone -> 1x1 adaptation convolution
-> WELDON pooling -> dropout -> linear projection -> L2 normalization), an SRU (or GRU) over fixed
word vectors, and the hardest-negative triplet loss. It trains on caption datasets and is scored
by the retrieval evaluator like the global models.

What it adds is localization without extra training (:mod:`..heatmap`): for a pointing-game
input (a record with ``queries``, from :class:`phrasedet.data.PointingDatasetMapper`) inference
returns, per image::

    {"points": Tensor[Q, 2] (x, y in the original image's pixels), "heatmaps": Tensor[Q, h, w]}

one row per query, in record order. :meth:`DSVELoc.heatmaps` gives the heatmaps of any texts.
"""
import torch
from detectron2.config import configurable
from detectron2.modeling import META_ARCH_REGISTRY
from torch import nn

from ..heatmap import POINT_MODES, TOPK_SELECT, heatmap_points, project_maps, text_heatmaps
from .image_text_embedding import ImageTextEmbedding

__all__ = ["DSVELoc"]


def _check(cfg) -> None:
    r, p = cfg.MODEL.RETRIEVAL, cfg.MODEL.POINTING
    if r.IMAGE_INPUT not in ("pixels", "maps"):
        raise ValueError("DSVELoc localizes in the image's maps: MODEL.RETRIEVAL.IMAGE_INPUT must be 'pixels' or "
                         f"'maps', got {r.IMAGE_INPUT!r}")
    if r.IMAGE_PROJECTION != "linear":
        raise ValueError("DSVELoc's heatmaps apply the image projection as a 1x1 convolution: "
                         f"MODEL.RETRIEVAL.IMAGE_PROJECTION must be 'linear', got {r.IMAGE_PROJECTION!r}")
    if r.SCORE != "cosine":
        raise ValueError(f"DSVELoc scores by cosine (MODEL.RETRIEVAL.SCORE 'cosine'), got {r.SCORE!r}")
    if p.TOPK_SELECT not in TOPK_SELECT:
        raise ValueError(f"MODEL.POINTING.TOPK_SELECT must be one of {TOPK_SELECT}, got {p.TOPK_SELECT!r}")
    if p.POINT_MODE not in POINT_MODES:
        raise ValueError(f"MODEL.POINTING.POINT_MODE must be one of {POINT_MODES}, got {p.POINT_MODE!r}")
    if not 1 <= p.HEATMAP_TOPK <= r.EMBED_DIM:
        raise ValueError(f"MODEL.POINTING.HEATMAP_TOPK must be in [1, EMBED_DIM = {r.EMBED_DIM}], got {p.HEATMAP_TOPK}")


@META_ARCH_REGISTRY.register()
class DSVELoc(ImageTextEmbedding):
    """See the module docstring. Args as :class:`ImageTextEmbedding`, plus:

    Args:
        heatmap_topk: k of Eq. 9.
        topk_select: ``"value"`` or ``"magnitude"``.
        point_mode: ``"corner"``, ``"centre"`` or ``"upsampled"``.
    """

    @configurable
    def __init__(self, *, heatmap_topk: int = 180, topk_select: str = "value", point_mode: str = "corner", **kwargs):
        super().__init__(**kwargs)
        if not isinstance(self.image_encoder.projection, nn.Linear):
            raise ValueError("DSVELoc needs a linear image projection (its weight makes the heatmaps)")
        self.heatmap_topk, self.topk_select, self.point_mode = int(heatmap_topk), topk_select, point_mode

    @classmethod
    def from_config(cls, cfg):
        _check(cfg)
        p = cfg.MODEL.POINTING
        return {**ImageTextEmbedding.from_config(cfg), "heatmap_topk": p.HEATMAP_TOPK, "topk_select": p.TOPK_SELECT,
                "point_mode": p.POINT_MODE}

    def projected_maps(self, batched_inputs) -> torch.Tensor:
        """Eq. 8: [B, E, h, w], the image projection's weight applied to the pre-pooling maps."""
        maps = self.image_encoder.maps(self.image_inputs(batched_inputs))
        return project_maps(maps, self.image_encoder.projection.weight)

    @torch.no_grad()
    def heatmaps(self, batched_inputs, texts_per_image) -> list:
        """Heatmaps [Q_b, h, w] of the texts ``texts_per_image[b]`` (lists of str) in each image."""
        projected = self.projected_maps(batched_inputs)
        return [text_heatmaps(g, texts, self.heatmap_topk, self.topk_select)
                for g, texts in zip(projected, self.embed_caption_lists(texts_per_image))]

    @torch.no_grad()
    def inference(self, batched_inputs):
        if not all("queries" in x for x in batched_inputs):
            if any("queries" in x for x in batched_inputs):
                raise ValueError("a batch mixes pointing-game inputs (with 'queries') and caption inputs")
            return super().inference(batched_inputs)
        maps = self.heatmaps(batched_inputs, [[q["text"] for q in x["queries"]] for x in batched_inputs])
        return [{"points": heatmap_points(h, (x["height"], x["width"]), self.point_mode).to(torch.float32), "heatmaps": h}
                for h, x in zip(maps, batched_inputs)]
