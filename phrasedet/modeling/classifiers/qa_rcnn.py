"""QA R-CNN (Hinami & Satoh; paper 003 Sec. 3.3.1): a linear classifier whose weights are
generated from the phrase, w = W v, scoring region r by <r, w>; sigmoid cross-entropy with every
phrase of the image its own category."""
import torch
import torch.nn.functional as F
from torch import nn

from .build import REGION_CLASSIFIER_REGISTRY, dot_scores

__all__ = ["QARCNNClassifier"]


@REGION_CLASSIFIER_REGISTRY.register()
class QARCNNClassifier(nn.Module):
    """logit(p, r) = <r, W v_p> + b.

    A region is positive for phrase p when its IoU with p's box is at least
    ``MODEL.ROI_HEADS.IOU_THRESHOLDS[0]`` (paper: 0.5); the loss averages over the sampled
    (phrase, region) entries.
    """

    def __init__(self, cfg, region_dim: int, phrase_dim: int):
        super().__init__()
        self.weight_generator = nn.Linear(phrase_dim, region_dim)
        nn.init.normal_(self.weight_generator.weight, std=0.01)
        nn.init.zeros_(self.weight_generator.bias)
        self.bias = nn.Parameter(torch.zeros(()))
        self.fg_threshold = cfg.MODEL.ROI_HEADS.IOU_THRESHOLDS[0]

    def encode_phrases(self, phrase_feats):
        """[P, D_t] -> the generated classifier weights w = W v, [P, D_r]."""
        return self.weight_generator(phrase_feats)

    def score_encoded(self, region_feats, weights, region_index=None):
        """[R, D_r], [P, D_r] -> logits [P, R] ([P, k] for ``region_index`` [P, k])."""
        return dot_scores(weights, region_feats, region_index) + self.bias

    def forward(self, region_feats, phrase_feats, targets=None):
        """[R, D_r], [P, D_t] -> logits [P, R] and the sigmoid cross-entropy when ``targets`` is given."""
        logits = self.score_encoded(region_feats, self.encode_phrases(phrase_feats))
        if targets is None:
            return logits, {}
        if not targets.sampled.any():  # an image without phrases: keep the graph, add nothing
            return logits, {"loss_phrase_cls": logits.sum() * 0.0}
        labels = (targets.iou >= self.fg_threshold).to(logits.dtype)
        loss = F.binary_cross_entropy_with_logits(logits[targets.sampled], labels[targets.sampled], reduction="mean")
        return logits, {"loss_phrase_cls": loss}
