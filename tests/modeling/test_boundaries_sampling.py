"""Boundary values of training-time sampling, checked on hand cases (issue 14): the ROI foreground
IoU (exactly 0.5 is foreground, the float32 just below is background, [0, 0.5) is the background
range), the 25 % foreground fraction read off the sampled mask itself, the phrases-per-image cap,
the hard negatives' count ceil(fraction * P) and their foreground rows.

Each case is built so that the mutation named in its comment (``>=`` -> ``>``, an off-by-one, a
dropped term) changes a count or a value the test asserts; see the comments.
"""
import math

import numpy as np
import pytest
import torch
from detectron2.structures import Boxes, Instances

from phrasedet.data.phrase_sampling import choose_phrases
from phrasedet.modeling.classifiers import PhraseTargets
from phrasedet.modeling.roi_heads.negative_phrases import append_negative_targets, negatives_per_image
from phrasedet.modeling.roi_heads.phrase_sampling import phrase_iou, sample_regions_per_phrase

HALF = 0.5
BELOW_HALF = torch.nextafter(torch.tensor(0.5), torch.tensor(0.0)).item()  # the float32 just below 0.5


def _fg_bg(iou, sampled, threshold=HALF):
    """(#sampled foreground, #sampled background) per phrase row."""
    fg = sampled & (iou >= threshold)
    return fg.sum(1).tolist(), (sampled & ~(iou >= threshold)).sum(1).tolist()


# ---------------------------------------------------------------- the foreground IoU threshold
def test_iou_exactly_at_the_threshold_is_foreground_and_just_below_is_background():
    # one phrase, 4 regions: IoU 0.5, 0.5, 0.5 - 1 ulp, 0; 4 ROIs at 25 % -> int(4 * 0.25) = 1 foreground slot.
    # Correct (>=): fg candidates {0, 1} -> 1 of them; bg {2, 3} -> min(2, 4 - 1) = 2 -> 3 sampled in all.
    # Mutant (>): no fg candidate -> 0 fg, bg {0, 1, 2, 3} -> min(4, 4) = 4 sampled.
    # Mutant (threshold lowered by an ulp, i.e. > 0.5 - 1 ulp): fg {0, 1, 2} -> 1, bg {3} -> 2 sampled.
    iou = torch.tensor([[HALF, HALF, BELOW_HALF, 0.0]])
    for seed in range(5):
        torch.manual_seed(seed)
        sampled = sample_regions_per_phrase(iou, 4, 0.25, 0.5)
        assert sampled.sum().item() == 3
        assert sampled[0, 2] and sampled[0, 3]  # both background regions, IoU 0 included
        assert sampled[0, :2].sum().item() == 1  # exactly one of the two regions at IoU 0.5


def test_background_range_starts_at_zero():
    # DECISIONS.md: background is [0, 0.5). Regions at IoU exactly 0 (no overlap) must be eligible:
    # 1 fg (IoU 0.9) and 7 bg at IoU 0 -> int(8 * 0.25) = 2 fg slots, 1 used; 8 - 1 = 7 bg slots -> all 7.
    # A lower background bound (Fast R-CNN's old BG_THRESH_LO 0.1, i.e. iou > 0 or >= 0.1) leaves 1 sampled.
    iou = torch.tensor([[0.9] + [0.0] * 7])
    torch.manual_seed(0)
    sampled = sample_regions_per_phrase(iou, 8, 0.25, 0.5)
    assert sampled.all()


# ---------------------------------------------------------------- the foreground fraction, on the mask itself
def test_foreground_fraction_is_a_quarter_of_the_roi_batch_per_phrase():
    # 100 candidate regions, a batch of 64 per phrase: int(64 * 0.25) = 16 foreground slots.
    # row 0: 60 fg (IoU exactly 0.5) + 40 bg (0.5 - 1 ulp): 16 fg; min(40, 64 - 16 = 48) = 40 bg.
    # row 1: only 5 fg (IoU 1) + 95 bg (IoU 0): 5 fg; min(95, 64 - 5 = 59) = 59 bg.
    # row 2: all 100 fg (IoU 0.7): 16 fg; no bg available, so only 16 sampled (the quota is a cap).
    # row 3: no foreground at all: 0 fg; min(100, 64) = 64 bg.
    iou = torch.zeros(4, 100)
    iou[0, :60], iou[0, 60:] = HALF, BELOW_HALF
    iou[1, :5] = 1.0
    iou[2, :] = 0.7
    for seed in range(3):
        torch.manual_seed(seed)
        sampled = sample_regions_per_phrase(iou, 64, 0.25, 0.5)
        fg, bg = _fg_bg(iou, sampled)
        assert fg == [16, 5, 16, 0]
        assert bg == [40, 59, 0, 64]
        assert sampled[1, :5].all()  # every scarce foreground region is taken
    # > instead of >=: row 0 gives fg 0, bg 64. fg/bg labels swapped: row 0 gives fg 48, bg 16.


