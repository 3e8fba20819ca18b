"""Boundary tests of the phrase-detection evaluation (issue 14): every threshold and every
inclusive/exclusive rule that docs/EVALUATION.md states, with a case exactly ON the boundary and
one on each side, expected values by hand.

Only what tests/evaluation/test_phrase_detection_ap.py, test_summary_and_localization.py,
test_phrase_filter.py, test_ppa_evaluation.py and tests/text/test_text_vocab.py do not already pin
exactly on the boundary. (For instance test_only_the_first_hit_of_the_k_detections_counts has a
detection at IoU exactly 0.5, but its AP is 5/6 whether that detection is a hit or not, so it does
not pin ``>=``.)

IoU values on the boundary are exact in binary: A = [0, 0, 10, 10] (area 100) and
A_HALF = [0, 0, 10, 5] give 50 / 100 = 0.5 exactly. The nearest float32 boxes on each side of it
are [0, 0, 10, 5 -/+ 1 ulp] (boxes are stored as float32): IoU 0.49999995 and 0.50000005.
"""
from fractions import Fraction as F

import numpy as np
import pytest
import torch
from detectron2.data import DatasetCatalog, MetadataCatalog

import phrasedet.evaluation.phrase_detection.phrase_detection_ap as core
from phrasedet.data.synthetic.builtin import FEW_SHOT_MAX, _bucket_table
from phrasedet.evaluation import (PhraseDetectionEvaluator, PhraseDetections, PhraseFilter, PhraseGroundTruth,
                                  evaluate_phrase_detection, paired_iou, test_vocabulary)
from phrasedet.evaluation.phrase_detection.ppa_ground_truth import augment_ground_truth
from phrasedet.text.vocab import PhraseVocabulary, bucket_of_count

from .toy import A, A_HALF, B, FAR, ap_of, build

MODES = ("reference", "standard")
F32_5 = np.float32(5.0)
BELOW_5 = float(np.nextafter(F32_5, np.float32(0)))    # 4.9999995
ABOVE_5 = float(np.nextafter(F32_5, np.float32(10)))   # 5.0000005
JUST_BELOW = [0.0, 0.0, 10.0, BELOW_5]   # IoU with A = BELOW_5 / 10 = 0.49999995
JUST_ABOVE = [0.0, 0.0, 10.0, ABOVE_5]   # IoU with A = ABOVE_5 / 10 = 0.50000005
THR_ABOVE = float(np.nextafter(0.5, 1.0))  # the smallest float64 threshold > 0.5
THR_BELOW = float(np.nextafter(0.5, 0.0))  # the largest float64 threshold < 0.5


# ----------------------------------------------------------------------------- box IoU
def test_iou_of_the_boundary_boxes_is_exact():
    # the premises of the threshold tests below: exactly 0.5, and the nearest float32 boxes either side
    assert paired_iou(A, A_HALF) == 0.5
    assert paired_iou([0, 0, 1, 1], [0, 0, 2, 1]) == 0.5  # intersection 1, union 2
    assert paired_iou(A, JUST_BELOW) < 0.5 < paired_iou(A, JUST_ABOVE)
    assert paired_iou(A, JUST_BELOW) == pytest.approx(0.5, abs=1e-7)
    assert np.float32(BELOW_5) == BELOW_5 and np.float32(ABOVE_5) == ABOVE_5  # stored as float32 unchanged


@pytest.mark.parametrize("box, expected", [
    ([10.0, 0.0, 20.0, 10.0], 0.0),    # shares A's right edge: intersection width exactly 0
    ([9.0, 0.0, 19.0, 10.0], 10 / 190),  # 1 unit of overlap: 10 / (100 + 100 - 10)
    ([20.0, 0.0, 30.0, 10.0], 0.0),    # disjoint in x only (height overlap 10): width -10 clipped to 0
    ([0.0, 20.0, 10.0, 30.0], 0.0),    # disjoint in y only (width overlap 10): height -10 clipped to 0
    ([0.0, 0.0, 5.0, 5.0], 0.25),      # no +1: 25 / 100 (with +1: 36 / 121)
    ([5.0, 5.0, 5.0, 5.0], 0.0),       # a point inside A: area 0, intersection 0
    ([2.0, 2.0, 8.0, 2.0], 0.0),       # a horizontal segment inside A: area 0
    ([10.0, 10.0, 0.0, 0.0], 0.0),     # inverted (x2 < x1, y2 < y1): area 0, not (-10)(-10) = 100
])
def test_iou_edges_zero_area_and_one_sided_overlap(box, expected):
    # Without np.clip(iw, 0): [20, 0, 30, 10] gives -100 / 300; without np.clip(ih, 0) likewise for
    # [0, 20, 10, 30]; with the +1 convention [0, 0, 5, 5] gives 36 / 121; the touching box gives
    # 11 / 231 with +1.
    assert paired_iou(A, box) == expected
    assert paired_iou(box, A) == expected  # symmetric


