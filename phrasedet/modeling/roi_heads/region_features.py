"""Region features r = pooled ROI feature (+) 5-d box geometry (paper 003 Sec. 3.1), computed once
per image and shared by all its phrases."""
import torch
from detectron2.layers import ShapeSpec
from detectron2.modeling.backbone.resnet import BottleneckBlock, ResNet
from detectron2.modeling.poolers import ROIPooler
from detectron2.modeling.roi_heads.box_head import build_box_head
from torch import nn

__all__ = ["box_geometry", "RegionFeatureExtractor"]


def box_geometry(boxes: torch.Tensor, image_size) -> torch.Tensor:
    """[x1/W, y1/H, x2/W, y2/H, (w*h)/(W*H)] of xyxy ``boxes`` [R, 4] in an image of (H, W) -> [R, 5]."""
    h, w = float(image_size[0]), float(image_size[1])
    scale = boxes.new_tensor([w, h, w, h])
    area = (boxes[:, 2] - boxes[:, 0]).clamp(min=0) * (boxes[:, 3] - boxes[:, 1]).clamp(min=0)
    return torch.cat([boxes / scale, (area / (w * h))[:, None]], dim=1)


def _res5_head(cfg, in_channels):
    """Detectron2's C4 res5 stage (stride 2, 3 bottleneck blocks) followed by a spatial mean."""
    r = cfg.MODEL.RESNETS
    out_channels = r.RES2_OUT_CHANNELS * 8
    blocks = ResNet.make_stage(
        BottleneckBlock, 3, stride_per_block=[2, 1, 1], in_channels=in_channels,
        bottleneck_channels=r.NUM_GROUPS * r.WIDTH_PER_GROUP * 8, out_channels=out_channels,
        num_groups=r.NUM_GROUPS, norm=r.NORM, stride_in_1x1=r.STRIDE_IN_1X1,
    )
    return nn.Sequential(*blocks), out_channels


def _pooled_shape(input_shape, in_features):
    """The one channel count of the pooled levels ``in_features`` (a ShapeSpec with it)."""
    missing = [f for f in in_features if f not in input_shape]
    if missing or not in_features:
        raise ValueError(f"MODEL.ROI_HEADS.IN_FEATURES {list(in_features)}: not backbone outputs {missing} "
                         f"(the backbone gives {sorted(input_shape)})")
    channels = {input_shape[f].channels for f in in_features}
    if len(channels) != 1:
        raise ValueError(f"MODEL.ROI_HEADS.IN_FEATURES {list(in_features)} have different channel counts {sorted(channels)}: "
                         "pooling several levels needs one (e.g. FPN's p2-p5)")
    return input_shape[in_features[0]]


class RegionFeatureExtractor(nn.Module):
    """ROIAlign on the backbone levels ``MODEL.ROI_HEADS.IN_FEATURES`` (one, e.g. C4's res4, or
    several, e.g. FPN's p2-p5: each box pooled from the level of its size, as Detectron2's
    ``StandardROIHeads``), then ``MODEL.PHRASE_ROI_HEADS.REGION_HEAD``:

    - ``"res5"``: the res5 block + mean pool (paper 003: R101-C4, 2048-d fc7);
    - ``"fc"``: Detectron2's ``ROI_BOX_HEAD`` (e.g. 2 FC layers): an FPN detector's box head, and
      cheap enough for CPU training.

    ``detectron2_head_name`` is the head's name in Detectron2's ROI heads (``Res5ROIHeads.res5``,
    ``StandardROIHeads.box_head``): checkpoints of Detectron2's detectors load into ``head``
    under it (:mod:`phrasedet.modeling.checkpoint.names`).

    ``forward(features, boxes_per_image, image_sizes) -> [sum R_i, C + 5]``.
    """

    def __init__(self, cfg, input_shape):
        super().__init__()
        self.in_features = tuple(cfg.MODEL.ROI_HEADS.IN_FEATURES)
        shape = _pooled_shape(input_shape, self.in_features)
        head = cfg.MODEL.PHRASE_ROI_HEADS.REGION_HEAD
        self.pooler = ROIPooler(
            output_size=cfg.MODEL.ROI_BOX_HEAD.POOLER_RESOLUTION,
            scales=tuple(1.0 / input_shape[f].stride for f in self.in_features),
            sampling_ratio=cfg.MODEL.ROI_BOX_HEAD.POOLER_SAMPLING_RATIO,
            pooler_type=cfg.MODEL.ROI_BOX_HEAD.POOLER_TYPE,
        )
        if head == "res5":
            self.head, channels = _res5_head(cfg, shape.channels)
            self.spatial_mean = True
            self.detectron2_head_name = "res5"
        elif head == "fc":
            r = cfg.MODEL.ROI_BOX_HEAD.POOLER_RESOLUTION
            self.head = build_box_head(cfg, ShapeSpec(channels=shape.channels, height=r, width=r))
            channels = self.head.output_shape.channels
            self.spatial_mean = False
            self.detectron2_head_name = "box_head"
        else:
            raise ValueError(f"MODEL.PHRASE_ROI_HEADS.REGION_HEAD must be 'res5' or 'fc', got {head!r}")
        self.output_dim = channels + 5

    def forward(self, features, boxes, image_sizes):
        """
        Args:
            features: dict of backbone feature maps.
            boxes: list of :class:`Boxes`, the regions of each image (in the resized image).
            image_sizes: list of (H, W) of each resized image.

        Returns:
            [sum R_i, C + 5] region features, images concatenated in order.
        """
        x = self.head(self.pooler([features[f] for f in self.in_features], boxes))
        if self.spatial_mean:
            x = x.mean(dim=(2, 3))
        geometry = torch.cat([box_geometry(b.tensor, s) for b, s in zip(boxes, image_sizes)]) if boxes else x.new_zeros((0, 5))
        return torch.cat([x.flatten(1), geometry.to(x.dtype)], dim=1)