def test_fraction_rounds_down_and_the_batch_is_filled_with_background():
    # 10 ROIs at 25 %: int(2.5) = 2 foreground slots (Detectron2's subsample_labels), 8 background.
    iou = torch.tensor([[0.8] * 6 + [0.1] * 14])
    torch.manual_seed(0)
    fg, bg = _fg_bg(iou, sample_regions_per_phrase(iou, 10, 0.25, 0.5))
    assert (fg, bg) == ([2], [8])


def test_each_phrase_samples_its_own_quota_from_the_shared_regions():
    # 2 phrases on the same 8 regions; region r is fg for phrase 0 iff r < 4 and for phrase 1 iff r >= 4.
    # 4 ROIs per phrase at 50 %: 2 fg + 2 bg each, and a region fg for one phrase is bg for the other.
    boxes = Boxes(torch.tensor([[0.0, 0, 10, 10]] * 4 + [[20.0, 20, 30, 30]] * 4))
    gt = Boxes(torch.tensor([[0.0, 0, 10, 10], [20.0, 20, 30, 30]]))
    iou, _ = phrase_iou(boxes, gt, torch.tensor([0, 1]), 2)
    assert iou.tolist() == [[1.0] * 4 + [0.0] * 4, [0.0] * 4 + [1.0] * 4]
    torch.manual_seed(0)
    sampled = sample_regions_per_phrase(iou, 4, 0.5, 0.5)
    fg, bg = _fg_bg(iou, sampled)
    assert fg == [2, 2] and bg == [2, 2]
    assert sampled[0, 4:].sum() == 2 and sampled[1, :4].sum() == 2  # the other phrase's fg as bg


# ---------------------------------------------------------------- the ROI heads on real boxes
def _image(proposal_boxes, gt_boxes, phrase_ids, size=(64, 64)):
    props = Instances(size)
    props.proposal_boxes = Boxes(torch.tensor(proposal_boxes))
    props.objectness_logits = torch.zeros(len(proposal_boxes))
    tgt = Instances(size)
    tgt.gt_boxes = Boxes(torch.tensor(gt_boxes))
    tgt.gt_phrase_ids = torch.tensor(phrase_ids)
    tgt.gt_classes = torch.zeros(len(gt_boxes), dtype=torch.long)
    return props, tgt


def test_roi_heads_sample_a_proposal_at_iou_exactly_one_half_as_foreground():
    from tests.modeling.test_phrase_roi_heads import _cfg, _heads

    heads = _heads(_cfg())
    assert heads.fg_threshold == 0.5 and heads.positive_fraction == 0.25  # IOU_THRESHOLDS[0], POSITIVE_FRACTION
    heads.rois_per_phrase = 4  # int(4 * 0.25) = 1 foreground slot
    # gt [0, 0, 10, 10] (area 100); proposals: A [0, 0, 5, 10] IoU 50 / 100 = 0.5 exactly,
    # B [0, 0, 4.96875, 10] IoU 49.6875 / 100 (just below), C disjoint (IoU 0); the gt box is appended (IoU 1).
    props, tgt = _image([[0.0, 0, 5, 10], [0.0, 0, 4.96875, 10], [20.0, 20, 30, 30]], [[0.0, 0, 10, 10]], [0])
    for seed in range(5):
        torch.manual_seed(seed)
        (boxes, targets, gt, _), = heads._sample([props], [tgt], [1])
        # fg candidates {A, gt}: one sampled; bg {B, C}: both -> 3 regions kept.
        # With > instead of >=: fg {gt}, bg {A, B, C} -> 4 regions kept and A a background.
        assert len(boxes) == 3
        kept = {tuple(b) for b in boxes.tensor.tolist()}
        assert {(0.0, 0.0, 4.96875, 10.0), (20.0, 20.0, 30.0, 30.0)} <= kept
        assert len(kept & {(0.0, 0.0, 5.0, 10.0), (0.0, 0.0, 10.0, 10.0)}) == 1
        assert int((targets.sampled & (targets.iou >= 0.5)).sum()) == 1
        assert sorted(targets.iou[0].tolist())[:2] == pytest.approx([0.0, 0.496875])


class _ZeroDeltas(torch.nn.Module):
    """A box regressor predicting no change: the loss is then |gt deltas| (L1, beta 0)."""

    def forward(self, region_feats, phrase_embeds):
        return region_feats.new_zeros(len(region_feats), 4)