def test_iou_of_two_equal_zero_area_boxes_is_zero_not_nan():
    # union exactly 0 (not only [0, 0, 0, 0]): 0 by definition, never 0 / 0 = NaN
    for box in ([3.0, 3.0, 3.0, 3.0], [0.0, 0.0, 10.0, 0.0], [10.0, 10.0, 0.0, 0.0]):
        assert paired_iou(box, box) == 0.0
    # a NaN in one coordinate only is NaN (compares false with any threshold)
    assert np.isnan(paired_iou([0.0, 0.0, 10.0, np.nan], A))


# ----------------------------------------------------------------------------- the match threshold
def _single(mode, box, iou_thresh=None, loc_iou_thresh=None):
    """One instance of "cat" on A in im0, one detection (0.9, box): (AP, instance localized)."""
    gt, d = build(["im0"], [("im0", "cat", A)], {("im0", "cat"): [(0.9, box)]})
    kwargs = {} if iou_thresh is None else {"iou_thresh": iou_thresh}
    r = evaluate_phrase_detection(gt, d, mode, loc_iou_thresh=loc_iou_thresh, **kwargs)
    return ap_of(r, "cat"), int(r.num_localized.sum())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("box, ap", [
    (JUST_BELOW, 0.0),   # IoU 0.49999995 < 0.5: FP r1, the instance missed -> AP 0
    (A_HALF, 1.0),       # IoU exactly 0.5: a hit (>=) -> TP r1 -> AP 1
    (JUST_ABOVE, 1.0),   # IoU 0.50000005 -> AP 1
])
def test_default_threshold_is_iou_at_least_one_half_in_both_modes(mode, box, ap):
    # kills `iou >= iou_thresh` -> `>` (reference) and `best >= iou_thresh` -> `>` (standard) on
    # the A_HALF row, and a default other than 0.5 on the rows either side; localization uses the
    # same default threshold (docs: "The same threshold is used for localization").
    assert _single(mode, box) == (ap, int(ap))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("thr, hit", [(THR_BELOW, True), (0.5, True), (THR_ABOVE, False)])
def test_iou_exactly_at_the_threshold_is_a_hit_and_one_ulp_above_is_not(mode, thr, hit):
    # IoU exactly 0.5 against thresholds 0.5 - 1 ulp, 0.5 and 0.5 + 1 ulp (float64): a hit iff IoU >= thr
    assert _single(mode, A_HALF, iou_thresh=thr) == (float(hit), int(hit))


@pytest.mark.parametrize("mode", MODES)
def test_localization_threshold_defaults_to_the_match_threshold_and_can_differ(mode):
    # IoU exactly 0.5. iou_thresh 0.75: no TP, and loc_iou_thresh defaults to 0.75 -> not localized
    # (a default of 0.5 would localize it).
    assert _single(mode, A_HALF, iou_thresh=0.75) == (0.0, 0)
    # an explicit localization threshold exactly at the IoU localizes, one ulp above does not;
    # the AP follows iou_thresh only
    assert _single(mode, A_HALF, iou_thresh=0.75, loc_iou_thresh=0.5) == (0.0, 1)
    assert _single(mode, A_HALF, iou_thresh=0.5, loc_iou_thresh=THR_ABOVE) == (1.0, 0)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("thr, box, ap", [
    (0.0, FAR, 1.0),         # IoU 0 >= 0: at threshold 0 even a disjoint box is a hit and localizes
    (1.0, A, 1.0),           # IoU exactly 1 >= 1: a hit
    (1.0, JUST_ABOVE, 0.0),  # IoU 0.50000005 < 1
])
def test_thresholds_zero_and_one_are_inclusive_ends_of_the_range(mode, thr, box, ap):
    assert _single(mode, box, iou_thresh=thr) == (ap, int(ap))


