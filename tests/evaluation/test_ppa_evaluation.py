"""PPA-augmented evaluation (paper 003 Tables III, V): hand-computed APs, instance counts per bucket
and localization on the augmented ground truth; the evaluator, the tool flag, the config key and
the missing-WordNet error.

The hand case (3 images, boxes of tests/evaluation/toy.py, K = 1). A fake lexicon has no
synonyms, so on Flickr-style splits the PPA phrases of "red house" are its sub-phrases that are
test phrases: "house".

    annotations: im0 "red house" A (caption 1), "red house" A (caption 2); im1 "house" B;
                 im2 "red house" B
    PPA adds:    im0 "house" A (once: the second caption's copy is a duplicate, skipped);
                 im2 "house" B
    detections:  "red house": im0 (.9, A), im1 (.4, FAR), im2 (.3, FAR)
                 "house":     im0 (.8, A), im1 (.6, B),   im2 (.7, FAR)
    training counts: "house" 101 (common), "red house" 0 (zero-shot)

Plain. "red house" (N_gt 3): reference: im0 copies c0, c1 TP r1, r2; im1 FP r3; im2 FP r4 ->
AP = 1/3 (1 + 1) = 2/3; standard: im0 TP r1 (one detection, one instance), FP, FP -> 1/3.
"house" (N_gt 1): im0 .8 FP r1, im2 .7 FP r2, im1 .6 TP r3 -> AP = 1/3 (both modes).
PPA. "house" (N_gt 3): im0 .8 TP r1 (the augmented positive), im2 .7 FP r2 (FAR vs B), im1 .6 TP
r3 -> AP = 1/3 (1 + 2/3) = 5/9; "red house" unchanged.
Localization: plain 3 of 4 instances (im2 "red house" missed); PPA + im0 "house" (hit) + im2
"house" (miss): 4 of 6.
"""
import importlib.util
import json
import math
import os
from fractions import Fraction as F

import numpy as np
import pytest
from detectron2.config import get_cfg
from detectron2.data import DatasetCatalog, MetadataCatalog

import phrasedet  # noqa: F401
import phrasedet.evaluation.phrase_detection.ppa_ground_truth as ppa_gt_module
from phrasedet.config import add_phrasedet_config
from phrasedet.data import PositivePhraseAugmenter, WordNetUnavailable
from phrasedet.engine import PhrasedetTrainer
from phrasedet.evaluation import (PhraseDetectionEvaluator, PhraseDetections, evaluate_phrase_detection,
                                  evaluate_predictions_file)
from phrasedet.evaluation.phrase_detection.ppa_ground_truth import (augment_ground_truth, build_test_augmenter,
                                                                    evaluate_with_ppa, format_ppa_report,
                                                                    restrict_detections)
from phrasedet.text.vocab import PhraseVocabulary

from .toy import A, B, FAR, ap_of, build
from ..tool_runs import tool_path

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN, TEST, REFERIT_TEST = "ppa_eval_train", "ppa_eval_test", "ppa_eval_referit_test"
IMAGES = ["im0", "im1", "im2"]
GTS = [("im0", "red house", A), ("im0", "red house", A), ("im1", "house", B), ("im2", "red house", B)]
DETS = {("im0", "red house"): [(0.9, A)], ("im1", "red house"): [(0.4, FAR)], ("im2", "red house"): [(0.3, FAR)],
        ("im0", "house"): [(0.8, A)], ("im1", "house"): [(0.6, B)], ("im2", "house"): [(0.7, FAR)]}
VOCAB = PhraseVocabulary({"house": 101})
AP = {  # (mode, ppa) -> {phrase: AP}
    ("reference", False): {"red house": F(2, 3), "house": F(1, 3)},
    ("standard", False): {"red house": F(1, 3), "house": F(1, 3)},
    ("reference", True): {"red house": F(2, 3), "house": F(5, 9)},
    ("standard", True): {"red house": F(1, 3), "house": F(5, 9)},
}
COUNTS = {False: {"zero_shot": 3, "few_shot": 0, "common": 1}, True: {"zero_shot": 3, "few_shot": 0, "common": 3}}
LOC = {False: F(3, 4), True: F(4, 6)}


class NoSynonyms:
    """A lexicon without alternatives: only sub-phrases augment (Flickr style)."""

    def __init__(self, *args, **kwargs):
        pass

    def alternatives(self, word):
        return []


