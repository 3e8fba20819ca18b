"""Hand-computed APs of the core in both modes, and a brute-force cross-check with ties.

Notation in the comments: entries of a phrase in ranking order, TP/FP, rank r; AP = (1 / N_gt) *
sum over TP ranks of (TPs so far) / r.
"""
from fractions import Fraction as F

import numpy as np
import pytest

import phrasedet.evaluation.phrase_detection.phrase_detection_ap as core
from phrasedet.evaluation import PhraseDetections, PhraseGroundTruth, evaluate_phrase_detection, paired_iou

from .toy import A, A_HALF, A_LOW, B, FAR, ap_of, build

MODES = ("reference", "standard")


def _ap(gt, dets, mode, phrase):
    return ap_of(evaluate_phrase_detection(gt, dets, mode), phrase)


@pytest.mark.parametrize("mode", MODES)
def test_ties_are_broken_by_dataset_order(mode):
    # "dog" annotated in im1 and im2; im0 has no dog. All three detections score 0.5.
    gts = [("im1", "dog", A), ("im2", "dog", A)]
    dets = {("im0", "dog"): [(0.5, A)], ("im1", "dog"): [(0.5, A)], ("im2", "dog"): [(0.5, A)]}
    # dataset order im0, im1, im2: FP r1, TP r2, TP r3 -> AP = 1/2 * (1/2 + 2/3) = 7/12
    gt, d = build(["im0", "im1", "im2"], gts, dets)
    assert _ap(gt, d, mode, "dog") == pytest.approx(float(F(7, 12)))
    # dataset order im2, im1, im0: TP r1, TP r2, FP r3 -> AP = 1/2 * (1 + 1) = 1
    gt, d = build(["im2", "im1", "im0"], gts, dets)
    assert _ap(gt, d, mode, "dog") == pytest.approx(1.0)


@pytest.mark.parametrize("mode, expected", [
    # reference: im0's detection is appended once per instance:
    #   (.9, im0 copy0 vs A) TP r1, (.9, im0 copy1 vs B) FP r2, (.8, im1) TP r3
    #   AP = 1/3 * (1/1 + 2/3) = 5/9
    ("reference", F(5, 9)),
    # standard: (.9, im0) matches A: TP r1; (.8, im1) TP r2; B never matched -> AP = 1/3 * (1 + 1) = 2/3
    ("standard", F(2, 3)),
])
def test_several_instances_in_one_image(mode, expected):
    gts = [("im0", "man", A), ("im0", "man", B), ("im1", "man", B)]
    dets = {("im0", "man"): [(0.9, A)], ("im1", "man"): [(0.8, B)]}
    gt, d = build(["im0", "im1"], gts, dets)
    assert _ap(gt, d, mode, "man") == pytest.approx(float(expected))


@pytest.mark.parametrize("mode, expected", [
    # reference, K=2: im0 (instances A, B) dets k0 (.9, A), k1 (.6, B); im1 has no "man": (.8), (.7).
    #   (.9 c0 k0) TP r1, (.9 c1 k0) FP r2, (.8 im1) FP r3, (.7 im1) FP r4, (.6 c0 k1) FP r5,
    #   (.6 c1 k1) TP r6  ->  AP = 1/2 * (1/1 + 2/6) = 2/3
    ("reference", F(2, 3)),
    # standard: .9 -> A TP r1, .8 FP r2, .7 FP r3, .6 -> B TP r4  ->  AP = 1/2 * (1 + 2/4) = 3/4
    ("standard", F(3, 4)),
])
def test_k_detections_and_negatives_from_an_image_without_the_phrase(mode, expected):
    gts = [("im0", "man", A), ("im0", "man", B)]
    dets = {("im0", "man"): [(0.9, A), (0.6, B)], ("im1", "man"): [(0.8, FAR), (0.7, A)]}
    gt, d = build(["im0", "im1"], gts, dets, k=2)
    assert _ap(gt, d, mode, "man") == pytest.approx(float(expected))


