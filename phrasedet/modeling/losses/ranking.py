"""Bidirectional ranking (hinge) losses over in-batch negatives.

A batch holds I images and C captions; caption c belongs to image ``owner[c]``, so (owner[c], c)
are the C positive pairs. With scores S [I, C] and margin m, each positive pair gets two hinge
rows (paper 000 Eq. 3; VSE++ Eq. 5-6):

* image-anchored (captions ranked for the image; paper 000's lambda_1 term, VSE++'s caption
  retrieval): [m + S[owner[c], c'] - S[owner[c], c]]_+ for every negative caption c';
* caption-anchored (images ranked for the caption; lambda_2, VSE++'s image retrieval):
  [m + S[i', c] - S[owner[c], c]]_+ for every negative image i'.

A pair is a negative when its image and caption come from different dataset images
(``mask_same_image``), or, as in the released VSE++ code, whenever the caption is not the row's
own (a second caption of the same image in the batch is then a negative). Each row of hinges is
reduced over its negatives by ``negatives``: ``"all"`` sums them (sum of hinges, VSE0),
``"hardest"`` keeps the largest (max of hinges, VSE++), ``"topk"`` sums the K largest (paper 000,
K = 10 for retrieval); rows are then summed (VSE++ code) or averaged over the batch.

Paper 000's sentence-neighbourhood term (Eq. 6, lambda_4): a caption should be closer to the other
captions of its image than to captions of other images; its released code takes, per caption, the
farthest caption of the same image as the positive and the captions of other images as negatives,
reduced as above. Captions whose image has no other caption in the batch have no such row.

Scores are cosines (``distance="cosine"``: dot products of L2-normalized embeddings, VSE++) or
minus the Euclidean distance (``"euclidean"``, paper 000: its code's sqrt(|a|^2 - 2ab + |b|^2 + 1e-4)).
"""
import torch
from torch import nn

from .gather import gather_batch

__all__ = ["NEGATIVE_MODES", "DISTANCES", "RankingLoss", "embedding_scores", "mean_topk", "neighbourhood_hinges",
           "ranking_hinges", "reduce_hinges"]

NEGATIVE_MODES = ("all", "hardest", "topk")
DISTANCES = ("cosine", "euclidean")
REDUCTIONS = ("sum", "mean")
_EUCLIDEAN_EPS = 1e-4  # paper 000's code


def mean_topk(values: torch.Tensor, k: int) -> torch.Tensor:
    """Mean of the k largest entries of ``values`` (all of them if there are fewer)."""
    values = values.reshape(-1)
    return values.topk(min(k, values.numel())).values.mean()


def embedding_scores(a: torch.Tensor, b: torch.Tensor, distance: str = "cosine") -> torch.Tensor:
    """[n, D], [m, D] -> [n, m]: a @ b.T (``"cosine"``) or minus the Euclidean distance."""
    if distance == "cosine":
        return a @ b.t()
    if distance == "euclidean":
        sq = (a * a).sum(1)[:, None] - 2 * (a @ b.t()) + (b * b).sum(1)[None, :]
        return -(sq.clamp(min=0) + _EUCLIDEAN_EPS).sqrt()
    raise ValueError(f"distance must be one of {DISTANCES}, got {distance!r}")


def ranking_hinges(scores: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor, margin: float) -> torch.Tensor:
    """Hinges of anchors against their candidates.

    Args:
        scores: [A, G] score of each anchor with each candidate.
        positive: [A] the score of each anchor's positive.
        negative: [A, G] bool, which candidates are negatives of the anchor.
        margin: m.

    Returns:
        [A, G]: [m + scores - positive]_+ on negatives, 0 elsewhere.
    """
    hinges = (margin + scores - positive[:, None]).clamp(min=0)
    return hinges.masked_fill(~negative, 0.0)


def reduce_hinges(hinges: torch.Tensor, mode: str, k: int = 1) -> torch.Tensor:
    """[A, G] hinges (0 on non-negatives) -> [A]: their sum (``"all"``), maximum (``"hardest"``)
    or the sum of the k largest (``"topk"``). Hinges are >= 0, so masked entries never win."""
    if hinges.shape[1] == 0:
        return hinges.new_zeros(hinges.shape[0])
    if mode == "all":
        return hinges.sum(dim=1)
    if mode == "hardest":
        return hinges.amax(dim=1)
    if mode == "topk":
        return hinges.topk(min(k, hinges.shape[1]), dim=1).values.sum(dim=1)
    raise ValueError(f"negatives must be one of {NEGATIVE_MODES}, got {mode!r}")


