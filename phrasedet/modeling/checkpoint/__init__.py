"""Reading weights files and loading them into phrasedet's models (as ``detectron2/checkpoint/``).

- :mod:`.files`: every weights file ``MODEL.WEIGHTS`` may name, read into one form;
- :mod:`.names`: Detectron2's names of our tensors;
- :mod:`.load_report`: the per-part summary and the check of ``PHRASEDET.WEIGHTS.PRETRAINED_PARTS``;
- :mod:`.detection_checkpoint`: :class:`PhrasedetCheckpointer`, used wherever ``MODEL.WEIGHTS`` loads;
- :mod:`.backbone_weights`: ``MODEL.RETRIEVAL.BACKBONE_WEIGHTS``.
"""
from .backbone_weights import BACKBONE_PREFIXES, backbone_tensors, load_backbone_weights
from .detection_checkpoint import RPN_OUTPUTS, PhrasedetCheckpointer, kept_statistics
from .files import is_torchvision_resnet, load_checkpoint_state, read_checkpoint, torchvision_resnet_to_detectron2
from .load_report import LoadReport, PretrainedPartError, model_parts
from .names import name_aliases

__all__ = ["BACKBONE_PREFIXES", "LoadReport", "backbone_tensors", "PhrasedetCheckpointer", "PretrainedPartError", "RPN_OUTPUTS",
           "is_torchvision_resnet", "kept_statistics", "load_backbone_weights", "load_checkpoint_state", "model_parts", "name_aliases",
           "read_checkpoint", "torchvision_resnet_to_detectron2"]