@pytest.mark.parametrize("mode", MODES)
def test_a_nan_box_is_no_hit_even_at_threshold_zero(mode):
    # an IoU of NaN is not >= 0 (standard mode replaces it by -1, below every valid threshold)
    assert _single(mode, [0.0, 0.0, 10.0, np.nan], iou_thresh=0.0) == (0.0, 0)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kwargs, message", [
    ({"iou_thresh": -0.1}, "iou_thresh must be in [0, 1], got -0.1"),
    ({"iou_thresh": 1.1}, "iou_thresh must be in [0, 1], got 1.1"),
    ({"iou_thresh": float(np.nextafter(1.0, 2.0))}, "iou_thresh must be in [0, 1], got 1.0000000000000002"),
    ({"iou_thresh": float("nan")}, "iou_thresh must be in [0, 1], got nan"),
    ({"loc_iou_thresh": 1.5}, "the localization IoU threshold must be in [0, 1], got 1.5"),
    ({"loc_iou_thresh": -1e-9}, "the localization IoU threshold must be in [0, 1], got -1e-09"),
])
def test_thresholds_outside_zero_one_are_refused_with_their_name(mode, kwargs, message):
    # a threshold above 1 would silently score every detection a miss, below 0 every one a hit
    gt, d = build(["im0"], [("im0", "cat", A)], {("im0", "cat"): [(0.9, A)]})
    with pytest.raises(ValueError) as e:
        evaluate_phrase_detection(gt, d, mode, **kwargs)
    assert str(e.value) == message


def test_match_detections_defaults_to_reference_mode_at_one_half_and_names_a_bad_mode():
    # two instances of "man" in im0 (A, B), one detection (.9, A_HALF: IoU exactly 0.5 with A):
    # reference labels the copy of A (copy 0) a TP; standard too, but with copy 0 for every TP, so
    # a second detection (.8, B) tells them apart: reference gives copy 1 its own TP at k1.
    gt, d = build(["im0"], [("im0", "man", A), ("im0", "man", B)], {("im0", "man"): [(0.9, A_HALF), (0.8, B)]}, k=2)
    tps = core.match_detections(gt, d)
    assert (tps.pair.tolist(), tps.copy.tolist(), tps.k.tolist()) == ([0, 0], [0, 1], [0, 1])
    standard = core.match_detections(gt, d, "standard")
    assert (standard.copy.tolist(), standard.k.tolist()) == ([0, 0], [0, 1])
    assert core.localization_success(gt, d).tolist() == [True, False]  # top-1 (.9, IoU 0.5 with A) at 0.5
    with pytest.raises(ValueError) as e:
        core.match_detections(gt, d, "Reference")
    assert str(e.value) == "mode must be one of ('reference', 'standard'), got 'Reference'"


@pytest.mark.parametrize("mode, ap", [
    # reference: one copy of the detection per instance: (.9 copy0 vs NaN) FP r1, (.9 copy1 vs A) TP r2
    #   -> AP = 1/2 (1/2) = 1/4
    ("reference", 0.25),
    # standard: the IoU with the NaN box is NaN, never the best -> the detection hits A: TP r1 -> 1/2
    #   (a NaN best IoU would make it a miss: AP 0)
    ("standard", 0.5),
])
def test_an_instance_with_a_nan_box_leaves_the_other_instance_of_its_pair_matchable(mode, ap):
    # "cat" in im0 on [0, 0, 10, NaN] and on A; one detection (.9, A); 2 instances
    gt, d = build(["im0"], [("im0", "cat", [0.0, 0.0, 10.0, np.nan]), ("im0", "cat", A)],
                  {("im0", "cat"): [(0.9, A)]})
    assert ap_of(evaluate_phrase_detection(gt, d, mode), "cat") == pytest.approx(ap)


def test_find_pairs_misses_keys_past_the_last_pair_and_on_ground_truth_without_pairs():
    gt = PhraseGroundTruth(["im0", "im1"], ["cat", "dog"], [0], [0], [A])
    assert gt.find_pairs([0, 0, 1, 1], [0, 1, 0, 1]).tolist() == [0, -1, -1, -1]  # (1, dog): above every key
    empty = PhraseGroundTruth(["im0"], ["cat"], [], [], np.zeros((0, 4)))
    assert empty.find_pairs([0, 0], [0, 0]).tolist() == [-1, -1]


@pytest.mark.parametrize("box, localized", [(JUST_BELOW, 0), (A_HALF, 1), (JUST_ABOVE, 1)])
def test_localization_of_the_top1_box_either_side_of_one_half(box, localized):
    # Top-1 detection (0.9, box) of an instance on A; kills `iou >= thr` -> `>` in localization_success.
    # A second instance "dog" on B with a detection (0.8, B): always localized (IoU 1).
    gt, d = build(["im0"], [("im0", "cat", A), ("im0", "dog", B)],
                  {("im0", "cat"): [(0.9, box)], ("im0", "dog"): [(0.8, B)]})
    r = evaluate_phrase_detection(gt, d, "standard")
    assert dict(zip(r.phrases, r.num_localized.tolist())) == {"cat": localized, "dog": 1}
    # loc_acc = (localized + 1) / 2 instances, in percent
    assert r.summarize(PhraseVocabulary())["loc_acc"] == pytest.approx(100 * (localized + 1) / 2)