class Lexicon:
    def __init__(self, table):
        self.table = table

    def alternatives(self, word):
        return self.table.get(word, [])


def _key(ppa):
    return "phrase_detection_ppa" if ppa else "phrase_detection"


def _same(a: dict, b: dict):
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].keys() == b[key].keys()
        for name, x in a[key].items():
            y = b[key][name]
            assert (math.isnan(x) and math.isnan(y)) or x == y, (key, name)


def _augmented():
    """The hand case's plain and augmented ground truths and the detections stored over the latter."""
    plain_gt, _ = build(IMAGES, GTS, DETS)
    aug, _ = augment_ground_truth(plain_gt, PositivePhraseAugmenter(plain_gt.phrases, NoSynonyms(), "flickr"))
    dets = PhraseDetections(aug, 1)
    for (i, p), [(s, b)] in DETS.items():
        dets.add_records([IMAGES.index(i)], [aug.phrase_index[p]], [0], [s], [b])
    return plain_gt, aug, dets


def _check_metrics(m, mode, ppa):
    ap = AP[(mode, ppa)]
    assert m["mAP_zero_shot"] == pytest.approx(100 * float(ap["red house"]))
    assert m["mAP_common"] == pytest.approx(100 * float(ap["house"]))
    assert m["mAP"] == pytest.approx(100 * float(ap["red house"] + ap["house"]) / 2)
    assert {b: m[f"num_instances_{b}"] for b in COUNTS[ppa]} == COUNTS[ppa]
    assert m["loc_acc"] == pytest.approx(100 * float(LOC[ppa]))


# ---------------------------------------------------------------------- the core
def test_augmented_ground_truth_is_new_sorted_and_skips_duplicates():
    gt, _ = build(IMAGES, GTS, DETS)
    before = (gt.gt_image.copy(), gt.gt_phrase.copy(), gt.gt_box.copy())
    aug, duplicates = augment_ground_truth(gt, PositivePhraseAugmenter(gt.phrases, NoSynonyms(), "flickr"))
    assert duplicates == 1  # the second caption's "red house" on A would add "house" on A again
    assert aug is not gt and aug.phrases == gt.phrases and aug.image_ids == gt.image_ids
    assert (gt.gt_image == before[0]).all() and (gt.gt_phrase == before[1]).all() and gt.num_instances == 4
    rows = [(IMAGES[i], aug.phrases[j], list(b)) for i, j, b in zip(aug.gt_image, aug.gt_phrase, aug.gt_box.tolist())]
    assert rows == [("im0", "house", A), ("im0", "red house", A), ("im0", "red house", A), ("im1", "house", B),
                    ("im2", "house", B), ("im2", "red house", B)]
    assert list(aug.num_gt) == [3, 3]  # vocabulary ["house", "red house"]


def test_an_augmented_phrase_already_annotated_on_the_box_is_not_a_second_instance():
    # im0: "man" and "young man" on A (two captions), "young man" also on B: only "man" on B is new
    gt, _ = build(["im0"], [("im0", "man", A), ("im0", "young man", A), ("im0", "young man", B)], {})
    aug, duplicates = augment_ground_truth(gt, PositivePhraseAugmenter(gt.phrases, NoSynonyms(), "flickr"))
    assert duplicates == 1
    assert sorted((aug.phrases[j], tuple(b)) for j, b in zip(aug.gt_phrase, aug.gt_box.tolist())) == \
        [("man", tuple(A)), ("man", tuple(B)), ("young man", tuple(A)), ("young man", tuple(B))]


def test_after_a_duplicate_the_next_augmented_phrase_is_still_added_and_duplicates_are_counted():
    """"old man" on A augments to "man" (annotated on A: duplicate) then "person" (new); twice
    (two captions): 3 duplicates (man, man, person again) and one new instance."""
    gt, _ = build(["im0"], [("im0", "old man", A), ("im0", "man", A), ("im0", "old man", A)], {},
                  phrases=["man", "old man", "person"])
    aug, duplicates = augment_ground_truth(gt, lambda p: {"old man": ["man", "person"]}.get(p, []))
    assert duplicates == 3
    assert sorted((aug.phrases[j], tuple(b)) for j, b in zip(aug.gt_phrase, aug.gt_box.tolist())) == \
        [("man", tuple(A)), ("old man", tuple(A)), ("old man", tuple(A)), ("person", tuple(A))]


