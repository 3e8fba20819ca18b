"""Buckets from training counts, the overall mean of bucket mAPs, and localization accuracy."""
import math
import warnings

import numpy as np
import pytest
import torch

from phrasedet.evaluation import evaluate_phrase_detection, format_results_table, paired_iou, pairwise_iou
from phrasedet.evaluation.phrase_detection.detections import PhraseColumns, PhraseDetections, detection_arrays
from phrasedet.evaluation.phrase_detection.phrase_detection_ap import PhraseDetectionResult
from phrasedet.text.vocab import PhraseVocabulary

from .toy import A, A_HALF, A_LOW, B, FAR, build


@pytest.fixture
def four_phrases():
    # One instance of each phrase in im0 (box A); im1 has none.
    #   a: im0 (.9, A) TP r1, im1 (.1) FP        -> AP 1
    #   b: im1 (.9) FP r1, im0 (.5, A) TP r2     -> AP 1/2
    #   c: im0 (.9, FAR) FP, im1 (.5) FP         -> AP 0
    #   d: im1 (.9) FP r1, im0 (.5, A) TP r2     -> AP 1/2
    gts = [("im0", p, A) for p in "abcd"]
    dets = {("im0", "a"): [(0.9, A)], ("im1", "a"): [(0.1, FAR)],
            ("im0", "b"): [(0.5, A)], ("im1", "b"): [(0.9, FAR)],
            ("im0", "c"): [(0.9, FAR)], ("im1", "c"): [(0.5, FAR)],
            ("im0", "d"): [(0.5, A)], ("im1", "d"): [(0.9, FAR)]}
    gt, d = build(["im0", "im1"], gts, dets)
    return evaluate_phrase_detection(gt, d, "reference")


def test_buckets_at_training_counts_0_1_100_101(four_phrases):
    vocab = PhraseVocabulary({"b": 1, "c": 100, "d": 101})  # a: 0
    assert four_phrases.buckets(vocab) == ["zero_shot", "few_shot", "few_shot", "common"]
    m = four_phrases.summarize(vocab)
    # zero: a = 100; few: (b 50 + c 0) / 2 = 25; common: d = 50
    assert (m["mAP_zero_shot"], m["mAP_few_shot"], m["mAP_common"]) == pytest.approx((100, 25, 50))
    # overall = mean of the bucket mAPs (175 / 3), not the mean over phrases (50)
    assert m["mAP"] == pytest.approx(175 / 3)
    # localized: a, b, d (top-1 box A); c not -> 3/4; per bucket 1/1, 1/2, 1/1
    assert m["loc_acc"] == pytest.approx(75.0)
    assert (m["loc_acc_zero_shot"], m["loc_acc_few_shot"], m["loc_acc_common"]) == pytest.approx((100, 50, 100))
    assert (m["num_phrases_zero_shot"], m["num_phrases_few_shot"], m["num_phrases_common"]) == (1, 2, 1)
    assert (m["num_instances_zero_shot"], m["num_instances_few_shot"], m["num_instances_common"]) == (1, 2, 1)
    records = {r["phrase"]: r for r in four_phrases.per_phrase(vocab)}
    assert records["d"] == {"phrase": "d", "bucket": "common", "train_count": 101, "num_gt": 1, "num_tp": 1,
                            "ap": 50.0, "loc_acc": 100.0}
    assert format_results_table(m).splitlines() == [
        "| bucket                |   #phrases |   #instances |    mAP |   loc acc |",
        "|:----------------------|-----------:|-------------:|-------:|----------:|",
        "| zero_shot             |          1 |            1 | 100.00 |    100.00 |",
        "| few_shot              |          2 |            2 |  25.00 |     50.00 |",
        "| common                |          1 |            1 |  50.00 |    100.00 |",
        "| all (mean of buckets) |          4 |            4 |  58.33 |     75.00 |"]


def test_empty_bucket_is_left_out_of_the_overall_mean(four_phrases):
    m = four_phrases.summarize(PhraseVocabulary({"b": 1, "c": 100, "d": 50}))
    # zero: 100; few: (50 + 0 + 50) / 3; common: none -> NaN and not averaged
    assert math.isnan(m["mAP_common"]) and m["num_phrases_common"] == 0
    assert m["mAP"] == pytest.approx((100 + 100 / 3) / 2)
    # few-shot localization: b and d localized, c not: 2 of 3; an empty bucket prints nan
    assert format_results_table(m).splitlines()[2:] == [
        "| zero_shot             |          1 |            1 | 100.00 |    100.00 |",
        "| few_shot              |          3 |            3 |  33.33 |     66.67 |",
        "| common                |          0 |            0 |    nan |       nan |",
        "| all (mean of buckets) |          4 |            4 |  66.67 |     75.00 |"]