# ----------------------------------------------------------------------------- standard mode: equal IoU
@pytest.mark.parametrize("mode, order, expected", [
    # D (.9, A) has IoU exactly 0.5 with both I1 = [0, 0, 10, 5] and I2 = [0, 5, 10, 10];
    # D2 (.8, I2's box) has IoU 1 with I2 and 0 with I1 (they only touch).
    # standard, I1 first: D takes I1 (equal IoU: first in annotation order) TP r1, D2 takes I2 TP r2
    #   -> AP = 1/2 (1 + 1) = 1
    ("standard", "I1 I2", F(1)),
    # standard, I2 first: D takes I2 TP r1; D2's best instance I2 is taken -> FP r2 -> AP = 1/2 (1) = 1/2
    ("standard", "I2 I1", F(1, 2)),
    # reference (no greedy matching): each copy takes its highest-scored hit, D, for both instances:
    #   (.9 c0) TP r1, (.9 c1) TP r2, (.8) FP, (.8) FP -> AP 1 in either annotation order
    ("reference", "I1 I2", F(1)),
    ("reference", "I2 I1", F(1)),
])
def test_equal_iou_takes_the_first_instance_in_annotation_order(mode, order, expected):
    # kills np.minimum.reduceat -> np.maximum.reduceat (last instance) in standard mode, and a
    # tie-break that ignores annotation order (both orders would give the same AP)
    boxes = {"I1": [0.0, 0.0, 10.0, 5.0], "I2": [0.0, 5.0, 10.0, 10.0]}
    assert paired_iou(A, boxes["I1"]) == paired_iou(A, boxes["I2"]) == 0.5
    gts = [("im0", "man", boxes[name]) for name in order.split()]
    gt, d = build(["im0"], gts, {("im0", "man"): [(0.9, A), (0.8, boxes["I2"])]}, k=2)
    assert ap_of(evaluate_phrase_detection(gt, d, mode), "man") == pytest.approx(float(expected))


# ----------------------------------------------------------------------------- ties between k
@pytest.mark.parametrize("mode", MODES)
def test_equal_scores_in_one_image_go_to_the_smaller_k(mode):
    # One instance on A; k0 (.7, A_HALF: IoU 0.5) and k1 (.7, A: IoU 1) tie on the score.
    # reference: among the hits, the highest score, equal scores: smaller k -> k0 is the TP (not
    #   the better-overlapping k1); standard: equal scores are processed in k order -> k0 takes A.
    # Ranking ties by k: k0 TP r1, k1 FP r2 -> AP 1. Were k1 the TP (larger k, or best IoU), or the
    # tie ranked k1 first: FP r1, TP r2 -> AP 1/2.
    gt, d = build(["im0"], [("im0", "cat", A)], {("im0", "cat"): [(0.7, A_HALF), (0.7, A)]}, k=2)
    assert ap_of(evaluate_phrase_detection(gt, d, mode), "cat") == pytest.approx(1.0)


@pytest.mark.parametrize("mode", MODES)
def test_ranking_ties_by_k_put_an_earlier_false_positive_first(mode):
    # k0 (.7, FAR) FP and k1 (.7, A) TP tie: k0 ranks first -> FP r1, TP r2 -> AP 1/2 (k descending: 1)
    gt, d = build(["im0"], [("im0", "cat", A)], {("im0", "cat"): [(0.7, FAR), (0.7, A)]}, k=2)
    assert ap_of(evaluate_phrase_detection(gt, d, mode), "cat") == pytest.approx(0.5)


@pytest.mark.parametrize("mode", MODES)
def test_ties_among_many_detections_keep_k_order(mode):
    # 40 detections of one instance on A: .7 at k = 0, 3, ..., 39 (14 of them), .5 elsewhere; only
    # k18 and k21 hit (box A), the rest are FAR. Equal scores go in k order, so k18 is the 7th
    # entry and the TP: AP = 1/7. (numpy's default sort is not stable beyond 16 elements: it
    # puts k21 first here, which would make k21 the TP at rank 8.)
    dets = [(0.7 if k % 3 == 0 else 0.5, A if k in (18, 21) else FAR) for k in range(40)]
    gt, d = build(["im0"], [("im0", "cat", A)], {("im0", "cat"): dets}, k=40)
    assert core.match_detections(gt, d, mode).k.tolist() == [18]
    assert ap_of(evaluate_phrase_detection(gt, d, mode), "cat") == pytest.approx(1 / 7)