def test_an_augmented_phrase_outside_the_test_vocabulary_is_an_error_naming_both():
    gt, _ = build(["im0"], [("im0", "old man", A)], {})
    with pytest.raises(ValueError) as e:
        augment_ground_truth(gt, lambda p: ["elder"])
    assert str(e.value) == ("PPA phrase 'elder' of 'old man' is not a test phrase "
                            "(the augmenter must draw its candidates from the split's phrases)")


def test_nothing_to_augment_gives_the_same_instances():
    gt, _ = build(["im0", "im1"], [("im1", "dog", B), ("im0", "dog", A)], {})
    aug, duplicates = augment_ground_truth(gt, lambda p: [])
    assert duplicates == 0 and aug.gt_image.dtype == np.int64 and aug.gt_box.dtype == np.float64
    assert (aug.gt_image.tolist(), aug.gt_phrase.tolist(), aug.gt_box.tolist()) == ([0, 1], [0, 0], [A, B])


def test_referit_style_replaces_words_but_keeps_left_right_and_makes_no_subphrases():
    gt, _ = build(["im0"], [("im0", "left dog", A), ("im0", "dog", B), ("im0", "left canine", B),
                            ("im0", "right dog", B)], {})
    lex = Lexicon({"dog": ["canine"], "left": ["right"]})
    aug, _ = augment_ground_truth(gt, PositivePhraseAugmenter(gt.phrases, lex, "referit"))
    added = sorted((aug.phrases[j], tuple(b)) for j, b in zip(aug.gt_phrase, aug.gt_box.tolist()))
    # "left dog" -> "left canine" on A (not "dog": no sub-phrases, not "right dog": left is fixed)
    assert added == sorted([("left dog", tuple(A)), ("left canine", tuple(A)), ("dog", tuple(B)),
                            ("left canine", tuple(B)), ("right dog", tuple(B))])


@pytest.mark.parametrize("mode", ["reference", "standard"])
def test_hand_case_aps_counts_and_localization_with_and_without_ppa(mode):
    plain_gt, aug, dets = _augmented()
    results, per_key = evaluate_with_ppa(plain_gt, aug, dets, VOCAB, mode=mode)
    assert set(results) == {"phrase_detection", "phrase_detection_ppa"}
    for ppa in (False, True):
        for phrase, ap in AP[(mode, ppa)].items():
            assert ap_of(per_key[_key(ppa)], phrase) == pytest.approx(float(ap))
        _check_metrics(results[_key(ppa)], mode, ppa)
    # the plain view equals an evaluation on the plain ground truth with plain storage
    gt2, dets2 = build(IMAGES, GTS, DETS)
    assert ap_of(evaluate_phrase_detection(gt2, dets2, mode), "house") == pytest.approx(1 / 3)
    report = format_ppa_report("hdr", results)
    zero = {m: "%.2f" % (100 * float(AP[(mode, m)]["red house"])) for m in (False, True)}
    assert (f"| without PPA |                 3 |                0 |              1 |             4 |           {zero[False]} |"
            "            nan |        33.33 |") in report
    assert (f"| with PPA    |                 3 |                0 |              3 |             6 |           {zero[True]} |"
            "            nan |        55.56 |") in report


def test_default_mode_is_reference():
    plain_gt, aug, dets = _augmented()
    results, _ = evaluate_with_ppa(plain_gt, aug, dets, VOCAB)
    for ppa in (False, True):
        _check_metrics(results[_key(ppa)], "reference", ppa)


# IoU threshold 0: every detection matches an instance of its phrase in its image, FAR included
# (IoU 0 >= 0). Reference mode. "red house" (N_gt 3): im0 .9 copies c0, c1 TP r1, r2; im1 .4 FP r3
# (no instance there); im2 .3 FAR TP r4 -> AP = 1/3 (1 + 1 + 3/4) = 11/12, plain and PPA alike.
# Plain "house" (N_gt 1): im0 .8 FP r1, im2 .7 FP r2 (no plain "house" there), im1 .6 TP r3 -> 1/3.
# PPA "house" (N_gt 3): .8, .7, .6 all TP -> 1. Every instance is localized.
IOU0 = {False: (F(11, 12), F(1, 3)), True: (F(11, 12), F(1))}


def test_iou_threshold_reaches_both_evaluations():
    plain_gt, aug, dets = _augmented()
    results, _ = evaluate_with_ppa(plain_gt, aug, dets, VOCAB, iou_thresh=0.0)
    for ppa, (red_house, house) in IOU0.items():
        m = results[_key(ppa)]
        assert (m["mAP_zero_shot"], m["mAP_common"], m["loc_acc"]) == (
            pytest.approx(100 * float(red_house)), pytest.approx(100 * float(house)), 100.0)


