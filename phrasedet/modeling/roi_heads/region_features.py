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


class RegionFeatureExtractor(nn.Module):
    """ROIAlign on one backbone level, then ``MODEL.PHRASE_ROI_HEADS.REGION_HEAD``:

    - ``"res5"``: the res5 block + mean pool (paper 003: R101-C4, 2048-d fc7);
    - ``"fc"``: Detectron2's ``ROI_BOX_HEAD`` (e.g. 2 FC layers), cheap enough for CPU training.

    ``forward(features, boxes_per_image, image_sizes) -> [sum R_i, C + 5]``.
    """

    def __init__(self, cfg, input_shape):
        super().__init__()
        (self.in_feature,) = cfg.MODEL.ROI_HEADS.IN_FEATURES
        shape = input_shape[self.in_feature]
        head = cfg.MODEL.PHRASE_ROI_HEADS.REGION_HEAD
        self.pooler = ROIPooler(
            output_size=cfg.MODEL.ROI_BOX_HEAD.POOLER_RESOLUTION,
            scales=(1.0 / shape.stride,),
            sampling_ratio=cfg.MODEL.ROI_BOX_HEAD.POOLER_SAMPLING_RATIO,
            pooler_type=cfg.MODEL.ROI_BOX_HEAD.POOLER_TYPE,
        )
        if head == "res5":
            self.head, channels = _res5_head(cfg, shape.channels)
            self.spatial_mean = True
        elif head == "fc":
            r = cfg.MODEL.ROI_BOX_HEAD.POOLER_RESOLUTION
            self.head = build_box_head(cfg, ShapeSpec(channels=shape.channels, height=r, width=r))
            channels = self.head.output_shape.channels
            self.spatial_mean = False
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
        x = self.head(self.pooler([features[self.in_feature]], boxes))
        if self.spatial_mean:
            x = x.mean(dim=(2, 3))
        geometry = torch.cat([box_geometry(b.tensor, s) for b, s in zip(boxes, image_sizes)]) if boxes else x.new_zeros((0, 5))
        return torch.cat([x.flatten(1), geometry.to(x.dtype)], dim=1)
