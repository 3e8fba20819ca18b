"""Image paths of the embedding models: pixels through a Detectron2 backbone, or precomputed features.

* :class:`PixelImageEncoder`: backbone -> one output map -> optional 1x1 "adaptation"
  convolution (paper 004) -> global pooling (average, max, WELDON) -> optional L2 normalization
  (VSE++'s code normalizes the CNN feature when it runs the CNN) -> optional dropout (paper 004)
  -> projection. :meth:`PixelImageEncoder.maps` gives the pre-pooling maps (DSVE-loc's
  heatmaps). The backbone can be frozen (no gradient, BatchNorm in inference mode), fine-tuned,
  or frozen until an iteration (:attr:`backbone_trainable`, set by the trainer).
  With a :class:`StoredMapsBackbone` in place of the backbone, the maps are precomputed
  (``MODEL.RETRIEVAL.IMAGE_INPUT "maps"``: the built-in oracle's spatial form) and everything
  after the backbone is the same.
* :class:`FeatureImageEncoder`: a precomputed pooled feature -> the same normalization and
  projection. Features written by ``tools/data/extract_image_features.py`` are the pixel encoder's
  pooled features, so both paths give the same embedding for the same weights.
"""
import torch
import torch.nn.functional as F
from detectron2.layers import ShapeSpec
from detectron2.modeling import Backbone
from torch import nn

__all__ = ["PixelImageEncoder", "FeatureImageEncoder", "StoredMapsBackbone"]


class StoredMapsBackbone(Backbone):
    """A stand-in backbone whose input is already its output: precomputed maps [B, C, h, w] ->
    ``{"maps": the same tensor}``. No parameters; for ``MODEL.RETRIEVAL.IMAGE_INPUT "maps"``."""

    FEATURE = "maps"

    def __init__(self, channels: int):
        super().__init__()
        self.channels = int(channels)

    def forward(self, x: torch.Tensor) -> dict:
        if x.dim() != 4 or x.shape[1] != self.channels:
            raise ValueError(f"stored maps must be [B, {self.channels}, h, w], got {list(x.shape)}")
        return {self.FEATURE: x}

    def output_shape(self) -> dict:
        return {self.FEATURE: ShapeSpec(channels=self.channels, stride=1)}


class PixelImageEncoder(nn.Module):
    """images [B, 3, H, W] (normalized pixels) -> [B, E].

    Args:
        backbone: a Detectron2 ``Backbone``.
        feature: name of the backbone output to pool (e.g. ``"res5"``).
        pooling: [B, C, h, w] -> [B, C].
        projection: [B, C'] -> [B, E].
        normalize_pooled: L2-normalize the pooled feature before the projection.
        backbone_trainable: whether gradients reach the backbone (changed by the trainer's
            unfreezing hook; a frozen backbone also keeps its BatchNorm statistics).
        adaptation: optional [B, C, h, w] -> [B, C', h, w] module after the backbone (paper 004's
            1x1 convolution); ``None``: C' = C.
        adaptation_frozen_with_backbone: the adaptation gets no gradient while the backbone is frozen.
        dropout: dropout probability on the pooled feature.
    """

    def __init__(self, backbone, feature: str, pooling: nn.Module, projection: nn.Module,
                 normalize_pooled: bool = True, backbone_trainable: bool = False, adaptation=None,
                 adaptation_frozen_with_backbone: bool = False, dropout: float = 0.0):
        super().__init__()
        if feature not in backbone.output_shape():
            raise ValueError(f"MODEL.RETRIEVAL.BACKBONE_FEATURE {feature!r} is not a backbone output "
                             f"({sorted(backbone.output_shape())}): add it to the backbone's OUT_FEATURES")
        self.backbone, self.feature = backbone, feature
        self.pooling, self.projection = pooling, projection
        self.normalize_pooled = normalize_pooled
        self.backbone_trainable = backbone_trainable
        self.adaptation = adaptation
        self.adaptation_frozen_with_backbone = adaptation_frozen_with_backbone
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    @property
    def pooled_dim(self) -> int:
        if self.adaptation is not None:
            return self.adaptation.out_channels
        return self.backbone.output_shape()[self.feature].channels

    def _backbone_map(self, images: torch.Tensor) -> torch.Tensor:
        if self.backbone_trainable and self.training:
            return self.backbone(images)[self.feature]
        was_training = self.backbone.training
        self.backbone.eval()
        with torch.no_grad():
            out = self.backbone(images)[self.feature]
        self.backbone.train(was_training)
        return out

    def maps(self, images: torch.Tensor) -> torch.Tensor:
        """[B, 3, H, W] -> the maps that are pooled, [B, C', h, w] (after the adaptation)."""
        out = self._backbone_map(images)
        if self.adaptation is None:
            return out
        if self.adaptation_frozen_with_backbone and not self.backbone_trainable:
            with torch.no_grad():
                return self.adaptation(out)
        return self.adaptation(out)

    def pooled(self, images: torch.Tensor) -> torch.Tensor:
        """[B, 3, H, W] -> the pooled (not normalized) feature [B, C'], the input of the projection."""
        return self.pooling(self.maps(images))

    def project(self, pooled: torch.Tensor) -> torch.Tensor:
        """[B, C'] pooled features -> [B, E]."""
        return self.projection(self.dropout(F.normalize(pooled, dim=-1) if self.normalize_pooled else pooled))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.project(self.pooled(images))


class FeatureImageEncoder(nn.Module):
    """Precomputed pooled features [B, C] -> [B, E] (the projection of :class:`PixelImageEncoder`)."""

    def __init__(self, pooled_dim: int, projection: nn.Module, normalize_pooled: bool = True, dropout: float = 0.0):
        super().__init__()
        self.pooled_dim, self.projection, self.normalize_pooled = pooled_dim, projection, normalize_pooled
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    project = PixelImageEncoder.project

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        if features.shape[1] != self.pooled_dim:
            raise ValueError(f"image features have {features.shape[1]} dimensions, the model expects {self.pooled_dim}")
        return self.project(features)