def _hand_filter():
    """im0 allows only "red": "house" is filtered there (its augmented TP falls to the end of the
    ranking); "red house" is never filtered."""
    from phrasedet.evaluation import PhraseFilter

    return PhraseFilter({"im0": ["red"], "im1": ["house"], "im2": ["house"]}, top_n=1)


def test_filtered_ppa_evaluation_in_standard_mode_by_hand():
    """Standard mode with the filter. "red house" (N_gt 3, im0 .9 A takes one instance): TP r1,
    FP r2, FP r3 -> 1/3 plain and PPA, filtered or not (reference would give 2/3).
    "house": PPA unfiltered 5/9 (module docstring); PPA filtered: im2 .7 FP r1, im1 .6 TP r2, im0
    -inf TP r3 -> 1/3 (1/2 + 2/3) = 7/18; plain filtered: im2 FP, im1 TP r2, im0 -inf FP -> 1/2.
    Filter recall over the PPA instances: zero-shot 3 of 3, common 2 of 3 (im0 "house" filtered),
    few-shot none (NaN); kept pairs: 5 of 3 images x 2 phrases."""
    plain_gt, aug, dets = _augmented()
    results, per_key = evaluate_with_ppa(plain_gt, aug, dets, VOCAB, mode="standard", phrase_filter=_hand_filter())
    assert set(per_key) == set(results)
    for key, r in per_key.items():  # each result is the one its metrics were summarized from
        assert r.summarize(VOCAB)["mAP_zero_shot"] == results[key]["mAP_zero_shot"], key
    expected = {"phrase_detection": (F(1, 3), F(1, 2)), "phrase_detection_unfiltered": (F(1, 3), F(1, 3)),
                "phrase_detection_ppa": (F(1, 3), F(7, 18)), "phrase_detection_ppa_unfiltered": (F(1, 3), F(5, 9))}
    for key, (red_house, house) in expected.items():
        assert (results[key]["mAP_zero_shot"], results[key]["mAP_common"]) == (
            pytest.approx(100 * float(red_house)), pytest.approx(100 * float(house))), key
    ppa = results["phrase_detection_ppa"]
    assert (ppa["filter_recall_zero_shot"], ppa["filter_recall_common"], ppa["filter_top_n"]) == (
        100.0, pytest.approx(100 * 2 / 3), 1)
    assert math.isnan(ppa["filter_recall_few_shot"])
    assert (ppa["filter_recall"], ppa["filter_kept"]) == (pytest.approx(100 * 5 / 6), pytest.approx(100 * 5 / 6))


def test_filtered_ppa_evaluation_passes_the_iou_threshold():
    """IoU threshold 0 with the filter (reference mode): every entry of a phrase in an image with an
    instance is a true positive, so filtering re-ranks nothing that matters: "red house" 11/12
    everywhere; PPA "house" 1 filtered or not; plain "house" filtered: im2 .7 FP r1, im1 .6 TP r2,
    im0 -inf FP -> 1/2 (unfiltered 1/3, as IOU0)."""
    plain_gt, aug, dets = _augmented()
    results, _ = evaluate_with_ppa(plain_gt, aug, dets, VOCAB, iou_thresh=0.0, phrase_filter=_hand_filter())
    expected = {"phrase_detection": F(1, 2), "phrase_detection_unfiltered": F(1, 3), "phrase_detection_ppa": F(1),
                "phrase_detection_ppa_unfiltered": F(1)}
    for key, house in expected.items():
        assert (results[key]["mAP_zero_shot"], results[key]["mAP_common"]) == (
            pytest.approx(100 * 11 / 12), pytest.approx(100 * float(house))), key