def neighbourhood_hinges(scores: torch.Tensor, same: torch.Tensor, margin: float) -> torch.Tensor:
    """Paper 000's within-modality term for anchors with a neighbour.

    Args:
        scores: [C, C] caption-caption scores.
        same: [C, C] bool, captions of the same dataset image (the diagonal is ignored).

    Returns:
        [A, C] hinges of the A captions that have another caption of their image: against the
        captions of other images, with the farthest same-image caption as the positive.
    """
    eye = torch.eye(scores.shape[0], dtype=torch.bool, device=scores.device)
    neighbour = same & ~eye
    anchors = neighbour.any(dim=1)
    farthest = scores.masked_fill(~neighbour, float("inf")).amin(dim=1)
    return ranking_hinges(scores[anchors], farthest[anchors], ~same[anchors], margin)


class RankingLoss(nn.Module):
    """The bidirectional ranking loss of the module docstring on one batch.

    Args:
        margin: m (VSE++ 0.2, paper 000 0.05).
        negatives: ``"all"``, ``"hardest"`` or ``"topk"`` (see :func:`reduce_hinges`).
        topk: K for ``"topk"``.
        distance: ``"cosine"`` or ``"euclidean"`` (see :func:`embedding_scores`).
        image_weight, caption_weight: lambda_1, lambda_2 (weight 0 drops the term).
        neighbourhood_weight: lambda_4 of the sentence-neighbourhood term (0 = off).
        reduction: ``"sum"`` or ``"mean"`` of the rows over the batch.
        mask_same_image: never use a caption of the same dataset image as a negative.
        gather: with several processes, rank against the whole global batch (:func:`gather_batch`).
    """

    def __init__(self, margin: float = 0.2, negatives: str = "hardest", topk: int = 10, distance: str = "cosine",
                 image_weight: float = 1.0, caption_weight: float = 1.0, neighbourhood_weight: float = 0.0,
                 reduction: str = "sum", mask_same_image: bool = True, gather: bool = True):
        super().__init__()
        for value, allowed, name in ((negatives, NEGATIVE_MODES, "negatives"), (distance, DISTANCES, "distance"),
                                     (reduction, REDUCTIONS, "reduction")):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
        if topk < 1:
            raise ValueError(f"topk must be >= 1, got {topk}")
        self.margin, self.negatives, self.topk, self.distance = float(margin), negatives, int(topk), distance
        self.weights = {"loss_image_anchored": image_weight, "loss_caption_anchored": caption_weight,
                        "loss_neighbourhood": neighbourhood_weight}
        self.reduction, self.mask_same_image, self.gather = reduction, mask_same_image, gather

    def _reduce(self, hinges: torch.Tensor) -> torch.Tensor:
        rows = reduce_hinges(hinges, self.negatives, self.topk)
        if self.reduction == "sum" or rows.numel() == 0:
            return rows.sum()
        return rows.mean()

    def forward(self, images: torch.Tensor, captions: torch.Tensor, owner: torch.Tensor, image_keys: torch.Tensor) -> dict:
        """
        Args:
            images: [I, D] image embeddings.
            captions: [C, D] caption embeddings.
            owner: [C] long, the row in ``images`` of each caption's image.
            image_keys: [I] long, a dataset-wide identifier of each image.

        Returns:
            dict of the weighted terms with a non-zero weight: ``loss_image_anchored``,
            ``loss_caption_anchored``, ``loss_neighbourhood``.
        """
        if self.gather:
            images, captions, owner, image_keys = gather_batch(images, captions, owner, image_keys)
        scores = embedding_scores(images, captions, self.distance)  # [I, C]
        positive = scores[owner, torch.arange(len(owner), device=owner.device)]
        if self.mask_same_image:
            negative = image_keys[:, None] != image_keys[owner][None, :]  # [I, C]
        else:
            negative = torch.arange(len(images), device=owner.device)[:, None] != owner[None, :]
        terms = {
            "loss_image_anchored": lambda: ranking_hinges(scores[owner], positive, negative[owner], self.margin),
            "loss_caption_anchored": lambda: ranking_hinges(scores.t(), positive, negative.t(), self.margin),
            "loss_neighbourhood": lambda: self._neighbourhood(captions, image_keys[owner]),
        }
        return {name: weight * self._reduce(terms[name]()) for name, weight in self.weights.items() if weight}

    def _neighbourhood(self, captions: torch.Tensor, caption_keys: torch.Tensor) -> torch.Tensor:
        same = caption_keys[:, None] == caption_keys[None, :]
        return neighbourhood_hinges(embedding_scores(captions, captions, self.distance), same, self.margin)
