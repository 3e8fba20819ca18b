"""Initialize a backbone from the backbone of another model's checkpoint.

Detectron2's ``MODEL.WEIGHTS`` loads a checkpoint by parameter name, so a detector's
``backbone.res4.0.conv1.weight`` does not reach an embedding model's
``image_encoder.backbone.res4.0.conv1.weight``. :func:`load_backbone_weights` takes the tensors
under ``backbone.`` (or ``image_encoder.backbone.``) of a ``.pth`` checkpoint and loads them into a
backbone, requiring every backbone tensor to be present with its shape.
"""
import logging
import os

import torch

__all__ = ["BACKBONE_PREFIXES", "load_backbone_weights"]

logger = logging.getLogger(__name__)
BACKBONE_PREFIXES = ("image_encoder.backbone.", "backbone.")


def _backbone_tensors(state: dict, path: str) -> dict:
    for prefix in BACKBONE_PREFIXES:
        found = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
        if found:
            return found
    raise ValueError(f"{path}: no tensor under {' or '.join(BACKBONE_PREFIXES)} (e.g. {sorted(state)[:3]})")


def load_backbone_weights(backbone: torch.nn.Module, path: str) -> None:
    """Load the backbone tensors of checkpoint ``path`` (a Detectron2 ``.pth`` with a ``model``
    entry, or a plain state dict) into ``backbone``; errors name the file and the first keys
    that are missing or do not fit."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"MODEL.RETRIEVAL.BACKBONE_WEIGHTS: no file {path!r}")
    state = torch.load(path, map_location="cpu", weights_only=True)
    tensors = _backbone_tensors(state.get("model", state), path)
    own = backbone.state_dict()
    missing = sorted(set(own) - set(tensors))
    wrong = sorted(k for k in own if k in tensors and tuple(tensors[k].shape) != tuple(own[k].shape))
    if missing or wrong:
        raise ValueError(f"{path}: its backbone does not fit the configured one: missing {missing[:5]}, "
                         f"other shapes {[(k, tuple(tensors[k].shape), tuple(own[k].shape)) for k in wrong[:3]]}")
    backbone.load_state_dict({k: tensors[k] for k in own})
    logger.info("Initialized the image backbone from the %d backbone tensors of %s", len(own), path)