def test_occurrences_footer_word_for_word():
    """The footer as the paper prints it: counts with thousands separators (kept as text, not
    re-parsed as numbers), totals summed (140 + 840 + 287 = 1,267; 146 + 1,387 + 550 = 2,083),
    mAPs with two decimals (50.00 stays 50.00, NaN prints as nan), text left, numbers right."""
    plain = {"num_instances_zero_shot": 140, "num_instances_few_shot": 840, "num_instances_common": 287,
             "mAP_zero_shot": 7.6, "mAP_few_shot": 13.1, "mAP_common": 50.0, "mAP": float("nan")}
    ppa = {"num_instances_zero_shot": 146, "num_instances_few_shot": 1387, "num_instances_common": 550,
           "mAP_zero_shot": 100.0, "mAP_few_shot": 0.125, "mAP_common": 27.764, "mAP": 16.85}
    assert ppa_gt_module._occurrences_table(plain, ppa).splitlines() == [
        "| test GT     |   #occ. zero_shot |   #occ. few_shot |   #occ. common |   #occ. total |   mAP zero_shot |"
        "   mAP few_shot |   mAP common |   mAP |",
        "|:------------|------------------:|-----------------:|---------------:|--------------:|----------------:|"
        "---------------:|-------------:|------:|",
        "| without PPA |               140 |              840 |            287 |         1,267 |            7.60 |"
        "          13.10 |        50.00 |   nan |",
        "| with PPA    |               146 |            1,387 |            550 |         2,083 |          100.00 |"
        "           0.12 |        27.76 | 16.85 |"]


# format_ppa_report of the hand case, reference mode without a filter (numbers: module docstring).
REPORT = """\
hdr, in %:
| bucket                |   #phrases |   #instances |   mAP |   loc acc |
|:----------------------|-----------:|-------------:|------:|----------:|
| zero_shot             |          1 |            3 | 66.67 |     66.67 |
| few_shot              |          0 |            0 |   nan |       nan |
| common                |          1 |            1 | 33.33 |    100.00 |
| all (mean of buckets) |          2 |            4 | 50.00 |     75.00 |
hdr, PPA-augmented ground truth (TEST.PHRASE_DETECTION.PPA), in %:
| bucket                |   #phrases |   #instances |   mAP |   loc acc |
|:----------------------|-----------:|-------------:|------:|----------:|
| zero_shot             |          1 |            3 | 66.67 |     66.67 |
| few_shot              |          0 |            0 |   nan |       nan |
| common                |          1 |            3 | 55.56 |     66.67 |
| all (mean of buckets) |          2 |            6 | 61.11 |     66.67 |
Test occurrences per bucket (paper 003 Tables IV/V footers), mAP in %:
| test GT     |   #occ. zero_shot |   #occ. few_shot |   #occ. common |   #occ. total |   mAP zero_shot |   mAP few_shot |   mAP common |   mAP |
|:------------|------------------:|-----------------:|---------------:|--------------:|----------------:|---------------:|-------------:|------:|
| without PPA |                 3 |                0 |              1 |             4 |           66.67 |            nan |        33.33 | 50.00 |
| with PPA    |                 3 |                0 |              3 |             6 |           66.67 |            nan |        55.56 | 61.11 |"""

