"""Paper 000's logistic loss for the similarity network (Eq. 7), on balanced pairs.

For every positive pair (image owner[c], caption c) of the batch, one negative pair (the same
image, a caption c' of another dataset image drawn uniformly from the batch; paper 000, Sec. 5.1:
"a random sentence not tied to x"). The loss is log(1 + exp(-z p)) over all pairs, z = +1 for
positives and -1 for negatives, p the network's logit; summed or averaged over the pairs.
Negatives are drawn with torch's global generator (seeded by Detectron2's ``SEED``).
"""
import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["LogisticPairLoss", "sample_negative_captions"]


def sample_negative_captions(owner: torch.Tensor, image_keys: torch.Tensor, generator=None) -> tuple:
    """For each caption's image, one caption of another dataset image.

    Args:
        owner: [C] long, the image row of each caption.
        image_keys: [I] long, dataset identifiers of the images.

    Returns:
        (anchors, negatives): [A] caption indices whose image has a caption of another image in
        the batch, and [A] the drawn caption for each (pair: image owner[anchor], caption negative).
    """
    caption_keys = image_keys[owner]
    allowed = (caption_keys[:, None] != caption_keys[None, :]).float()  # [C, C]
    anchors = allowed.sum(dim=1).nonzero().flatten()
    if anchors.numel() == 0:
        return anchors, anchors
    negatives = torch.multinomial(allowed[anchors], 1, generator=generator).flatten()
    return anchors, negatives


class LogisticPairLoss(nn.Module):
    """Balanced logistic loss on ``scorer.paired`` logits.

    Args:
        reduction: ``"sum"`` or ``"mean"`` over the pairs.
    """

    def __init__(self, reduction: str = "mean"):
        super().__init__()
        if reduction not in ("sum", "mean"):
            raise ValueError(f"reduction must be 'sum' or 'mean', got {reduction!r}")
        self.reduction = reduction

    def forward(self, scorer, images, captions, owner, image_keys) -> dict:
        """
        Args:
            scorer: has ``paired(images [k, D], captions [k, D]) -> [k]`` logits.
            images: [I, D]; captions: [C, D]; owner: [C] long; image_keys: [I] long.

        Returns:
            ``{"loss_pair_logistic": loss}``.
        """
        pos = scorer.paired(images[owner], captions)
        anchors, negs = sample_negative_captions(owner, image_keys)
        neg = scorer.paired(images[owner[anchors]], captions[negs])
        losses = torch.cat([F.softplus(-pos), F.softplus(neg)])
        return {"loss_pair_logistic": losses.sum() if self.reduction == "sum" else losses.mean()}
