"""Region features of a frozen detector, computed once per image and looked up afterwards.

Paper 003's released CITE code trains its region classifiers on region features computed once, by
the frozen detector, for every image; so does stage 3 of the recipe when
``PHRASEDET.RECIPE.REGION_CACHE`` is on (:class:`phrasedet.engine.hooks.RegionCacheHook`). A
:class:`RegionCache` holds, per image, what a frozen
:class:`~phrasedet.modeling.meta_arch.PhraseRCNN` computes before its region classifier
(:class:`CachedRegions`): the resized image's size, its proposals (those of the RPN at test time:
a frozen RPN proposes the same in training, :meth:`PhraseRCNN.forward`), their region features
(pooled feature (+) box geometry) and those of the image's ground-truth boxes.

An image's entry is computed the first time the model sees it, from that input alone (a batch of
one, as at test: in a batch, Detectron2 pads the smaller images to the largest, which changes the
backbone's features near their borders), and looked up by its key, (``file_name``, H, W) of the
mapped input, so an entry is used only for the image at the size it was computed at. Computing an
entry draws no random number. What depends on the classifier (the phrases, the sampled regions,
every score) is computed each step as without the cache; tests/modeling/test_region_cache.py
trains and validates both ways and compares.

The entries are valid only while the detector's weights stay as they were:
:meth:`RegionCache.check_frozen` refuses a model whose detector parts train or were changed, and
:meth:`RegionCache.bind` a model whose detector holds other weights.
"""
import hashlib
import logging
from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

import torch
from detectron2.structures import Boxes, Instances
from torch import nn

__all__ = ["CachedRegions", "RegionCache", "detector_parts", "image_key", "weights_digest"]

logger = logging.getLogger("phrasedet.modeling")


def image_key(inp: dict) -> Tuple[str, int, int]:
    """(``file_name``, H, W) of a mapped input (its ``image`` tensor is [3, H, W])."""
    h, w = inp["image"].shape[-2:]
    return str(inp.get("file_name", inp.get("image_id"))), int(h), int(w)


def detector_parts(model) -> List[nn.Module]:
    """The parts of a ``PhraseRCNN`` whose outputs the cache holds: backbone, proposal generator
    and region-feature extractor."""
    return [model.backbone, model.proposal_generator, model.roi_heads.region_features]


def weights_digest(modules: Sequence[nn.Module]) -> str:
    """The sha256 of the modules' parameters and buffers (names, dtypes, shapes and bytes, in order)."""
    h = hashlib.sha256()
    for k, m in enumerate(modules):
        for name, t in (*m.named_parameters(), *m.named_buffers()):
            array = t.detach().cpu().contiguous().numpy()
            h.update(f"{k}.{name}:{array.dtype}:{array.shape};".encode())
            h.update(array.tobytes())
    return h.hexdigest()


@dataclass
class CachedRegions:
    """One image's entry; tensors on the CPU.

    Attributes:
        image_size: (H, W) of the resized image.
        proposal_boxes: [R, 4] xyxy in the resized image.
        objectness_logits: [R].
        proposal_features: [R, D].
        gt_boxes: [G, 4] the image's distinct ground-truth boxes (those of the input it was
            computed from).
        gt_features: [G, D].
    """

    image_size: Tuple[int, int]
    proposal_boxes: torch.Tensor
    objectness_logits: torch.Tensor
    proposal_features: torch.Tensor
    gt_boxes: torch.Tensor
    gt_features: torch.Tensor

    def proposals(self, device) -> Instances:
        """The proposals as the RPN gives them: ``Instances`` with ``proposal_boxes`` and ``objectness_logits``."""
        inst = Instances(self.image_size)
        inst.proposal_boxes = Boxes(self.proposal_boxes.to(device))
        inst.objectness_logits = self.objectness_logits.to(device)
        return inst

    def gt_rows(self, gt_boxes: torch.Tensor) -> torch.Tensor:
        """[N] index into :attr:`gt_boxes` of each of ``gt_boxes`` [N, 4] (equal coordinates), -1
        for a box not cached."""
        if len(gt_boxes) == 0 or len(self.gt_boxes) == 0:
            return torch.full((len(gt_boxes),), -1, dtype=torch.long)
        same = (gt_boxes.cpu()[:, None, :] == self.gt_boxes[None]).all(dim=2)  # [N, G]
        return torch.where(same.any(dim=1), same.float().argmax(dim=1), -1)

    def gt_region_features(self, gt_boxes: torch.Tensor, device) -> torch.Tensor:
        """[N, D] features of ``gt_boxes`` [N, 4] (all cached)."""
        return self.gt_features[self.gt_rows(gt_boxes)].to(device)

    def region_rows(self, gt_boxes: torch.Tensor, device) -> torch.Tensor:
        """[R + N, D] features of the proposals followed by ``gt_boxes`` [N, 4] (all cached), the
        order of Detectron2's ``add_ground_truth_to_proposals``."""
        return torch.cat([self.proposal_features.to(device), self.gt_region_features(gt_boxes, device)])


