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
    R = len(proposal_boxes)
    iou = iou_all.new_zeros((num_phrases, R))
    matched = torch.zeros((num_phrases, R), dtype=torch.long, device=iou_all.device)
    for p in range(num_phrases):
        (rows,) = torch.nonzero(gt_phrase_ids == p, as_tuple=True)
        if len(rows):
            best, arg = iou_all[rows].max(dim=0)
            iou[p], matched[p] = best, rows[arg]
    return iou, matched


def sample_regions_per_phrase(iou, rois_per_phrase, positive_fraction, fg_threshold):
    """[P, R] IoU -> [P, R] bool mask of sampled regions (random, per phrase)."""
    sampled = torch.zeros_like(iou, dtype=torch.bool)
    for p in range(iou.shape[0]):
        labels = torch.where(iou[p] >= fg_threshold, 0, 1)  # 0 = foreground, 1 = background
        fg, bg = subsample_labels(labels, rois_per_phrase, positive_fraction, 1)
        sampled[p, fg] = True
        sampled[p, bg] = True
    return sampled