def test_box_regression_covers_a_region_at_iou_exactly_one_half():
    from detectron2.modeling.box_regression import Box2BoxTransform

    from tests.modeling.test_phrase_roi_heads import _cfg, _heads

    heads = _heads(_cfg())
    heads.box_regressor = _ZeroDeltas()
    heads.box2box_transform = Box2BoxTransform(weights=(1.0, 1.0, 1.0, 1.0))
    heads.smooth_l1_beta = 0.0  # L1
    # one phrase, gt [0, 0, 10, 10]; region 0 [0, 0, 10, 20]: IoU 100 / 200 = 0.5; region 1: IoU 0.5 - 1 ulp,
    # both sampled. Region 0's target deltas: centre (5, 10) -> (5, 5), size 10 x 20 -> 10 x 10:
    # dx = 0, dy = (5 - 10) / 20 = -0.25, dw = log 1 = 0, dh = log(10 / 20) = -log 2.
    # Loss = (0.25 + log 2) / 2 sampled pairs. With > : 0. Region 1 [0, 0, 10, 40] would add
    # |(5 - 20) / 40| + |log(10 / 40)| = 0.375 + log 4 if it were (wrongly) foreground.
    boxes = Boxes(torch.tensor([[0.0, 0, 10, 20], [0.0, 0, 10, 40]]))
    targets = PhraseTargets(torch.tensor([[HALF, BELOW_HALF]]), torch.tensor([[True, True]]))
    gt = torch.tensor([[[0.0, 0, 10, 10], [0.0, 0, 10, 10]]])
    loss = heads._box_loss(boxes, torch.zeros(2, 1), torch.zeros(1, 1), targets, gt)
    assert loss.item() == pytest.approx((0.25 + math.log(2)) / 2, rel=1e-6)


# ---------------------------------------------------------------- phrases per image
class _NoDraw:
    """An RNG that must not be used: when every phrase fits, all are kept, no random draw."""

    def choice(self, *args, **kwargs):
        raise AssertionError("a random draw although every phrase fits in the budget")


def test_phrase_cap_boundaries():
    gt5, aug = ["a", "b", "c", "d", "e"], ["x", "y", "z"]
    one = lambda p: 1  # noqa: E731
    # exactly MAX_PER_IMAGE (5) ground-truth phrases: all kept in order, no augmented phrase, no draw.
    # (len(gt) > max instead of >= would take the budget branch: rng.choice(3, size=0) is called.)
    assert choose_phrases(gt5, aug, 5, one, _NoDraw()) == (gt5, [])
    # one slot left: every gt phrase and exactly 1 augmented one
    gt, chosen = choose_phrases(gt5[:4], aug, 5, one, np.random.default_rng(0))
    assert gt == gt5[:4] and len(chosen) == 1 and chosen[0] in aug
    # augmented phrases exactly filling the budget (5 - 2 = 3): all kept in order, no draw
    # (k > len(items) instead of >= in the draw would call rng.choice(3, size=3)).
    assert choose_phrases(gt5[:2], aug, 5, one, _NoDraw()) == (gt5[:2], aug)
    # one gt phrase over the cap: exactly 5 distinct gt phrases drawn, none augmented
    for seed in range(5):
        gt, chosen = choose_phrases(gt5 + ["f"], aug, 5, one, np.random.default_rng(seed))
        assert len(gt) == 5 and len(set(gt)) == 5 and set(gt) <= set(gt5 + ["f"]) and chosen == []
        assert gt == [p for p in gt5 + ["f"] if p in gt]  # input order
    # MAX_PER_IMAGE 1
    gt, chosen = choose_phrases(["a", "b"], aug, 1, one, np.random.default_rng(0))
    assert len(gt) == 1 and chosen == []


# ---------------------------------------------------------------- negative phrase augmentation
def test_negatives_per_image_is_the_ceiling_of_the_exact_product():
    # ceil(P / 4) by hand: P = 4 -> 1, 5 -> 2 (1.25 up), 8 -> 2, 9 -> 3; P = 0 -> 0
    assert [negatives_per_image(p, 0.25) for p in (0, 3, 4, 5, 8, 9, 12, 13)] == [0, 1, 1, 2, 2, 3, 3, 4]
    # 0.28 * 25 is 7 exactly, but the float product is 7.000000000000001: the 1e-9 tolerance keeps
    # ceil at 7 (math.ceil(0.28 * 25) alone would give 8).
    assert 0.28 * 25 > 7
    assert negatives_per_image(25, 0.28) == 7
    assert negatives_per_image(26, 0.28) == 8  # 7.28 -> 8
    assert negatives_per_image(3, 1.0) == 3


def test_appended_negative_takes_its_source_foreground_at_iou_exactly_one_half():
    # source row: IoU 0.5 (fg, sampled), 0.5 - 1 ulp (bg, sampled), 0.5 (fg, not sampled)
    iou = torch.tensor([[HALF, BELOW_HALF, HALF]])
    sampled = torch.tensor([[True, True, False]])
    new_iou, new_sampled = append_negative_targets(iou, sampled, [0], fg_threshold=0.5)
    # > instead of >=: the negative's row would be empty
    assert new_sampled[1].tolist() == [True, False, False]
    assert new_iou[1].tolist() == [0.0, 0.0, 0.0]
