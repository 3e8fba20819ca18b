"""Per-phrase ROI sampling (paper 003's code): for each phrase of an image separately, sample
``rois_per_phrase`` regions from the shared proposals with at most ``positive_fraction``
foreground (IoU >= threshold with that phrase's box). A region positive for phrase A is
background for phrase B."""
import torch
from detectron2.modeling.sampling import subsample_labels
from detectron2.structures import pairwise_iou

__all__ = ["phrase_iou", "sample_regions_per_phrase"]


def phrase_iou(proposal_boxes, gt_boxes, gt_phrase_ids, num_phrases):
    """IoU of every region with every phrase, and the phrase box each region matches best.

    Args:
        proposal_boxes: :class:`Boxes` [R].
        gt_boxes: :class:`Boxes` [N] of the image's phrase instances.
        gt_phrase_ids: [N] long, phrase index of each instance, -1 for phrases not asked about.
        num_phrases: P.

    Returns:
        iou [P, R] (max over the phrase's instances, 0 without instance) and matched [P, R] long,
        the index into ``gt_boxes`` of that best instance (undefined where iou is 0).
    """
    iou_all = pairwise_iou(gt_boxes, proposal_boxes)  # [N, R]
    owns = gt_phrase_ids.to(iou_all.device)[None, :] == torch.arange(num_phrases, device=iou_all.device)[:, None]  # [P, N]
    # IoU >= 0, so -1 keeps another phrase's instances out of the max; the first best instance wins ties
    best, matched = torch.where(owns[:, :, None], iou_all[None], -1.0).max(dim=1)  # [P, R]
    has = owns.any(dim=1, keepdim=True)
    return torch.where(has, best, 0.0), torch.where(has, matched, 0)


def sample_regions_per_phrase(iou, rois_per_phrase, positive_fraction, fg_threshold):
    """[P, R] IoU -> [P, R] bool mask of sampled regions (random, per phrase)."""
    sampled = torch.zeros_like(iou, dtype=torch.bool)
    for p in range(iou.shape[0]):
        labels = torch.where(iou[p] >= fg_threshold, 0, 1)  # 0 = foreground, 1 = background
        fg, bg = subsample_labels(labels, rois_per_phrase, positive_fraction, 1)
        sampled[p, fg] = True
        sampled[p, bg] = True
    return sampled