# ... and in standard mode with _hand_filter (numbers: test_filtered_ppa_evaluation_in_standard_mode_by_hand;
# plain mAP (1/3 + 1/3) / 2 = 33.33 -> (1/3 + 1/2) / 2 = 41.67, PPA (1/3 + 5/9) / 2 = 44.44 -> (1/3 + 7/18) / 2 = 36.11).
FILTERED_REPORT = """\
hdr, without phrase filtering, in %:
| bucket                |   #phrases |   #instances |   mAP |   loc acc |
|:----------------------|-----------:|-------------:|------:|----------:|
| zero_shot             |          1 |            3 | 33.33 |     66.67 |
| few_shot              |          0 |            0 |   nan |       nan |
| common                |          1 |            1 | 33.33 |    100.00 |
| all (mean of buckets) |          2 |            4 | 33.33 |     75.00 |
with phrase filtering (top 1 retrieved sentences per image; 100.00% of the test instances keep their phrase, 83.33% of the (image, phrase) pairs are kept), in %:
| bucket                |   #phrases |   #instances |   mAP |   loc acc |
|:----------------------|-----------:|-------------:|------:|----------:|
| zero_shot             |          1 |            3 | 33.33 |     66.67 |
| few_shot              |          0 |            0 |   nan |       nan |
| common                |          1 |            1 | 50.00 |    100.00 |
| all (mean of buckets) |          2 |            4 | 41.67 |     75.00 |
mAP 33.33 -> 41.67 with the filter (filter recall 100.00%):
| bucket                |   mAP w/o filter |   mAP w/ filter |   filter recall |
|:----------------------|-----------------:|----------------:|----------------:|
| zero_shot             |            33.33 |           33.33 |          100.00 |
| few_shot              |              nan |             nan |             nan |
| common                |            33.33 |           50.00 |          100.00 |
| all (mean of buckets) |            33.33 |           41.67 |          100.00 |
hdr, PPA-augmented ground truth, without phrase filtering, in %:
| bucket                |   #phrases |   #instances |   mAP |   loc acc |
|:----------------------|-----------:|-------------:|------:|----------:|
| zero_shot             |          1 |            3 | 33.33 |     66.67 |
| few_shot              |          0 |            0 |   nan |       nan |
| common                |          1 |            3 | 55.56 |     66.67 |
| all (mean of buckets) |          2 |            6 | 44.44 |     66.67 |
with phrase filtering (top 1 retrieved sentences per image; 83.33% of the test instances keep their phrase, 83.33% of the (image, phrase) pairs are kept), in %:
| bucket                |   #phrases |   #instances |   mAP |   loc acc |
|:----------------------|-----------:|-------------:|------:|----------:|
| zero_shot             |          1 |            3 | 33.33 |     66.67 |
| few_shot              |          0 |            0 |   nan |       nan |
| common                |          1 |            3 | 38.89 |     66.67 |
| all (mean of buckets) |          2 |            6 | 36.11 |     66.67 |
mAP 44.44 -> 36.11 with the filter (filter recall 83.33%):
| bucket                |   mAP w/o filter |   mAP w/ filter |   filter recall |
|:----------------------|-----------------:|----------------:|----------------:|
| zero_shot             |            33.33 |           33.33 |          100.00 |
| few_shot              |              nan |             nan |             nan |
| common                |            55.56 |           38.89 |           66.67 |
| all (mean of buckets) |            44.44 |           36.11 |           83.33 |
Test occurrences per bucket (paper 003 Tables IV/V footers), mAP in %:
| test GT     |   #occ. zero_shot |   #occ. few_shot |   #occ. common |   #occ. total |   mAP zero_shot |   mAP few_shot |   mAP common |   mAP |
|:------------|------------------:|-----------------:|---------------:|--------------:|----------------:|---------------:|-------------:|------:|
| without PPA |                 3 |                0 |              1 |             4 |           33.33 |            nan |        50.00 | 41.67 |
| with PPA    |                 3 |                0 |              3 |             6 |           33.33 |            nan |        38.89 | 36.11 |"""


def test_ppa_reports_word_for_word():
    plain_gt, aug, dets = _augmented()
    results, _ = evaluate_with_ppa(plain_gt, aug, dets, VOCAB)
    assert format_ppa_report("hdr", results) == REPORT
    plain_gt, aug, dets = _augmented()
    results, _ = evaluate_with_ppa(plain_gt, aug, dets, VOCAB, mode="standard", phrase_filter=_hand_filter())
    assert format_ppa_report("hdr", results) == FILTERED_REPORT


def test_restricting_to_the_same_ground_truth_keeps_every_pair():
    """Pair 0 included: the view's boxes are the stored ones, pair for pair."""
    _, aug, dets = _augmented()
    view = restrict_detections(dets, aug)
    np.testing.assert_array_equal(view.pair_boxes, dets.pair_boxes)


@pytest.mark.parametrize("images, gts", [
    (IMAGES, [("im0", "red house", A), ("im1", "dog", B)]),  # same images, another vocabulary
    (["im0", "im1", "im3"], GTS[:3] + [("im3", "red house", B)]),  # same vocabulary, other images
])
def test_restrict_detections_refuses_a_split_that_differs_in_images_or_in_vocabulary(images, gts):
    _, _, dets = _augmented()
    other, _ = build(images, gts, {})
    with pytest.raises(ValueError) as e:
        restrict_detections(dets, other)
    assert str(e.value) == "restrict_detections: the ground truths differ in images or vocabulary"


def test_restrict_detections_names_a_pair_without_stored_boxes():
    plain_gt, aug, dets = _augmented()
    with pytest.raises(ValueError) as e:
        restrict_detections(restrict_detections(dets, plain_gt), aug)
    assert str(e.value) == "restrict_detections: a pair of the ground truth has no stored boxes"


def test_restrict_detections_shares_scores_and_refuses_other_splits():
    plain_gt, aug, dets = _augmented()
    view = restrict_detections(dets, plain_gt)
    assert view.scores is dets.scores and view.gt is plain_gt and view.pair_boxes.shape == (plain_gt.num_pairs, 1, 4)
    with pytest.raises(ValueError, match="has no stored boxes"):
        restrict_detections(view, aug)
    other, _ = build(["x"], [("x", "house", A)], {})
    with pytest.raises(ValueError, match="differ in images or vocabulary"):
        restrict_detections(dets, other)