def test_per_phrase_leaves_out_phrases_without_test_instances():
    """"e" is in the vocabulary (scored) but has no test instance: no record, no 0 / 0."""
    # "a" in im0, im1, im2; the top-1 box hits in im0 and im1 (TPs at ranks 1, 2), misses in im2 (FAR):
    # AP = (1 + 1) / 3, localized 2 of 3
    images = ["im0", "im1", "im2"]
    dets = {("im0", "a"): [(0.9, A)], ("im1", "a"): [(0.8, A)], ("im2", "a"): [(0.7, FAR)], ("im0", "e"): [(0.8, A)]}
    gt, dets = build(images, [(i, "a", A) for i in images], dets, phrases=["a", "e"])
    result = evaluate_phrase_detection(gt, dets, "reference")
    assert result.per_phrase(PhraseVocabulary({"a": 3})) == [
        {"phrase": "a", "bucket": "few_shot", "train_count": 3, "num_gt": 3, "num_tp": 2,
         "ap": pytest.approx(200 / 3), "loc_acc": pytest.approx(200 / 3)}]


@pytest.mark.parametrize("scores, boxes, dtype, shape", [
    # a model's output still attached to the graph: detached, not refused by numpy
    (torch.tensor([[0.5, 0.25], [1.0, 2.0]], dtype=torch.float64, requires_grad=True),
     torch.zeros(2, 2, 4, dtype=torch.float64, requires_grad=True), np.float32, (2, 2)),
    (np.array([0.5, 1.0]), np.zeros((2, 4)), np.float32, (2, 1)),  # one detection per phrase: [P] -> [P, 1]
    ([0.5, 1.0], [[0, 0, 1, 1], [0, 0, 2, 2]], np.float64, (2, 1)),
    # a mixed-precision detector's output: NumPy has no bfloat16, the values are exact in both dtypes
    (torch.tensor([[0.5, 0.25]], dtype=torch.bfloat16), torch.ones(1, 2, 4, dtype=torch.bfloat16), np.float32, (1, 2)),
    (torch.tensor([[0.5, 0.25]], dtype=torch.bfloat16), torch.ones(1, 2, 4, dtype=torch.bfloat16), np.float64, (1, 2)),
])
def test_detection_arrays_are_numpy_of_the_requested_dtype(scores, boxes, dtype, shape):
    s, b = detection_arrays(scores, boxes, dtype) if dtype is np.float64 else detection_arrays(scores, boxes)
    assert (type(s), s.dtype, s.shape, type(b), b.dtype, b.shape) == (np.ndarray, dtype, shape, np.ndarray, dtype,
                                                                      shape + (4,))
    assert s.ravel().tolist()[:2] == [0.5, 0.25 if shape[1] == 2 else 1.0]


def test_localization_accuracy_uses_the_top_scored_detection():
    gts = [("im0", "man", A), ("im0", "man", B),   # top-1 (.9, A): A localized, B not
           ("im1", "dog", A),                      # k1 (.8, A) outscores k0 (.3, FAR): localized
           ("im1", "cat", A),                      # k0 (.5, FAR) and k1 (.5, A) tie: k0 is top-1 -> not
           ("im2", "dog", A_HALF),                 # not scored in im2 -> not localized
           ("im2", "cat", A)]                      # (.4, A_HALF): IoU exactly 0.5 -> localized
    dets = {("im0", "man"): [(0.9, A), (0.5, B)], ("im1", "dog"): [(0.3, FAR), (0.8, A)],
            ("im1", "cat"): [(0.5, FAR), (0.5, A)], ("im2", "cat"): [(0.4, A_HALF)]}
    gt, d = build(["im0", "im1", "im2"], gts, dets, k=2)
    r = evaluate_phrase_detection(gt, d, "standard")
    # 3 of 6 instances: man 1/2, dog 1/2, cat 1/2
    assert r.num_localized.sum() == 3
    assert dict(zip(r.phrases, r.num_localized.tolist())) == {"cat": 1, "dog": 1, "man": 1}
    assert r.summarize(PhraseVocabulary())["loc_acc"] == pytest.approx(50.0)