@pytest.mark.parametrize("mode", MODES)
def test_an_equal_score_in_the_last_column_of_the_previous_image_ranks_first(mode):
    # K = 2. im0 has no dog: k0 (.3, FAR), k1 (.5, FAR); im1 has a dog on A: k0 (.5, A) TP, k1 (.1, FAR).
    # The tie at .5 goes to the earlier image: (.5 im0 k1) FP r1, (.5 im1 k0) TP r2 -> AP 1/2. (The
    # tie sits in column 1 of the dense score row, right before the TP's own columns 2-3: a count of
    # the TP's own-image ties that reached one column too far left would rank the TP first.)
    gt, d = build(["im0", "im1"], [("im1", "dog", A)],
                  {("im0", "dog"): [(0.3, FAR), (0.5, FAR)], ("im1", "dog"): [(0.5, A), (0.1, FAR)]}, k=2)
    tps = core.match_detections(gt, d, mode)
    assert core.rank_true_positives(gt, d, tps, mode).tolist() == [2]
    assert ap_of(evaluate_phrase_detection(gt, d, mode), "dog") == pytest.approx(0.5)


def test_rank_true_positives_defaults_to_reference_mode():
    # two instances of "man" in im0 (A, B), detections k0 (.9, FAR), k1 (.5, A). Reference mode
    # appends each detection once per instance: (.9 c0 k0) FP r1, (.9 c1 k0) FP r2, (.5 c0 k1) TP r3;
    # standard mode has one entry per detection: (.9 k0) FP r1, (.5 k1) TP r2
    gt, d = build(["im0"], [("im0", "man", A), ("im0", "man", B)], {("im0", "man"): [(0.9, FAR), (0.5, A)]}, k=2)
    tps = core.match_detections(gt, d, "reference")
    assert core.rank_true_positives(gt, d, tps).tolist() == [3]
    assert core.rank_true_positives(gt, d, core.match_detections(gt, d, "standard"), "standard").tolist() == [2]


# ----------------------------------------------------------------------------- float32 scores
def _two_images(scores_im0, scores_im1, via="add_image"):
    """"dog" on A in im0 only; im0's detection (s0, A) is the TP, im1's (s1, A) a false positive.
    Scores are given as float64 and must be compared as float32 by the evaluator."""
    gt = PhraseGroundTruth(["im0", "im1"], ["dog"], [0], [0], [A])
    d = PhraseDetections(gt, 1)
    if via == "add_image":
        d.add_image(0, np.array([[scores_im0]], np.float64), np.array([[A]], np.float64))
        d.add_image(1, np.array([[scores_im1]], np.float64), np.array([[A]], np.float64))
    else:
        d.add_records([0, 1], [0, 0], [0, 0], np.array([scores_im0, scores_im1], np.float64), [A, A])
    return ap_of(evaluate_phrase_detection(gt, d, "reference"), "dog")


@pytest.mark.parametrize("via", ["add_image", "add_records"])
@pytest.mark.parametrize("s1, ap", [
    # im1's score equals im0's in float32 although larger in float64: a tie, broken by dataset
    # order (im0 first) -> TP r1 -> AP 1. Compared as float64: FP r1, TP r2 -> 1/2.
    (0.5 + 1e-9, 1.0),
    (0.5, 1.0),                                               # an exact tie: same
    (float(np.nextafter(np.float32(0.5), np.float32(1))), 0.5),  # one float32 ulp higher: FP r1, TP r2
])
def test_scores_are_compared_as_float32(via, s1, ap):
    assert np.float32(0.5 + 1e-9) == np.float32(0.5)  # premise
    assert _two_images(0.5, s1, via) == pytest.approx(ap)


# ----------------------------------------------------------------------------- NaN and -inf
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("im1_score, ap", [
    # images in dataset order [im1, im0]; "dog" on A in im0 only, its detection (-inf, A) is a TP.
    (np.nan, 1.0),      # NaN in im1 is not an entry: TP r1 -> AP 1
    (-np.inf, 0.5),     # -inf in im1 is an entry tied with the TP, earlier image: FP r1, TP r2 -> 1/2
    (-1e30, 0.5),       # any finite score ranks above -inf: FP r1, TP r2 -> 1/2
])
def test_nan_is_no_entry_and_minus_inf_is_the_last_entry(mode, im1_score, ap):
    gt, d = build(["im1", "im0"], [("im0", "dog", A)],
                  {("im0", "dog"): [(-np.inf, A)], ("im1", "dog"): [(im1_score, A)]})
    assert ap_of(evaluate_phrase_detection(gt, d, mode), "dog") == pytest.approx(ap)


