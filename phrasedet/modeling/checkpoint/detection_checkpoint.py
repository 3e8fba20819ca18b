"""``PhrasedetCheckpointer``: Detectron2's ``DetectionCheckpointer`` that loads every documented
weights file completely into the parts it is meant for, or fails loudly.

On top of Detectron2's it:

- reads every source of :mod:`.files` (our ``.pth``, model-zoo and ImageNet ``.pkl`` files, raw
  torchvision ResNets); a missing or unreadable file is an error naming it;
- maps Detectron2's names onto ours (:mod:`.names`): a model-zoo C4 ``roi_heads.res5.*`` and an FPN
  ``roi_heads.box_head.*`` load into our region head, an ImageNet ``res5.*`` too;
- re-initializes the RPN's output layers when the file's have another number of anchors per
  position than ``MODEL.ANCHOR_GENERATOR`` gives, with one warning line saying so;
- keeps the running statistics of every FrozenBatchNorm layer the file holds nothing of: Detectron2's
  ``FrozenBatchNorm2d`` sets absent statistics to mean 0, variance 1 without a word, which reset a
  backbone initialized before the load (``MODEL.RETRIEVAL.BACKBONE_WEIGHTS`` under a model trained
  on features) and made its pixel path compute other features than the ones it was trained on;
- gives the BatchNorm layers loaded from a Caffe2 file (affine BatchNorm: a scale and a bias, no
  running statistics) the statistics that make them that affine map (mean 0, variance 1 - eps),
  with one line saying so, so that such a file initializes its parts wholly;
- logs one line per model part after loading (loaded from the file, not in the file and kept as
  built, partly loaded; :mod:`.load_report`), and raises :class:`.PretrainedPartError` when a part of
  ``PHRASEDET.WEIGHTS.PRETRAINED_PARTS`` is not wholly initialized by the file (the RPN's
  re-initialized outputs excepted); an empty path with such parts is an error too, and so is an
  address that cannot be downloaded (naming it, and what to do offline).

The trainer (``--resume`` and periodic checkpoints included), ``tools/train_net.py --eval-only``
and every tool that loads ``MODEL.WEIGHTS`` use it.
"""
import logging
import os
from urllib.parse import parse_qs

import torch
from detectron2.checkpoint import DetectionCheckpointer
from detectron2.layers import FrozenBatchNorm2d
from torch import nn

from phrasedet.builtin_weights import PREFIX as BUILTIN_PREFIX

from .files import CAFFE2_AUTHOR, read_checkpoint
from .load_report import PRETRAINED_KEY, LoadReport, counted_tensors, model_parts
from .names import match_checkpoint, name_aliases

__all__ = ["PhrasedetCheckpointer", "RPN_OUTPUTS"]

logger = logging.getLogger(__name__)
RPN_OUTPUTS = ("proposal_generator.rpn_head.objectness_logits.", "proposal_generator.rpn_head.anchor_deltas.")


def _anchors(state, key: str) -> int:
    """Anchors per position of an RPN's objectness layer ``key`` (its output channels)."""
    return int(state[key].shape[0])


def without_other_anchor_outputs(state: dict, model_state: dict, path: str):
    """``state`` without the RPN output tensors whose shapes differ from the model's (another
    number of anchors), and the model's RPN output tensors left new. Logs one warning when any."""
    other = [k for k in state if k.startswith(RPN_OUTPUTS) and k in model_state and state[k].shape != model_state[k].shape]
    if not other:
        return state, set()
    logits = RPN_OUTPUTS[0] + "weight"
    found = f"{_anchors(state, logits)} anchors per position" if logits in state else "other shapes"
    logger.warning("%s: its RPN output layers (%s) have %s, MODEL.ANCHOR_GENERATOR gives %d: they are re-initialized "
                   "(the rest of the RPN is loaded)", path, ", ".join(p.rstrip(".") for p in RPN_OUTPUTS), found,
                   _anchors(model_state, logits))
    return {k: v for k, v in state.items() if k not in other}, {k for k in model_state if k.startswith(RPN_OUTPUTS)}


def affine_norm_statistics(model: nn.Module, state: dict, path: str) -> dict:
    """``state`` with, for every BatchNorm layer of ``model`` whose scale and bias it holds but not
    its running statistics (a Caffe2 file's affine BatchNorm), mean 0 and variance 1 - eps: the
    statistics under which the layer computes exactly that affine map. Logs how many it set."""
    implied = {}
    for name, module in model.named_modules():
        if not isinstance(module, (FrozenBatchNorm2d, nn.modules.batchnorm._BatchNorm)):
            continue
        if f"{name}.weight" not in state or f"{name}.bias" not in state:
            continue
        size = module.running_mean.shape
        for key, value in ((f"{name}.running_mean", torch.zeros(size)), (f"{name}.running_var", torch.ones(size) - module.eps)):
            if key not in state:
                implied[key] = value
    if implied:
        logger.info("%s: affine BatchNorm (a Caffe2 file): %d running statistics set to mean 0, variance 1 - eps", path,
                    len(implied))
    return {**state, **implied}