def test_iou_convention():
    # no +1: [0, 0, 10, 10] has area 100
    assert paired_iou(A, A_HALF) == 0.5 and paired_iou(A, A_LOW) == pytest.approx(0.49)
    assert paired_iou(A, B) == 0.0 and paired_iou([0, 0, 0, 0], [0, 0, 0, 0]) == 0.0
    assert np.isnan(paired_iou([np.nan] * 4, A))
    np.testing.assert_allclose(pairwise_iou([A, B], [A_HALF, B, [5, 0, 15, 10]]),
                               [[0.5, 0, 50 / 150], [0, 1, 0]])
    # boxes below one unit: areas are not rounded up (a 0.5 x 10 box has area 5, not 10)
    assert paired_iou([0, 0, 0.5, 10], A) == 0.05 and paired_iou(A, [0, 0, 10, 0.5]) == 0.05
    assert paired_iou([0, 0, 0.5, 0.5], [0, 0, 0.5, 0.5]) == 1.0 and paired_iou([0, 0, 0.5, 0.5], [0, 0, 0.5, 0.25]) == 0.5
    # a float32 detection box is computed in float64: 4097 x 4097 is not exact in float32
    big = np.array([0, 0, 4097, 4097], np.float32)
    assert paired_iou(big, [0, 0, 4097, 4097]) == 1.0 and paired_iou([0, 0, 4097, 4097], big) == 1.0
    # two infinite boxes: inf - inf is NaN, without a numpy warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(paired_iou([0, 0, np.inf, np.inf], [0, 0, np.inf, np.inf]))
    # a single box is one row, an empty list no row
    np.testing.assert_allclose(pairwise_iou(A, [A_HALF, B]), [[0.5, 0.0]])
    assert pairwise_iou([], [A, B]).shape == (0, 2) and pairwise_iou([A], []).shape == (1, 0)


def test_phrase_columns_map_known_phrases_and_count_the_unknown():
    """Output rows "x" (not in the vocabulary), "c", "a", "c" again; vocabulary a, b, c."""
    columns = PhraseColumns(["x", "c", "a", "c"], {"a": 0, "b": 1, "c": 2})
    assert (columns.rows.tolist(), columns.targets.tolist(), columns.position.tolist()) == ([1, 2, 3], [2, 0, 2],
                                                                                           [2, -1, 3])
    assert (columns.num_unknown, columns.num_rows, columns.identity) == (1, 4, False)
    assert PhraseColumns(["a", "b"], {"a": 0, "b": 1}).identity
    assert not PhraseColumns(["b", "a"], {"a": 0, "b": 1}).identity


def test_add_records_takes_detection_k_up_to_k_minus_1_and_widens_for_more():
    """K = 2: detection index 1 is the last column; index 2, a third detection, widens the store to
    K = 3 (issue 23: K is the largest of any image, not fixed by the first), keeping what it held."""
    gt, _ = build(["im0"], [("im0", "a", A)], {})
    dets = PhraseDetections(gt, 2)
    dets.add_records([0], [0], [1], [0.5], [A])
    assert np.isnan(dets.scores[0, 0, 0]) and dets.scores[0, 0, 1] == 0.5 and dets.pair_boxes[0, 1].tolist() == A
    dets.add_records([0], [0], [2], [0.25], [B])
    assert dets.k == 3 and dets.scores.shape == (1, 1, 3) and dets.pair_boxes.shape == (1, 3, 4)
    assert np.isnan(dets.scores[0, 0, 0]) and dets.scores[0, 0, 1:].tolist() == [0.5, 0.25]
    assert dets.pair_boxes[0, 1:].tolist() == [A, B] and np.isnan(dets.pair_boxes[0, 0]).all()
    dets.add_records([], [], [], [], np.zeros((0, 4)))  # nothing: no K to check
    dets.add_records([], [], [], [], [])  # plain empty lists too (the boxes' reshape to [0, 4] allows it)
    assert dets.scores[0, 0, 1] == 0.5


def test_summary_of_a_split_without_test_instances_is_nan_without_a_warning():
    """Two scored phrases, neither with a test instance: every mAP and accuracy is NaN (not a mean
    of nothing), every count 0, and the table prints nan."""
    result = PhraseDetectionResult(["a", "b"], np.zeros(2, np.int64), np.zeros(2, np.int64), np.full(2, np.nan),
                                   np.zeros(2, np.int64), "reference", 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = result.summarize(PhraseVocabulary({"b": 200}))
    assert sorted(k for k, v in m.items() if isinstance(v, float) and math.isnan(v)) == sorted(
        ["mAP", "loc_acc"] + [f"{key}_{b}" for key in ("mAP", "loc_acc") for b in ("zero_shot", "few_shot", "common")])
    assert {k: v for k, v in m.items() if k.startswith("num_")} == {
        f"{key}_{b}": 0 for key in ("num_phrases", "num_instances") for b in ("zero_shot", "few_shot", "common")}
    assert format_results_table(m).splitlines()[-1] == \
        "| all (mean of buckets) |          0 |            0 |   nan |       nan |"