@pytest.mark.parametrize("mode", MODES)
def test_only_the_first_hit_of_the_k_detections_counts(mode):
    # im0: one instance A, k0 (.9, A) and k1 (.7, A_HALF, IoU exactly 0.5: a hit); im1: A, k0 (.6, A).
    # Both modes: .9 TP r1, .7 FP r2 (duplicate), .6 TP r3  ->  AP = 1/2 * (1 + 2/3) = 5/6
    gts = [("im0", "cat", A), ("im1", "cat", A)]
    dets = {("im0", "cat"): [(0.9, A), (0.7, A_HALF)], ("im1", "cat"): [(0.6, A)]}
    gt, d = build(["im0", "im1"], gts, dets, k=2)
    assert _ap(gt, d, mode, "cat") == pytest.approx(float(F(5, 6)))


@pytest.mark.parametrize("mode, expected", [
    # two overlapping instances A and A2 = [0, 0, 10, 8] (IoU 0.8) of "man" in one image;
    # k0 (.9, A): IoU 1 with A, 0.8 with A2; k1 (.8, A3 = [0, 0, 10, 9]): 0.9 with A, 0.889 with A2.
    # reference: each instance takes its highest-scored hit, k0, for both copies:
    #   (.9 c0) TP r1, (.9 c1) TP r2, (.8 c0) FP, (.8 c1) FP  ->  AP = 1/2 * (1 + 1) = 1
    ("reference", F(1)),
    # standard (VOC): k0 takes A; k1's best instance is A, already taken -> FP (no fall-back to A2)
    #   .9 TP r1, .8 FP r2  ->  AP = 1/2 * 1 = 1/2
    ("standard", F(1, 2)),
])
def test_standard_mode_best_instance_already_matched_is_a_false_positive(mode, expected):
    a2, a3 = [0.0, 0.0, 10.0, 8.0], [0.0, 0.0, 10.0, 9.0]
    gt, d = build(["im0"], [("im0", "man", A), ("im0", "man", a2)], {("im0", "man"): [(0.9, A), (0.8, a3)]}, k=2)
    assert _ap(gt, d, mode, "man") == pytest.approx(float(expected))


@pytest.mark.parametrize("mode", MODES)
def test_misses_count_in_recall(mode):
    # "cat" in im0, im1, im2; im0 detected (.7, A); im1's detection (.9, A_LOW) has IoU 0.49 (FP);
    # im2 has no "cat" detection at all. .9 FP r1, .7 TP r2 -> AP = 1/3 * (1/2) = 1/6
    gts = [("im0", "cat", A), ("im1", "cat", A), ("im2", "cat", A)]
    dets = {("im0", "cat"): [(0.7, A)], ("im1", "cat"): [(0.9, A_LOW)]}
    gt, d = build(["im0", "im1", "im2"], gts, dets)
    assert _ap(gt, d, mode, "cat") == pytest.approx(float(F(1, 6)))


@pytest.mark.parametrize("mode", MODES)
def test_phrase_without_test_instances_is_skipped(mode):
    # "unicorn" is scored (a confident detection) but has no test instance: no AP, not counted.
    gt, d = build(["im0"], [("im0", "dog", A)], {("im0", "dog"): [(0.3, A)], ("im0", "unicorn"): [(0.99, A)]},
                  phrases=["dog", "unicorn"])
    r = evaluate_phrase_detection(gt, d, mode)
    assert np.isnan(ap_of(r, "unicorn")) and ap_of(r, "dog") == 1.0
    assert r.num_gt.tolist() == [1, 0]


@pytest.mark.parametrize("mode", MODES)
def test_minus_infinity_scores_stay_in_the_ranking(mode):
    # Quirk (iii) of the released code: filtered pairs get -inf but stay entries.
    # im0 (dog A): (-inf, A) TP; im1 (no dog): (-inf, A) FP; im2 (dog A): (.5, FAR) FP.
    # (.5 im2) FP r1, then the equal -inf in dataset order: (im0) TP r2, (im1) FP r3
    # -> AP = 1/2 * (1/2) = 1/4
    gts = [("im0", "dog", A), ("im2", "dog", A)]
    dets = {("im0", "dog"): [(-np.inf, A)], ("im1", "dog"): [(-np.inf, A)], ("im2", "dog"): [(0.5, FAR)]}
    gt, d = build(["im0", "im1", "im2"], gts, dets)
    assert _ap(gt, d, mode, "dog") == pytest.approx(0.25)