@pytest.mark.parametrize("mode", MODES)
def test_a_nan_score_on_the_right_box_is_neither_a_hit_nor_localized(mode):
    # (NaN, A): no detection although its box is A (IoU 1) -> no TP: AP 0 (N_gt 1), not localized.
    # k1 (.2, FAR) is the only entry. Kills dropping `valid &` in either mode or in localization.
    gt, d = build(["im0"], [("im0", "cat", A)], {("im0", "cat"): [(np.nan, A), (0.2, FAR)]}, k=2)
    r = evaluate_phrase_detection(gt, d, mode)
    assert ap_of(r, "cat") == 0.0 and int(r.num_tp.sum()) == 0 and int(r.num_localized.sum()) == 0
    # only a NaN: not localized either (top-1 of the pair is the NaN detection)
    gt, d = build(["im0"], [("im0", "cat", A)], {("im0", "cat"): [(np.nan, A)]})
    r = evaluate_phrase_detection(gt, d, mode)
    assert ap_of(r, "cat") == 0.0 and int(r.num_localized.sum()) == 0


@pytest.mark.parametrize("mode", MODES)
def test_a_box_with_a_nan_coordinate_never_matches(mode):
    # score .9, box [0, 0, 10, NaN]: IoU NaN -> a false positive, not localized; (.5, A) in im1 is a TP
    # -> FP r1, TP r2 -> AP = 1/2 (1/2) = 1/4 (N_gt 2: the instance of im0 is missed)
    gt, d = build(["im0", "im1"], [("im0", "cat", A), ("im1", "cat", A)],
                  {("im0", "cat"): [(0.9, [0.0, 0.0, 10.0, np.nan])], ("im1", "cat"): [(0.5, A)]})
    r = evaluate_phrase_detection(gt, d, mode)
    assert ap_of(r, "cat") == pytest.approx(0.25) and int(r.num_localized.sum()) == 1


# ----------------------------------------------------------------------------- buckets
@pytest.mark.parametrize("count, bucket", [
    (0, "zero_shot"), (1, "few_shot"), (99, "few_shot"), (100, "few_shot"), (101, "common")])
def test_default_bucket_thresholds_each_side_of_100(count, bucket):
    # tests/text/test_text_vocab.py pins 0, 1, 100, 101; 99 completes "one below" the 100 boundary
    assert bucket_of_count(count) == bucket


@pytest.mark.parametrize("count, bucket", [
    (0, "zero_shot"), (1, "zero_shot"), (2, "zero_shot"), (3, "few_shot"),
    (4, "few_shot"), (5, "few_shot"), (6, "common")])
def test_custom_thresholds_are_inclusive_upper_bounds_of_both_first_buckets(count, bucket):
    # thresholds (2, 5): zero-shot <= 2, few-shot 3..5, common > 5. The first threshold is honoured
    # (not a hard-coded 0) and inclusive: 2 is zero-shot, 3 few-shot.
    assert bucket_of_count(count, (2, 5)) == bucket
    assert PhraseVocabulary({"p": count}, thresholds=(2, 5)).bucket("p") == bucket


def test_builtin_generator_buckets_at_few_shot_max():
    # the synthetic dataset's bucket table (builtin.py, bucket_of_count(train[p], (0, FEW_SHOT_MAX)))
    from collections import Counter
    assert FEW_SHOT_MAX == 100
    train = Counter({"p1": 1, "p99": 99, "p100": 100, "p101": 101})
    test = Counter({"p0": 2, "p1": 1, "p99": 1, "p100": 3, "p101": 5})
    table = _bucket_table(train, test)
    assert {p: r["bucket"] for p, r in table["phrases"].items()} == {
        "p0": "zero_shot", "p1": "few_shot", "p99": "few_shot", "p100": "few_shot", "p101": "common"}
    # test instances per bucket: zero 2; few 1 + 1 + 3 = 5; common 5
    assert table["summary"] == {"zero_shot": {"phrases": 1, "test_instances": 2},
                                "few_shot": {"phrases": 3, "test_instances": 5},
                                "common": {"phrases": 1, "test_instances": 5}}


