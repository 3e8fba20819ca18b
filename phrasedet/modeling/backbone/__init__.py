"""Backbones phrasedet adds to Detectron2's ``BACKBONE_REGISTRY`` (importing registers them)."""
from .builtin_resnet import build_builtin_resnet_backbone

__all__ = ["build_builtin_resnet_backbone"]