def kept_statistics(model: nn.Module, state: dict) -> dict:
    """``state`` with the current running statistics of every ``FrozenBatchNorm2d`` layer of
    ``model`` of which it holds no tensor. Loading a state without a layer's version metadata,
    ``FrozenBatchNorm2d`` fills its absent statistics with mean 0 and variance 1: a layer the file
    does not hold would lose the statistics it was built or initialized with."""
    current = model.state_dict()
    kept = {}
    for name, module in model.named_modules():
        if not isinstance(module, FrozenBatchNorm2d):
            continue
        keys = [f"{name}.{t}" for t in ("weight", "bias", "running_mean", "running_var")]
        if not any(k in state for k in keys):
            kept.update({k: current[k] for k in keys[2:]})
    return {**state, **kept}


class PhrasedetCheckpointer(DetectionCheckpointer):
    """See the module docstring.

    Args:
        pretrained_parts: module paths (e.g. ``"backbone"``, ``"roi_heads.region_features"``) that
            a loaded file must wholly initialize (``PHRASEDET.WEIGHTS.PRETRAINED_PARTS``).
        others: as Detectron2's ``DetectionCheckpointer``.
    """

    def __init__(self, model, save_dir="", *, pretrained_parts=(), save_to_disk=None, **checkpointables):
        super().__init__(model, save_dir, save_to_disk=save_to_disk, **checkpointables)
        self.pretrained_parts = tuple(pretrained_parts)
        self._path = None
        self._report = None

    @classmethod
    def from_config(cls, cfg, model, save_dir="", **checkpointables):
        """The checkpointer of ``cfg`` (its ``PHRASEDET.WEIGHTS.PRETRAINED_PARTS``)."""
        return cls(model, save_dir, pretrained_parts=cfg.PHRASEDET.WEIGHTS.PRETRAINED_PARTS, **checkpointables)

    def load(self, path, *args, **kwargs):
        if not path and self.pretrained_parts:
            raise ValueError(f"MODEL.WEIGHTS is empty but {PRETRAINED_KEY} is {list(self.pretrained_parts)}: set MODEL.WEIGHTS "
                             f"to the checkpoint they come from (see the config's comment), or set {PRETRAINED_KEY} [] to "
                             "train them from scratch")
        if path and "://" not in path and not os.path.isfile(path):
            raise FileNotFoundError(f"checkpoint {path!r} does not exist")
        self._path = path
        try:
            return super().load(path, *args, **kwargs)
        except OSError as e:  # urllib's URLError included
            if "://" not in path or path.startswith(BUILTIN_PREFIX):  # a built-in model's address says what is missing
                raise
            raise OSError(f"MODEL.WEIGHTS {path!r} could not be downloaded ({type(e).__name__}: {e}). Offline, fetch the "
                          "file on another machine and set MODEL.WEIGHTS to the local copy (docs/TRAINING.md, "
                          "\"Initial weights\")") from e
        finally:
            self._path = None

    def _load_file(self, filename):
        checkpoint = read_checkpoint(filename)
        queries = parse_qs(self._parsed_url_during_load.query) if self._parsed_url_during_load is not None else {}
        if queries.pop("matching_heuristics", None) == ["True"]:
            checkpoint["matching_heuristics"] = True
        if queries:
            raise ValueError(f"{filename}: unsupported query {queries} in the checkpoint's address")
        return checkpoint

    def _our_names(self, checkpoint) -> dict:
        """The checkpoint's tensors under our model's names (:mod:`.names`)."""
        state = match_checkpoint(self.model.state_dict(), checkpoint, name_aliases(self.model))
        checkpoint.pop("matching_heuristics", None)  # matched: Detectron2 must not match it again
        return state

    def _load_model(self, checkpoint):
        state, reinitialized = without_other_anchor_outputs(self._our_names(checkpoint), self.model.state_dict(), self._path)
        if checkpoint.get("__author__") == CAFFE2_AUTHOR:
            state = affine_norm_statistics(self.model, state, self._path)
        in_file = set(state)
        checkpoint["model"] = kept_statistics(self.model, state)
        incompatible = super()._load_model(checkpoint)  # drops the tensors of other shapes from ``state``
        missing = set(incompatible.missing_keys)
        tensors = counted_tensors(self.model)
        # in the file, not just "not missing": the statistics kept above are not missing either
        loaded = {k for k in tensors if k in in_file and k not in missing}
        self._report = LoadReport(self._path, model_parts(self.model), tensors, loaded, reinitialized)
        return incompatible

    def _log_incompatible_keys(self, incompatible) -> None:
        """The per-part summary, the tensors of other shapes and those unused, then the check of
        the pretrained parts."""
        report, self._report = self._report, None
        report.log()
        if incompatible.incorrect_shapes:
            logger.warning("%s: %d tensors have other shapes than the model's and are not loaded: %s", report.path,
                           len(incompatible.incorrect_shapes),
                           ", ".join(f"{k} {tuple(a)} vs {tuple(b)}" for k, a, b in incompatible.incorrect_shapes[:3]))
        if incompatible.unexpected_keys:
            logger.info("%s: %d tensors not used by this model (e.g. %s)", report.path, len(incompatible.unexpected_keys),
                        ", ".join(sorted(incompatible.unexpected_keys)[:3]))
        report.check(self.pretrained_parts)
