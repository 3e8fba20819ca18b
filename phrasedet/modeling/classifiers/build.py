"""The region-classifier registry: the part of a phrase-conditioned ROI head that scores
(phrase, region) pairs. QA R-CNN lives here; CCA, Embedding Network and CITE plug in the same way.

A classifier is an ``nn.Module`` built as ``cls(cfg, region_dim, phrase_dim)`` with

``forward(region_feats, phrase_feats, targets=None) -> (logits, losses)``:
    region_feats: [R, D_r] features of one image's regions (pooled ROI feature + 5-d geometry);
    phrase_feats: [P, D_t] features of the phrases asked about in that image;
    targets: ``None`` at inference, else a :class:`PhraseTargets` (per-phrase labels);
    logits: [P, R] scores, comparable across images (sigmoid gives a probability);
    losses: dict of scalar losses (empty at inference).

For open-vocabulary inference a classifier splits its phrase-side work off (all four built-in
classifiers do; a third-party one without these methods is scored through ``forward``):

``encode_phrases(phrase_feats [P, D_t]) -> codes``: a tensor with P rows, computed once per
    vocabulary, not once per image;
``score_encoded(region_feats [R, D_r], codes [P, ...], region_index=None) -> logits``: [P, R],
    or, given ``region_index`` [P, k] (long), only those pairs: [P, k] with entry (p, j) the score
    of region ``region_index[p, j]`` for phrase p (the cascade of ``PhraseROIHeads`` scores a
    shortlist this way).
"""
from dataclasses import dataclass

import torch
from detectron2.utils.registry import Registry

__all__ = ["REGION_CLASSIFIER_REGISTRY", "PhraseTargets", "build_region_classifier", "dot_scores"]

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


def dot_scores(phrase_codes, region_codes, region_index=None):
    """Dot products of phrase and region codes.

    Args:
        phrase_codes: [P, E]; region_codes: [R, E];
        region_index: None, or [P, k] long: score only region ``region_index[p, j]`` for phrase p.

    Returns:
        [P, R] (all pairs) or [P, k].
    """
    if region_index is None:
        return phrase_codes @ region_codes.t()
    return (phrase_codes[:, None, :] * region_codes[region_index]).sum(-1)
