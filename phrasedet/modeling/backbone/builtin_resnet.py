"""``build_builtin_resnet_backbone``: a ResNet for the built-in dataset's small images, the
architecture of the built-in pretrained CNN (``configs/pretraining/``).

Detectron2's ResNet with two changes for 128-pixel images whose smallest shapes are 14 pixels
across: the stem is its 7 x 7 convolution with stride 2 but no max-pooling (stride 2, not 4), and
the stages' widths are ``RES2_OUT_CHANNELS`` x (1, 2, 4, 8) with basic blocks at any width
(Detectron2 fixes R18/R34 at 64). So ``res2`` .. ``res5`` have strides 2, 4, 8 and 16: at 128
pixels, ``res4`` is a 16 x 16 map. ``DEPTH`` 10 (one block per stage) or 18 (two). Every tensor has
Detectron2's ResNet name (``stem.conv1.*``, ``res2.0.conv1.*``, ...).
"""
import fvcore.nn.weight_init as weight_init
import torch.nn.functional as F
from detectron2.layers import Conv2d, ShapeSpec, get_norm
from detectron2.modeling import BACKBONE_REGISTRY
from detectron2.modeling.backbone.resnet import BasicBlock, CNNBlockBase, ResNet

__all__ = ["StridedStem", "build_builtin_resnet_backbone"]

_BLOCKS = {10: 1, 18: 2}


class StridedStem(CNNBlockBase):
    """A 7 x 7 convolution with stride 2, its norm and ReLU: Detectron2's ``BasicStem`` without
    the max-pooling."""

    def __init__(self, in_channels: int = 3, out_channels: int = 64, norm: str = "BN"):
        super().__init__(in_channels, out_channels, 2)
        self.conv1 = Conv2d(in_channels, out_channels, kernel_size=7, stride=2, padding=3, bias=False,
                            norm=get_norm(norm, out_channels))
        weight_init.c2_msra_fill(self.conv1)

    def forward(self, x):
        return F.relu_(self.conv1(x))


@BACKBONE_REGISTRY.register()
def build_builtin_resnet_backbone(cfg, input_shape: ShapeSpec):
    """``MODEL.RESNETS``: DEPTH (10 or 18), STEM_OUT_CHANNELS, RES2_OUT_CHANNELS (the width),
    NORM, OUT_FEATURES, and ``MODEL.BACKBONE.FREEZE_AT``."""
    r = cfg.MODEL.RESNETS
    if r.DEPTH not in _BLOCKS:
        raise ValueError(f"build_builtin_resnet_backbone: MODEL.RESNETS.DEPTH must be one of {sorted(_BLOCKS)}, got {r.DEPTH}")
    stem = StridedStem(input_shape.channels, r.STEM_OUT_CHANNELS, r.NORM)
    names = ["res2", "res3", "res4", "res5"]
    last = max(names.index(f) for f in r.OUT_FEATURES if f in names) if any(f in names for f in r.OUT_FEATURES) else 3
    stages, in_channels = [], r.STEM_OUT_CHANNELS
    for k in range(last + 1):
        out_channels = r.RES2_OUT_CHANNELS * 2 ** k
        stages.append(ResNet.make_stage(block_class=BasicBlock, num_blocks=_BLOCKS[r.DEPTH],
                                        stride_per_block=[1 if k == 0 else 2] + [1] * (_BLOCKS[r.DEPTH] - 1),
                                        in_channels=in_channels, out_channels=out_channels, norm=r.NORM))
        in_channels = out_channels
    return ResNet(stem, stages, out_features=r.OUT_FEATURES).freeze(cfg.MODEL.BACKBONE.FREEZE_AT)
