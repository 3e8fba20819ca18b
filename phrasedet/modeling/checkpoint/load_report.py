"""What a checkpoint initialized: one line per model part, and the check of the parts the config
says come pretrained (``PHRASEDET.WEIGHTS.PRETRAINED_PARTS``).

A part is a direct child of the model, or a child of one of :data:`EXPANDED` (``roi_heads``,
``image_encoder``): e.g. ``backbone``, ``proposal_generator``, ``roi_heads.region_features``,
``roi_heads.classifier``, ``image_encoder.backbone``, ``sentence_encoder``. Tensors are the
model's state dict but BatchNorm's ``num_batches_tracked`` counters.
"""
import logging
from dataclasses import dataclass, field
from typing import List, Sequence, Set

from torch import nn

from phrasedet.fileio import BadFileError

__all__ = ["EXPANDED", "LoadReport", "PretrainedPartError", "model_parts"]

logger = logging.getLogger(__name__)
EXPANDED = ("roi_heads", "image_encoder")
PRETRAINED_KEY = "PHRASEDET.WEIGHTS.PRETRAINED_PARTS"
SHOWN = 3  # tensor names shown per line


class PretrainedPartError(BadFileError):
    """A part the config says is pretrained was not (wholly) initialized by the weights file."""


def model_parts(model: nn.Module) -> List[str]:
    """The parts of ``model`` (see the module docstring), in module order."""
    parts = []
    for name, child in model.named_children():
        grandchildren = [f"{name}.{n}" for n, _ in child.named_children()] if name in EXPANDED else []
        parts.extend(grandchildren or [name])
    return parts


def counted_tensors(model: nn.Module) -> List[str]:
    """The names of ``model``'s state-dict tensors that a checkpoint should hold."""
    return [k for k in model.state_dict() if not k.endswith("num_batches_tracked")]


def _under(keys, prefix: str) -> List[str]:
    return [k for k in keys if k.startswith(prefix + ".")]


def _names(keys, prefix: str) -> str:
    shown = [k[len(prefix) + 1:] for k in keys[:SHOWN]]
    return ", ".join(shown) + (", ..." if len(keys) > SHOWN else "")


@dataclass
class LoadReport:
    """The ``tensors`` of a model of ``parts`` (:func:`model_parts`) after loading ``path``:
    ``loaded`` (from the file), and ``reinitialized`` (knowingly left new, e.g. RPN outputs of
    other anchors)."""

    path: str
    parts: Sequence[str]
    tensors: Sequence[str]
    loaded: Set[str]
    reinitialized: Set[str] = field(default_factory=set)

    def part_line(self, part: str) -> str:
        keys = _under(self.tensors, part)
        new = [k for k in keys if k not in self.loaded]
        if not new:
            return f"{part}: loaded from {self.path} ({len(keys)} tensors)"
        if len(new) == len(keys):
            return f"{part}: not in the file, kept as built ({len(keys)} tensors)"
        return f"{part}: partly loaded ({len(keys) - len(new)} of {len(keys)}; new: {_names(new, part)})"

    def log(self) -> None:
        """One line per part that has tensors; tensors outside every part go in one more line."""
        for part in self.parts:
            if _under(self.tensors, part):
                logger.info(self.part_line(part))
        outside = [k for k in self.tensors if not any(k.startswith(p + ".") for p in self.parts)]
        if outside:
            loaded = [k for k in outside if k in self.loaded]
            logger.info("other tensors: %d of %d loaded from %s (%s)", len(loaded), len(outside), self.path, ", ".join(outside[:SHOWN]))

    def check(self, pretrained: Sequence[str]) -> None:
        """Raise :class:`PretrainedPartError` for the first part of ``pretrained`` that the file left
        (partly) random, and ``ValueError`` for one that names no tensor of the model."""
        for part in pretrained:
            keys = _under(self.tensors, part)
            if not keys:
                raise ValueError(f"{PRETRAINED_KEY} names {part!r}, which has no tensor in this model "
                                          f"(its parts: {', '.join(p for p in self.parts if _under(self.tensors, p))})")
            new = [k for k in keys if k not in self.loaded and k not in self.reinitialized]
            if new:
                raise PretrainedPartError(
                    f"{self.path}: {part} is listed in {PRETRAINED_KEY} but {len(new)} of its {len(keys)} tensors are not in "
                    f"this file (or have other shapes), e.g. {', '.join(new[:SHOWN])}: set MODEL.WEIGHTS to a checkpoint "
                    f"that has them, or remove {part!r} from {PRETRAINED_KEY} to train it from scratch")