# ----------------------------------------------------------------------------- brute force
def _brute_ap(gt, dets, mode, thr=0.5):
    """The definitions, literally: build every entry, sort by (-score, image, copy, k), walk."""
    N, V, K = dets.scores.shape
    ap = np.full(V, np.nan)
    for p in range(V):
        if gt.num_gt[p] == 0:
            continue
        entries = []
        for i in range(N):
            gts = gt.gt_box[(gt.gt_image == i) & (gt.gt_phrase == p)]
            q = gt.find_pairs([i], [p])[0]
            dk = [(k, float(dets.scores[i, p, k])) for k in range(K) if not np.isnan(dets.scores[i, p, k])]
            if len(gts) == 0:
                entries += [(s, i, 0, k, 0) for k, s in dk]
            elif mode == "reference":
                for c, g in enumerate(gts):
                    hits = [(-s, k) for k, s in dk if paired_iou(dets.pair_boxes[q, k], g) >= thr]
                    best = min(hits)[1] if hits else None
                    entries += [(s, i, c, k, int(k == best)) for k, s in dk]
            else:
                matched = [False] * len(gts)
                for k, s in sorted(dk, key=lambda t: (-t[1], t[0])):
                    ious = np.nan_to_num([paired_iou(dets.pair_boxes[q, k], g) for g in gts], nan=-1.0)
                    b = int(np.argmax(ious))
                    hit = ious[b] >= thr and not matched[b]
                    matched[b] = matched[b] or hit
                    entries.append((s, i, 0, k, int(hit)))
        entries.sort(key=lambda e: (-e[0], e[1], e[2], e[3]))
        tp, total = 0, 0.0
        for r, e in enumerate(entries, 1):
            if e[4]:
                tp += 1
                total += tp / r
        ap[p] = total / gt.num_gt[p]
    return ap


@pytest.mark.parametrize("seed", range(3))
def test_core_equals_brute_force_on_random_cases_with_ties(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    for trial in range(40):
        # tiny blocks and chunks exercise the blocked counting
        monkeypatch.setattr(core, "_BLOCK_ELEMENTS", int(rng.integers(1, 40)))
        monkeypatch.setattr(core, "_COMPARE_ELEMENTS", int(rng.integers(1, 40)))
        N, V, K, G = rng.integers(1, 7), rng.integers(1, 6), rng.integers(1, 4), rng.integers(0, 12)
        corner = rng.integers(0, 3, (G, 2)) * 4.0
        gt = PhraseGroundTruth([f"im{i}" for i in range(N)], [f"p{j}" for j in range(V)],
                               rng.integers(0, N, G), rng.integers(0, V, G),
                               np.concatenate([corner, corner + 6 + rng.integers(0, 2, (G, 2)) * 2], 1))
        d = PhraseDetections(gt, K)
        scores = (rng.integers(0, 4, (N, V, K)) / 2).astype(np.float32)  # many exact ties
        scores[rng.random((N, V, K)) < 0.15] = np.nan
        scores[rng.random((N, V, K)) < 0.05] = -np.inf
        for i in range(N):
            corner = rng.integers(0, 3, (V, K, 2)) * 4.0
            d.add_image(i, scores[i], np.concatenate([corner, corner + 6 + rng.integers(0, 2, (V, K, 2)) * 2], -1))
        for mode in MODES:
            got = evaluate_phrase_detection(gt, d, mode).ap
            np.testing.assert_allclose(got, _brute_ap(gt, d, mode), rtol=1e-12, err_msg=f"trial {trial} {mode}")