# ---------------------------------------------------------------------- registered split: evaluator, tool, trainer
def _dicts(gts, images):
    return [{"image_id": i, "height": 100, "width": 100,
             "annotations": [{"phrase": p, "bbox": list(b)} for j, p, b in gts if j == i]} for i in images]


@pytest.fixture
def registered(monkeypatch):
    if TEST not in DatasetCatalog.list():
        DatasetCatalog.register(TRAIN, lambda: _dicts([("t", "house", A)] * 101, ["t"]))
        DatasetCatalog.register(TEST, lambda: _dicts(GTS, IMAGES))
        DatasetCatalog.register(REFERIT_TEST, lambda: _dicts(GTS, IMAGES))
        for name, style in ((TRAIN, "flickr"), (TEST, "flickr"), (REFERIT_TEST, "referit")):
            MetadataCatalog.get(name).set(evaluator_type="phrase_detection", train_dataset=TRAIN, phrase_style=style)
    monkeypatch.setattr(ppa_gt_module, "WordNetLexicon", NoSynonyms)  # the default lexicon: no WordNet needed


def _outputs(image_id):
    import torch

    phrases = ["house", "red house"]
    scores = [[DETS[(image_id, p)][0][0]] for p in phrases]
    boxes = [[DETS[(image_id, p)][0][1]] for p in phrases]
    return {"phrases": phrases, "scores": torch.tensor(scores), "boxes": torch.tensor(boxes)}


def _run(evaluator):
    evaluator.reset()
    for d in DatasetCatalog.get(TEST)[::-1]:
        evaluator.process([d], [_outputs(d["image_id"])])
    return evaluator.evaluate()


def test_style_comes_from_the_dataset(registered):
    from phrasedet.evaluation import PhraseGroundTruth

    gt = PhraseGroundTruth.from_dataset_dicts(DatasetCatalog.get(TEST))
    assert build_test_augmenter(TEST, gt).style == "flickr"
    assert build_test_augmenter(REFERIT_TEST, gt).style == "referit"
    assert build_test_augmenter(REFERIT_TEST, gt)("red house") == []  # no sub-phrases on ReferIt


@pytest.mark.parametrize("mode", ["reference", "standard"])
def test_evaluator_reports_plain_and_ppa_and_writes_both_aps(registered, tmp_path, mode, caplog):
    evaluator = PhraseDetectionEvaluator(TEST, mode=mode, output_dir=str(tmp_path), distributed=False, ppa=True)
    with caplog.at_level("INFO"):
        results = _run(evaluator)
    assert set(results) == {"phrase_detection", "phrase_detection_ppa"}
    for ppa in (False, True):
        _check_metrics(results[_key(ppa)], mode, ppa)
    assert "| with PPA    |                 3 |                0 |              3 |             6 |" in caplog.text
    aps = {r["phrase"]: r for r in json.loads((tmp_path / "phrase_aps_ppa.json").read_text())}
    assert aps["house"]["num_gt"] == 3 and aps["house"]["bucket"] == "common"
    assert json.loads((tmp_path / "phrase_aps.json").read_text())[0]["num_gt"] == 1  # "house", plain
    # the file written by the PPA evaluator is evaluated to the same numbers by the tool's core
    again = evaluate_predictions_file(str(tmp_path / "phrase_predictions.jsonl"), TEST, mode, ppa=True)
    _same(again, results)
    # without PPA: only the plain metrics, equal to the PPA run's plain ones
    plain = _run(PhraseDetectionEvaluator(TEST, mode=mode, distributed=False))
    _same(plain, {"phrase_detection": results["phrase_detection"]})