def _gt_boxes(inp: dict) -> torch.Tensor:
    """[G, 4] distinct ground-truth boxes of a mapped input (G = 0 without ``instances``)."""
    if "instances" not in inp or len(inp["instances"]) == 0:
        return torch.zeros((0, 4))
    return torch.unique(inp["instances"].gt_boxes.tensor.cpu(), dim=0)


class RegionCache:
    """{image key: :class:`CachedRegions`} of the frozen detector of ``model`` (see the module
    docstring), filled as :meth:`lookup` meets images.

    Args:
        model: a ``PhraseRCNN`` whose detector parts (:func:`detector_parts`) are frozen; their
            weights' digest is kept, so a model built again with the same detector can use the
            entries (:meth:`bind`).
    """

    def __init__(self, model):
        self._entries: Dict[tuple, CachedRegions] = {}
        self.digest = weights_digest(detector_parts(model))
        self.bind(model)

    def bind(self, model) -> "RegionCache":
        """Compute and look up entries with ``model`` from now on; its detector must hold the
        weights the entries were computed with, frozen.

        Raises:
            ValueError: when its weights differ.
        """
        if weights_digest(detector_parts(model)) != self.digest:
            raise ValueError("region cache: this model's detector differs from the one the cache was computed with")
        self._model = model
        self._snapshot = self._fingerprint()
        self.computed = 0
        self.check_frozen()
        return self

    def _fingerprint(self) -> list:
        # a tensor's version counter grows with every in-place change (a checkpoint loaded into it too)
        return [(t.data_ptr(), t._version) for m in detector_parts(self._model) for t in (*m.parameters(), *m.buffers())]

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key) -> bool:
        return key in self._entries

    def check_frozen(self) -> None:
        """Raise when a detector part has a parameter that trains, or its weights or buffers changed."""
        training = [n for m in detector_parts(self._model) for n, p in m.named_parameters() if p.requires_grad]
        if training or self._fingerprint() != self._snapshot:
            raise RuntimeError("region cache: the detector it was computed with is no longer frozen "
                               f"({training[:3] or 'its weights changed'}); set PHRASEDET.RECIPE.REGION_CACHE False "
                               "to train the detector")

    @torch.no_grad()
    def _compute(self, inp: dict, gt: torch.Tensor) -> CachedRegions:
        """The entry of one mapped input: its proposals' and the boxes ``gt`` [G, 4]'s features,
        the detector parts in inference mode meanwhile."""
        model, parts = self._model, detector_parts(self._model)
        modes = [m.training for m in parts]
        for m in parts:
            m.train(False)
        try:
            images = model.preprocess_image([inp])
            features = model.backbone(images.tensor)
            proposals = model.proposal_generator(images, features, None)[0][0]
            boxes = Boxes(torch.cat([proposals.proposal_boxes.tensor, gt.to(model.device)]))
            rows = model.roi_heads.region_features(features, [boxes], images.image_sizes).cpu()
        finally:
            for m, mode in zip(parts, modes):
                m.train(mode)
        r = len(proposals)
        self.computed += 1
        return CachedRegions(tuple(images.image_sizes[0]), proposals.proposal_boxes.tensor.cpu(),
                             proposals.objectness_logits.cpu(), rows[:r], gt, rows[r:])

    def entry(self, inp: dict) -> CachedRegions:
        """The entry of a mapped input, computed now when the image is new or has a ground-truth
        box its entry lacks (then with the union of both inputs' boxes)."""
        key, gt = image_key(inp), _gt_boxes(inp)
        cached = self._entries.get(key)
        if cached is None or bool((cached.gt_rows(gt) < 0).any()):
            known = cached.gt_boxes if cached is not None else gt[:0]
            cached = self._entries[key] = self._compute(inp, torch.unique(torch.cat([known, gt]), dim=0))
        return cached

    def lookup(self, inputs: Sequence[dict]) -> List[CachedRegions]:
        """The entries of a batch of mapped inputs (:meth:`entry`), the detector checked frozen first."""
        self.check_frozen()
        return [self.entry(x) for x in inputs]
