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

from phrasedet.fileio import BadFileError

__all__ = ["BACKBONE_PREFIXES", "load_backbone_weights", "load_checkpoint_state"]

logger = logging.getLogger(__name__)
BACKBONE_PREFIXES = ("image_encoder.backbone.", "backbone.")


def load_checkpoint_state(path: str, what: str = "checkpoint") -> dict:
    """The state dict ``{name: Tensor}`` of a checkpoint: the ``model`` entry of a Detectron2
    ``.pth``, or a plain state dict. Loaded with ``torch.load(weights_only=True)`` on the CPU.

    Raises:
        FileNotFoundError: naming ``what`` and ``path``.
        phrasedet.fileio.BadFileError: naming the file, when torch cannot read it (truncated,
            corrupt, not a checkpoint, objects other than tensors) or it holds no state dict.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{what} {path!r} does not exist")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except MemoryError:
        raise
    except Exception as e:  # RuntimeError, pickle.UnpicklingError, EOFError, ValueError, ...
        raise BadFileError(f"{path}: not a readable {what} ({type(e).__name__}: {e})") from None
    state = state.get("model", state) if isinstance(state, dict) else state
    if not (isinstance(state, dict)
            and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items())):
        raise BadFileError(f"{path}: a {what} must hold a state dict {{name: tensor}} (or one under 'model'), "
                           f"got {type(state).__name__}")
    return state


def _backbone_tensors(state: dict, path: str) -> dict:
    for prefix in BACKBONE_PREFIXES:
        found = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
        if found:
            return found
    raise BadFileError(f"{path}: no tensor under {' or '.join(BACKBONE_PREFIXES)} (e.g. {sorted(state)[:3]})")


def load_backbone_weights(backbone: torch.nn.Module, path: str) -> None:
    """Load the backbone tensors of checkpoint ``path`` (a Detectron2 ``.pth`` with a ``model``
    entry, or a plain state dict) into ``backbone``; errors (:class:`~phrasedet.fileio.BadFileError`)
    name the file and the first keys that are missing or do not fit, or say it does not read."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"MODEL.RETRIEVAL.BACKBONE_WEIGHTS: no file {path!r}")
    tensors = _backbone_tensors(load_checkpoint_state(path), path)
    own = backbone.state_dict()
    missing = sorted(set(own) - set(tensors))
    wrong = sorted(k for k in own if k in tensors and tuple(tensors[k].shape) != tuple(own[k].shape))
    if missing or wrong:
        raise BadFileError(f"{path}: its backbone does not fit the configured one: missing {missing[:5]}, "
                         f"other shapes {[(k, tuple(tensors[k].shape), tuple(own[k].shape)) for k in wrong[:3]]}")
    backbone.load_state_dict({k: tensors[k] for k in own})
    logger.info("Initialized the image backbone from the %d backbone tensors of %s", len(own), path)