def test_a_bucket_whose_phrases_have_no_test_instance_is_empty_and_left_out_of_the_mean():
    # "dog" (train 0) and "man" (train 5) have one instance each; "unicorn" (train 500, common) is
    # scored but has no test instance: it is skipped, so the common bucket has no evaluated phrase.
    #   dog: (.9, A) TP r1 -> AP 1; man: im1 (.9) FP r1, im0 (.5, A) TP r2 -> AP 1/2
    gts = [("im0", "dog", A), ("im0", "man", A)]
    dets = {("im0", "dog"): [(0.9, A)], ("im0", "man"): [(0.5, A)], ("im1", "man"): [(0.9, A)],
            ("im0", "unicorn"): [(0.99, A)]}
    gt, d = build(["im0", "im1"], gts, dets, phrases=["dog", "man", "unicorn"])
    m = evaluate_phrase_detection(gt, d, "reference").summarize(PhraseVocabulary({"man": 5, "unicorn": 500}))
    assert np.isnan(m["mAP_common"]) and np.isnan(m["loc_acc_common"])
    assert m["num_phrases_common"] == 0 and m["num_instances_common"] == 0
    # mean of the two non-empty buckets: (100 + 50) / 2 = 75 (a NaN bucket would make it NaN)
    assert (m["mAP_zero_shot"], m["mAP_few_shot"], m["mAP"]) == pytest.approx((100.0, 50.0, 75.0))
    assert m["loc_acc"] == pytest.approx(100.0)  # both top-1 boxes are A


# ----------------------------------------------------------------------------- the evaluator end to end
TRAIN, TEST = "boundary_pd_train", "boundary_pd_test"
TRAIN_COUNTS = {"p1": 1, "p99": 99, "p100": 100, "p101": 101}  # "p0": 0


def _register():
    if TEST in DatasetCatalog.list():
        return
    anns = [{"phrase": p, "bbox": [0.0, 0.0, 1.0, 1.0]} for p, c in TRAIN_COUNTS.items() for _ in range(c)]
    DatasetCatalog.register(TRAIN, lambda: [{"image_id": "t0", "height": 100, "width": 100, "annotations": anns}])
    DatasetCatalog.register(TEST, lambda: [{"image_id": "b0", "height": 100, "width": 100, "annotations": [
        {"phrase": p, "bbox": list(A)} for p in ("p0", "p1", "p99", "p100", "p101")]}])
    for name in (TRAIN, TEST):
        MetadataCatalog.get(name).set(evaluator_type="phrase_detection", train_dataset=TRAIN)


def _evaluate(**kwargs):
    _register()
    (record,) = DatasetCatalog.get(TEST)
    phrases = test_vocabulary([record])  # ["p0", "p1", "p100", "p101", "p99"]
    # every phrase's detection is on A_HALF (IoU exactly 0.5), except p100's on JUST_BELOW
    boxes = torch.tensor([[JUST_BELOW if p == "p100" else A_HALF] for p in phrases], dtype=torch.float32)
    evaluator = PhraseDetectionEvaluator(TEST, output_dir=None, **kwargs)
    evaluator.reset()
    evaluator.process([record], [{"phrases": phrases, "scores": torch.full((len(phrases), 1), 0.5), "boxes": boxes}])
    return evaluator.evaluate()["phrase_detection"]


@pytest.mark.parametrize("mode", MODES)
def test_evaluator_defaults_put_iou_one_half_and_count_100_on_the_inclusive_side(mode):
    # One test image, one instance of each phrase on A, one entry per phrase.
    # Default IoU 0.5: A_HALF hits (AP 1, localized), p100's JUST_BELOW misses (AP 0).
    # Default buckets (0, 100): zero {p0}, few {p1, p99, p100}, common {p101}.
    #   mAP zero 100, few (100 + 100 + 0) / 3 = 66.67, common 100; mAP = (100 + 200/3 + 100) / 3
    #   loc acc 4/5 = 80 %, few-shot 2/3.
    # With IoU > 0.5 every AP would be 0; with 100 common: few 100, common (0 + 100) / 2 = 50.
    m = _evaluate(mode=mode)
    assert (m["num_phrases_zero_shot"], m["num_phrases_few_shot"], m["num_phrases_common"]) == (1, 3, 1)
    assert (m["mAP_zero_shot"], m["mAP_few_shot"], m["mAP_common"]) == pytest.approx((100.0, 200 / 3, 100.0))
    assert m["mAP"] == pytest.approx((100 + 200 / 3 + 100) / 3)
    assert m["loc_acc"] == pytest.approx(80.0) and m["loc_acc_few_shot"] == pytest.approx(200 / 3)


