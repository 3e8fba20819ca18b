"""Initialize a backbone from the backbone of another model's checkpoint (``MODEL.RETRIEVAL.BACKBONE_WEIGHTS``).

Detectron2's ``MODEL.WEIGHTS`` loads a whole model; :func:`load_backbone_weights` loads one
backbone, from any file :func:`~.files.read_checkpoint` reads (or address Detectron2's ``PathManager``
resolves, e.g. ``phrasedet://builtin_cnn/backbone.pth``): the tensors under
``image_encoder.backbone.`` (our embedding models), ``backbone.bottom_up.`` (a model-zoo FPN
detector's ResNet) or ``backbone.`` (our detectors, a model-zoo C4 detector) of a checkpoint, or
an ImageNet file (Detectron2-converted ``.pkl``, Caffe2 ``.pkl``, raw torchvision ``.pth``)
matched by name suffix as Detectron2 does. Every backbone tensor must be there with its shape
(BatchNorm's ``num_batches_tracked`` counters excepted).
"""
import logging
import os

import torch
from detectron2.utils.file_io import PathManager

from phrasedet.fileio import BadFileError

from .files import read_checkpoint
from .load_report import counted_tensors
from .names import match_checkpoint

__all__ = ["BACKBONE_PREFIXES", "backbone_tensors", "load_backbone_weights"]

logger = logging.getLogger(__name__)
BACKBONE_PREFIXES = ("image_encoder.backbone.", "backbone.bottom_up.", "backbone.")


def backbone_tensors(state: dict, path: str) -> dict:
    """The backbone's tensors of a model's ``state`` (read from ``path``), named as in the backbone:
    those under the first of :data:`BACKBONE_PREFIXES` that has any.

    Raises:
        BadFileError: naming ``path``, when no tensor is under any of them.
    """
    for prefix in BACKBONE_PREFIXES:
        found = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
        if found:
            return found
    raise BadFileError(f"{path}: no tensor under {' or '.join(BACKBONE_PREFIXES)} (e.g. {sorted(state)[:3]})")


def load_backbone_weights(backbone: torch.nn.Module, path: str) -> None:
    """Load the backbone tensors of the weights file ``path`` (see the module docstring) into
    ``backbone``; errors (:class:`~phrasedet.fileio.BadFileError`) name the file and the first
    keys that are missing or do not fit, or say it does not read."""
    if "://" in path:  # a phrasedet:// (built-in model) or downloadable address: Detectron2's PathManager
        path = PathManager.get_local_path(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"MODEL.RETRIEVAL.BACKBONE_WEIGHTS: no file {path!r}")
    checkpoint = read_checkpoint(path)
    own = backbone.state_dict()
    if checkpoint.get("matching_heuristics"):
        tensors = match_checkpoint(own, checkpoint, ())
    else:
        tensors = backbone_tensors(checkpoint["model"], path)
    required = counted_tensors(backbone)
    missing = [k for k in required if k not in tensors]
    wrong = [k for k in own if k in tensors and tuple(tensors[k].shape) != tuple(own[k].shape)]
    if missing or wrong:
        raise BadFileError(f"{path}: its backbone does not fit the configured one: missing {missing[:5]}, "
                           f"other shapes {[(k, tuple(tensors[k].shape), tuple(own[k].shape)) for k in wrong[:3]]}")
    backbone.load_state_dict({k: tensors[k] for k in own if k in tensors}, strict=False)
    logger.info("Initialized the image backbone from the %d backbone tensors of %s", len(required), path)
