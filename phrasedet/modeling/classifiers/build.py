"""The region-classifier registry: the part of a phrase-conditioned ROI head that scores
(phrase, region) pairs. QA R-CNN lives here; CCA, Embedding Network and CITE plug in the same way.

A classifier is an ``nn.Module`` built as ``cls(cfg, region_dim, phrase_dim)`` with

``forward(region_feats, phrase_feats, targets=None) -> (logits, losses)``:
    region_feats: [R, D_r] features of one image's regions (pooled ROI feature + 5-d geometry);
    phrase_feats: [P, D_t] features of the phrases asked about in that image;
    targets: ``None`` at inference, else a :class:`PhraseTargets` (per-phrase labels);
    logits: [P, R] scores, comparable across images (sigmoid gives a probability);
    losses: dict of scalar losses (empty at inference).

Optionally, for open-vocabulary inference, a classifier splits its phrase-side work off:
``encode_phrases(phrase_feats [P, D_t]) -> codes`` (a tensor with P rows, computed once per
vocabulary, not once per image) and ``score_encoded(region_feats, codes) -> logits [P, R]``.
"""
from dataclasses import dataclass

import torch
from detectron2.utils.registry import Registry

__all__ = ["REGION_CLASSIFIER_REGISTRY", "PhraseTargets", "build_region_classifier"]

REGION_CLASSIFIER_REGISTRY = Registry("REGION_CLASSIFIER")
REGION_CLASSIFIER_REGISTRY.__doc__ = __doc__


@dataclass
class PhraseTargets:
    """Per-phrase supervision of one image's regions.

    Attributes:
        iou: [P, R] float, IoU of region r with phrase p's ground truth (max over its instances).
        sampled: [P, R] bool, the regions sampled for phrase p (foreground fraction capped, as
            in Faster R-CNN's per-image sampling, but per phrase).
    """

    iou: torch.Tensor
    sampled: torch.Tensor


def build_region_classifier(cfg, region_dim: int, phrase_dim: int):
    """``MODEL.PHRASE_ROI_HEADS.CLASSIFIER`` built for the given feature sizes."""
    return REGION_CLASSIFIER_REGISTRY.get(cfg.MODEL.PHRASE_ROI_HEADS.CLASSIFIER)(cfg, region_dim, phrase_dim)
