"""Read every kind of weights file ``MODEL.WEIGHTS`` and ``MODEL.RETRIEVAL.BACKBONE_WEIGHTS`` may name.

:func:`read_checkpoint` returns a checkpoint as Detectron2's ``DetectionCheckpointer._load_file``
does, ``{"model": {name: Tensor}, ...}``, with ``"matching_heuristics": True`` (and an
``"__author__"``) for files whose names are matched to the model's by suffix:

- our ``.pth`` (Detectron2's checkpointer: ``model`` plus ``optimizer``, ``iteration``, ...) or a
  plain state dict, read with ``torch.load(weights_only=True)``;
- a Detectron2 model-zoo ``.pkl`` (``{"model": {name: ndarray}, "__author__": ...}``; names as a
  Detectron2 model's, or, with ``"matching_heuristics"``, an ImageNet ResNet converted with
  Detectron2's ``tools/convert-torchvision-to-d2.py``);
- a Caffe2 / Detectron1 ``.pkl`` (e.g. the MSRA ImageNet ``R-101.pkl``: Caffe2 names, matched with
  Detectron2's Caffe2 renaming);
- a raw torchvision ResNet state dict (``conv1.weight``, ``layer1.0.bn1.weight``, ...), renamed
  here to Detectron2's ResNet names (:func:`torchvision_resnet_to_detectron2`).
"""
import os
import pickle
import re

import numpy as np
import torch

from phrasedet.fileio import BadFileError

__all__ = ["is_torchvision_resnet", "load_checkpoint_state", "read_checkpoint", "torchvision_resnet_to_detectron2"]

TORCHVISION_AUTHOR = "torchvision"
CAFFE2_AUTHOR = "Caffe2"


def is_torchvision_resnet(state: dict) -> bool:
    """Whether ``state`` has torchvision ResNet names (``conv1.weight`` and ``layer1.*``)."""
    return "conv1.weight" in state and any(k.startswith("layer1.") for k in state)


def _torchvision_name(name: str) -> str:
    """``layer2.0.bn1.weight`` -> ``res3.0.conv1.norm.weight``; ``bn1.bias`` -> ``stem.conv1.norm.bias``."""
    name = re.sub(r"^layer(\d)", lambda m: f"res{int(m.group(1)) + 1}", name)
    if not name.startswith("res"):
        name = "stem." + name
    name = re.sub(r"\.bn(\d)\.", r".conv\1.norm.", name)
    return name.replace(".downsample.0.", ".shortcut.").replace(".downsample.1.", ".shortcut.norm.")


def torchvision_resnet_to_detectron2(state: dict) -> dict:
    """A torchvision ResNet's state dict with Detectron2's ResNet names (``stem.conv1``,
    ``res2``..``res5``, ``convK.norm``, ``shortcut``); the classifier ``fc`` becomes
    ``stem.fc`` and matches nothing, as in Detectron2's conversion script."""
    return {_torchvision_name(k): v for k, v in state.items()}


def _read_pkl(path: str) -> dict:
    """A ``.pkl`` as Detectron2 reads it: model-zoo format as is, else Caffe2 blobs (no momenta)."""
    with open(path, "rb") as f:
        data = pickle.load(f, encoding="latin1")
    if not isinstance(data, dict):
        return data
    if "model" in data and "__author__" in data:
        return data
    blobs = data.get("blobs", data)
    if not isinstance(blobs, dict):
        return blobs
    return {"model": {k: v for k, v in blobs.items() if not str(k).endswith("_momentum")},
            "__author__": CAFFE2_AUTHOR, "matching_heuristics": True}


def _as_tensors(state, path: str, what: str) -> dict:
    if isinstance(state, dict) and all(isinstance(v, np.ndarray) for v in state.values()):
        state = {k: torch.as_tensor(v) for k, v in state.items()}
    if not (isinstance(state, dict)
            and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items())):
        raise BadFileError(f"{path}: a {what} must hold a state dict {{name: tensor}} (or one under 'model'), "
                           f"got {type(state).__name__}")
    return state


def read_checkpoint(path: str, what: str = "checkpoint") -> dict:
    """The checkpoint in file ``path`` as ``{"model": {name: Tensor}, ...}`` (see the module docstring).

    Raises:
        FileNotFoundError: naming ``what`` and ``path``.
        phrasedet.fileio.BadFileError: naming the file, when it does not read (truncated,
            corrupt, not a checkpoint, objects other than tensors) or holds no state dict.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{what} {path!r} does not exist")
    try:
        data = _read_pkl(path) if path.endswith(".pkl") else torch.load(path, map_location="cpu", weights_only=True)
    except MemoryError:
        raise
    except Exception as e:  # RuntimeError, pickle.UnpicklingError, EOFError, ValueError, ...
        raise BadFileError(f"{path}: not a readable {what} ({type(e).__name__}: {e})") from None
    checkpoint = dict(data) if isinstance(data, dict) and "model" in data else {"model": data}
    checkpoint["model"] = _as_tensors(checkpoint["model"], path, what)
    if is_torchvision_resnet(checkpoint["model"]):
        checkpoint["model"] = torchvision_resnet_to_detectron2(checkpoint["model"])
        checkpoint.update(__author__=TORCHVISION_AUTHOR, matching_heuristics=True)
    return checkpoint


def load_checkpoint_state(path: str, what: str = "checkpoint") -> dict:
    """The state dict ``{name: Tensor}`` of the checkpoint in ``path`` (:func:`read_checkpoint`'s ``model``)."""
    return read_checkpoint(path, what)["model"]