def test_ppa_with_a_phrase_filter_reports_four_tables(registered):
    from phrasedet.evaluation import PhraseFilter

    # im0 allows only "red": "house" is filtered there (its augmented TP falls to the end of the ranking)
    phrase_filter = PhraseFilter({"im0": ["red"], "im1": ["house"], "im2": ["house"]}, top_n=1)
    results = _run(PhraseDetectionEvaluator(TEST, mode="reference", distributed=False, ppa=True,
                                            phrase_filter=phrase_filter))
    assert set(results) == {"phrase_detection", "phrase_detection_unfiltered", "phrase_detection_ppa",
                            "phrase_detection_ppa_unfiltered"}
    _check_metrics(results["phrase_detection_unfiltered"], "reference", False)
    _check_metrics(results["phrase_detection_ppa_unfiltered"], "reference", True)
    # filtered PPA "house": im2 .7 FP r1, im1 .6 TP r2, im0 -inf TP r3 -> AP = 1/3 (1/2 + 2/3) = 7/18
    ppa = results["phrase_detection_ppa"]
    assert ppa["mAP_common"] == pytest.approx(100 * 7 / 18) and ppa["loc_acc"] == pytest.approx(100 * 4 / 6)
    # filter recall over the augmented instances: im0 "house" A is filtered: 5 of 6
    assert ppa["filter_recall"] == pytest.approx(100 * 5 / 6)
    # filtered plain "house": im2 .7 FP r1, im1 .6 TP r2 (im0 -inf FP r3) -> 1/2; recall 4 of 4
    assert results["phrase_detection"]["mAP_common"] == pytest.approx(50.0)
    assert results["phrase_detection"]["filter_recall"] == pytest.approx(100.0)


def _tool():
    spec = importlib.util.spec_from_file_location("evaluate_predictions", tool_path("evaluate_predictions.py"))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_tool_ppa_flag_end_to_end(registered, tmp_path, capsys):
    path = tmp_path / "predictions.jsonl"
    path.write_text("".join(json.dumps({"image_id": i, "phrase": p, "box": b, "score": s}) + "\n"
                            for (i, p), [(s, b)] in DETS.items()))
    tool = _tool()
    got = tool.main(["--predictions", str(path), "--dataset", TEST, "--mode", "standard", "--ppa",
                     "--output-dir", str(tmp_path / "out")])
    _check_metrics(got["phrase_detection"], "standard", False)
    _check_metrics(got["phrase_detection_ppa"], "standard", True)
    printed = capsys.readouterr().out
    assert "PPA-augmented ground truth" in printed and "Test occurrences per bucket" in printed
    _same(json.loads((tmp_path / "out" / "phrase_detection_results.json").read_text()), got)
    assert set(tool.main(["--predictions", str(path), "--dataset", TEST])) == {"phrase_detection"}


def _cfg(tmp_path, **keys):
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.OUTPUT_DIR = str(tmp_path)
    for k, v in keys.items():
        setattr(cfg.TEST.PHRASE_DETECTION, k, v)
    return cfg


def test_config_key_through_the_trainer(registered, tmp_path):
    assert _cfg(tmp_path).TEST.PHRASE_DETECTION.PPA is False
    results = _run(PhrasedetTrainer.build_evaluator(_cfg(tmp_path, PPA=True, SAVE_PREDICTIONS=False), TEST))
    _check_metrics(results["phrase_detection_ppa"], "reference", True)
    assert set(_run(PhrasedetTrainer.build_evaluator(_cfg(tmp_path), TEST))) == {"phrase_detection"}
    with pytest.raises(ValueError, match="TEST.PHRASE_DETECTION.PPA needs TEST.PHRASE_DETECTION.VOCABULARY 'dataset'"):
        PhrasedetTrainer.build_evaluator(_cfg(tmp_path, PPA=True, VOCABULARY="image"), TEST)


def test_missing_wordnet_names_the_evaluation_key(registered, monkeypatch, tmp_path, request):
    monkeypatch.undo()  # the real WordNetLexicon, with nltk's wordnet corpus missing
    request.getfixturevalue("missing_wordnet")
    with pytest.raises(WordNetUnavailable, match=r"\(TEST.PHRASE_DETECTION.PPA True\).*nltk.downloader wordnet.*"
                                                 r"or set TEST.PHRASE_DETECTION.PPA False"):
        PhrasedetTrainer.build_evaluator(_cfg(tmp_path, PPA=True), TEST)
    with pytest.raises(WordNetUnavailable, match=r"INPUT.PHRASES.PPA False"):  # the training side's key
        PositivePhraseAugmenter({"x"})
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"image_id": "im0", "phrase": "house", "box": A, "score": 1.0}) + "\n")
    with pytest.raises(SystemExit, match="error: Positive phrase augmentation \\(TEST.PHRASE_DETECTION.PPA True\\)"):
        _tool().main(["--predictions", str(path), "--dataset", TEST, "--ppa"])