def test_evaluator_threshold_one_ulp_above_one_half_misses_every_detection():
    m = _evaluate(iou_thresh=THR_ABOVE)
    assert (m["mAP_zero_shot"], m["mAP_few_shot"], m["mAP_common"], m["mAP"], m["loc_acc"]) == (0.0,) * 5


def test_evaluator_bucket_thresholds_move_the_boundary():
    # bucket_thresholds (0, 99): 100 is now common -> few {p1, p99}: 100; common {p100, p101}: 50
    m = _evaluate(bucket_thresholds=(0, 99))
    assert (m["num_phrases_few_shot"], m["num_phrases_common"]) == (2, 2)
    assert (m["mAP_few_shot"], m["mAP_common"]) == pytest.approx((100.0, 50.0))


# ----------------------------------------------------------------------------- phrase filter
@pytest.mark.parametrize("allowed, kept", [
    (set(), False),                 # no token allowed
    ({"cars", "re"}, False),        # tokens are compared whole: neither "car" nor "red" is allowed
    ({"car"}, True),                # exactly one of the two tokens: kept ("at least one")
    ({"red", "car"}, True),         # both tokens: kept
])
def test_filter_keeps_a_phrase_with_at_least_one_allowed_token(allowed, kept):
    # kills `any` -> `all` (the one-token row), a substring match (the "cars" row) and `>= 1` -> `> 1`
    gt, d = build(["i0"], [("i0", "red car", A)], {("i0", "red car"): [(0.9, A)]})
    f = PhraseFilter({"i0": allowed})
    assert f.keep_mask(gt, 0).tolist() == [kept]
    assert f.recall(gt) == float(kept)
    assert f.apply(d) == (0 if kept else 1)
    assert d.scores[0, 0, 0] == (np.float32(0.9) if kept else -np.inf)


# ----------------------------------------------------------------------------- PPA duplicates
def _augment(gts, images=("im0",)):
    gt, _ = build(list(images), gts, {})
    aug, duplicates = augment_ground_truth(gt, lambda p: {"young man": ["man"]}.get(p, []))
    rows = sorted((aug.image_ids[i], aug.phrases[j], tuple(b))
                  for i, j, b in zip(aug.gt_image, aug.gt_phrase, aug.gt_box.tolist()))
    return rows, duplicates


def test_ppa_duplicate_means_the_same_image_phrase_and_box_exactly():
    # on the box: "young man" on A with "man" already annotated on A -> skipped (1 duplicate)
    rows, dup = _augment([("im0", "man", A), ("im0", "young man", A)])
    assert dup == 1 and rows == [("im0", "man", tuple(A)), ("im0", "young man", tuple(A))]
    # a box differing by one float32 ulp in y2 (IoU 0.99999995 with A) is another box: added
    near = [0.0, 0.0, 10.0, float(np.nextafter(np.float32(10), np.float32(20)))]
    rows, dup = _augment([("im0", "man", A), ("im0", "young man", near)])
    assert dup == 0 and rows == sorted([("im0", "man", tuple(A)), ("im0", "man", tuple(near)),
                                        ("im0", "young man", tuple(near))])
    # the same phrase and box in another image: added there (the image is part of the key)
    rows, dup = _augment([("im0", "man", A), ("im1", "young man", A)], images=("im0", "im1"))
    assert dup == 0 and rows == [("im0", "man", tuple(A)), ("im1", "man", tuple(A)), ("im1", "young man", tuple(A))]


def test_evaluate_phrase_detection_checks_its_arguments_and_records_them_in_the_result():
    gt, d = build(["im0"], [("im0", "cat", A)], {("im0", "cat"): [(0.9, A)]}, phrases=["cat", "dog"])
    with pytest.raises(ValueError) as e:
        evaluate_phrase_detection(gt, d, "Standard")
    assert str(e.value) == "mode must be one of ('reference', 'standard'), got 'Standard'"
    other, _ = build(["im0"], [("im0", "cat", A)], {})
    with pytest.raises(ValueError) as e:
        evaluate_phrase_detection(other, d, "standard")
    assert str(e.value) == "the detections were stored for another ground truth"
    r = evaluate_phrase_detection(gt, d, "standard", iou_thresh=1)
    assert (r.mode, r.iou_thresh, type(r.iou_thresh)) == ("standard", 1.0, float)
    # "dog", the last phrase, has neither instance nor true positive: the counts still have V entries
    assert (r.num_tp.tolist(), r.num_localized.tolist(), r.num_gt.tolist()) == ([1, 0], [1, 0], [1, 0])
    assert r.num_tp.dtype == r.num_localized.dtype == np.int64
