"""Detectron2's names of our model's tensors.

Our modules keep their own names (``roi_heads.region_features.head`` is the region head of
:class:`~phrasedet.modeling.roi_heads.region_features.RegionFeatureExtractor`); a Detectron2
checkpoint names the same tensors as its own models do. :func:`name_aliases` lists, for a
model, pairs ``(detectron2 prefix, our prefix)``:

- a C4 res5 region head: ``roi_heads.res5.`` (``Res5ROIHeads``);
- an FC region head: ``roi_heads.box_head.`` (``StandardROIHeads``' ``FastRCNNConvFCHead``);
- the image backbone of an embedding model: ``backbone.`` (a detector's), so a detector
  checkpoint given as ``MODEL.WEIGHTS`` initializes ``image_encoder.backbone``;
- the bottom-up ResNet of an FPN backbone, ``backbone.bottom_up.``, for a backbone without FPN.

:func:`rename_to_model` renames a checkpoint's keys by them (a key the model has under its own
name is never renamed); :func:`align_by_suffix` is Detectron2's suffix matching for ImageNet
files, run against the model's Detectron2 names so that e.g. an ImageNet ``res5.0.conv1.weight``
reaches our res5 region head.
"""
from detectron2.checkpoint.c2_model_loading import align_and_update_state_dicts

from .files import CAFFE2_AUTHOR

__all__ = ["align_by_suffix", "match_checkpoint", "name_aliases", "rename_to_model"]


def name_aliases(model) -> list:
    """``[(detectron2 prefix, our prefix)]`` for ``model`` (see the module docstring)."""
    aliases = []
    for name, module in model.named_modules():
        detectron2_name = getattr(module, "detectron2_head_name", None)
        if detectron2_name:  # RegionFeatureExtractor: its head sits at roi_heads.<detectron2_name> in Detectron2
            parent = name.rsplit(".", 1)[0] + "." if "." in name else ""
            aliases.append((f"{parent}{detectron2_name}.", f"{name}.head."))
    aliases += [("backbone.", "image_encoder.backbone."), ("backbone.bottom_up.", "backbone."),
                ("backbone.bottom_up.", "image_encoder.backbone.")]
    return aliases


def _our_name(key: str, model_keys, aliases) -> str:
    if key in model_keys:
        return key
    for theirs, ours in aliases:
        if key.startswith(theirs) and ours + key[len(theirs):] in model_keys:
            return ours + key[len(theirs):]
    return key


def rename_to_model(state: dict, model_keys, aliases) -> dict:
    """``state`` with each key the model lacks renamed by the first alias that gives a model key."""
    model_keys = set(model_keys)
    renamed = {}
    for key, value in state.items():
        new = _our_name(key, model_keys, aliases)
        if new in renamed:  # two checkpoint tensors for one model tensor: keep the one named as ours
            if new != key:
                continue
        renamed[new] = value
    return renamed


def _detectron2_name(key: str, aliases) -> str:
    for theirs, ours in aliases:
        if key.startswith(ours) and theirs.startswith("roi_heads"):
            return theirs + key[len(ours):]
    return key


def align_by_suffix(model_state: dict, state: dict, aliases, caffe2_names: bool) -> dict:
    """Detectron2's name matching of an ImageNet file (each model tensor takes the checkpoint
    tensor whose name is its longest dotted suffix; ``caffe2_names``: Caffe2 names renamed first),
    with the model's region head under its Detectron2 name. Returns the checkpoint with our names."""
    to_detectron2 = {k: _detectron2_name(k, aliases) for k in model_state}
    back = {v: k for k, v in to_detectron2.items()}
    aligned = align_and_update_state_dicts({to_detectron2[k]: v for k, v in model_state.items()}, state,
                                           c2_conversion=caffe2_names)
    return {back.get(k, k): v for k, v in aligned.items()}


def match_checkpoint(model_state: dict, checkpoint: dict, aliases) -> dict:
    """The tensors of ``checkpoint`` (:func:`~.files.read_checkpoint`'s) under the model's names:
    suffix-matched when the file asks for it (``matching_heuristics``: ImageNet files, Caffe2 names
    renamed first), else renamed by ``aliases``."""
    if checkpoint.get("matching_heuristics"):
        caffe2 = checkpoint.get("__author__") == CAFFE2_AUTHOR
        return align_by_suffix(model_state, checkpoint["model"], aliases, caffe2_names=caffe2)
    return rename_to_model(checkpoint["model"], model_state, aliases)
