"""Phrase detection mAP and phrase localization accuracy (paper 003, Sec. 5-6), pure numpy.

Definitions (docs/EVALUATION.md has the full text):

* **Entries.** For each phrase p, every image contributes its K detections of p (those with a
  non-NaN score). In ``reference`` mode (the released code) an image with m >= 1 instances of p
  contributes its detections m times, copy c labelled against instance c; otherwise once.
* **Labels.** ``reference``: per instance, among the K detections whose box has IoU >= thr with
  the instance's box, the highest-scored one (equal scores: smaller k) is a true positive, the rest
  and every other entry false positives. ``standard`` (VOC): in descending score order each
  detection takes the instance of maximum IoU in its image (equal IoU: first in annotation order);
  it is a true positive if that IoU >= thr and the instance is still free, else a false positive.
* **Ranking.** Entries of a phrase are ranked by score, descending; equal scores are ordered by
  (image index in dataset order, copy, k), ascending. The rank of an entry is computed by
  counting the entries before it, never by sorting a phrase's entries.
* **AP** (non-interpolated) = (1 / N_gt) * sum over true-positive ranks r of precision@r, with N_gt
  the number of test instances of the phrase; phrases without test instances are skipped.
* **Localization accuracy**: an instance is localized when the top-1 detection of its phrase in
  its image (highest score, equal scores: smaller k) has IoU >= thr with its box.
"""
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from phrasedet.text.vocab import BUCKETS, PhraseVocabulary
from .box_iou import paired_iou
from .detections import PhraseDetections
from .ground_truth import PhraseGroundTruth

__all__ = ["MODES", "PhraseDetectionResult", "evaluate_phrase_detection", "match_detections",
           "rank_true_positives", "localization_success"]

MODES = ("reference", "standard")

# Budget (elements) of the temporaries of the ranking: a block of phrase columns and the
# comparison matrix of a chunk of true positives against them.
_BLOCK_ELEMENTS = 8_000_000
_COMPARE_ELEMENTS = 4_000_000


@dataclass
class TruePositives:
    """True-positive entries: ground-truth pair, copy index and detection index k of each."""
    pair: np.ndarray
    copy: np.ndarray
    k: np.ndarray


def _pair_order(pair_scores: np.ndarray):
    """Order of the K detections of each pair (score descending, equal scores by k, NaN last) and
    the position of each k in that order."""
    order = np.argsort(-pair_scores, axis=1, kind="stable")
    position = np.empty_like(order)
    np.put_along_axis(position, order, np.arange(order.shape[1])[None, :].repeat(len(order), 0), axis=1)
    return order, position


def _check_iou_thresh(name: str, value: float) -> None:
    """An IoU threshold must lie in [0, 1] (an IoU does): ValueError naming it otherwise."""
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value!r}")


def match_detections(gt: PhraseGroundTruth, dets: PhraseDetections, mode: str = "reference",
                     iou_thresh: float = 0.5) -> TruePositives:
    """Label the entries of ground-truth pairs; return the true positives (all other entries,
    including every entry of an image without the phrase, are false positives)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    _check_iou_thresh("iou_thresh", iou_thresh)
    K = dets.k
    pair_scores = dets.scores[gt.pair_image, gt.pair_phrase]  # [M, K]
    valid = ~np.isnan(pair_scores)
    order, position = _pair_order(pair_scores)
    G = gt.num_instances
    if G == 0:
        empty = np.zeros(0, np.int64)
        return TruePositives(empty, empty, empty)
    q = gt.gt_pair
    if mode == "reference":
        iou = paired_iou(dets.pair_boxes[q], gt.gt_box[:, None, :])  # [G, K]
        hit = valid[q] & (iou >= iou_thresh)
        first = np.where(hit, position[q], K).min(axis=1)
        tp = first < K
        return TruePositives(q[tp], gt.gt_copy[tp], order[q[tp], first[tp]])

    matched = np.zeros(G, dtype=bool)
    tp_pair, tp_k = [], []
    starts = gt.pair_first_gt
    g_index = np.arange(G)
    for j in range(K):  # the j-th best detection of every pair at once
        k_j = order[:, j]
        det_box = dets.pair_boxes[np.arange(gt.num_pairs), k_j]  # [M, 4]
        iou = paired_iou(det_box[q], gt.gt_box)  # [G]
        iou = np.where(np.isnan(iou), -1.0, iou)
        best = np.maximum.reduceat(iou, starts)  # [M]
        first_best = np.minimum.reduceat(np.where(iou == best[q], g_index, G), starts)
        is_tp = valid[np.arange(gt.num_pairs), k_j] & (best >= iou_thresh)
        is_tp &= ~matched[first_best]  # < G: every pair's best IoU is one of its instances' (NaN became -1)
        matched[first_best[is_tp]] = True
        tp_pair.append(np.flatnonzero(is_tp))
        tp_k.append(k_j[is_tp])
    tp_pair = np.concatenate(tp_pair)
    return TruePositives(tp_pair, np.zeros_like(tp_pair), np.concatenate(tp_k))


def _count_before_dense(scores: np.ndarray, phrase: np.ndarray, image: np.ndarray, score: np.ndarray) -> np.ndarray:
    """For each true positive (phrase, image, score), the number of (image', k') detections of the
    phrase with a higher score, or an equal score in an image' < image, each counted once.

    Reads ``scores [N, V, K]`` by blocks of phrase columns (transposed into a small contiguous
    copy), compares each true positive with its phrase's N*K scores; no per-phrase sort.
    ``phrase`` must be sorted.
    """
    N, V, K = scores.shape
    NK = N * K
    out = np.zeros(len(phrase), dtype=np.int64)
    if len(phrase) == 0 or NK == 0:
        return out
    block = max(1, _BLOCK_ELEMENTS // NK)
    chunk = max(1, _COMPARE_ELEMENTS // NK)
    position = np.arange(NK, dtype=np.int64)
    for p0 in range(int(phrase[0]) - int(phrase[0]) % block, int(phrase[-1]) + 1, block):
        p1 = min(p0 + block, V)
        lo, hi = np.searchsorted(phrase, [p0, p1])
        if lo == hi:
            continue
        columns = np.ascontiguousarray(scores[:, p0:p1, :].transpose(1, 0, 2)).reshape(p1 - p0, NK)
        for a in range(lo, hi, chunk):
            b = min(a + chunk, hi)
            rows = columns[phrase[a:b] - p0]  # [T, NK]
            s = score[a:b, None]
            higher = np.count_nonzero(rows > s, axis=1)
            equal = rows == s
            n_equal = np.count_nonzero(equal, axis=1)
            # equal scores in the true positive's own image are counted by the caller
            own = np.count_nonzero(equal[np.arange(b - a)[:, None], image[a:b, None] * K + np.arange(K)], axis=1)
            tied = np.flatnonzero(n_equal > own)
            if len(tied):  # equal scores in other images: only those in earlier images count
                limit = image[a:b][tied, None] * K
                higher[tied] += np.count_nonzero(equal[tied] & (position[None, :] < limit), axis=1)
            out[a:b] = higher
    return out


def rank_true_positives(gt: PhraseGroundTruth, dets: PhraseDetections, tps: TruePositives,
                        mode: str = "reference") -> np.ndarray:
    """1-based rank of each true positive among all entries of its phrase (see module docstring).

    rank = 1 + (entries with a higher score) + (entries with an equal score and a smaller
    (image, copy, k) key). With the dense count D of :func:`_count_before_dense` (one copy per
    image), extra copies are added from the few pairs with m > 1 instances (reference mode only):
    another pair q of the phrase adds (m_q - 1) * #{k': s_q > s, or s_q == s and image_q < image};
    the true positive's own pair adds (m - 1) * #{k': s > s_e} + c * #{k': s == s_e}
    + #{k' < k: s == s_e}.
    """
    K = dets.k
    pair_scores = dets.scores[gt.pair_image, gt.pair_phrase]  # [M, K]
    phrase = gt.pair_phrase[tps.pair]
    image = gt.pair_image[tps.pair]
    score = pair_scores[tps.pair, tps.k]
    order = np.argsort(phrase, kind="stable")
    ranks = np.empty(len(order), dtype=np.int64)
    dense = _count_before_dense(dets.scores, phrase[order], image[order], score[order])
    ranks[order] = dense

    extra = (gt.pair_num_gt - 1) if mode == "reference" else np.zeros(gt.num_pairs, np.int64)
    own_scores = pair_scores[tps.pair]  # [T, K]
    higher_own = np.count_nonzero(own_scores > score[:, None], axis=1)
    equal_own = own_scores == score[:, None]
    # tps.copy is 0 for every standard-mode true positive (match_detections)
    ranks += extra[tps.pair] * higher_own + tps.copy * np.count_nonzero(equal_own, axis=1)
    ranks += np.count_nonzero(equal_own & (np.arange(K)[None, :] < tps.k[:, None]), axis=1)

    multi = np.flatnonzero(extra > 0)  # pairs with several instances (reference mode)
    multi = multi[np.argsort(gt.pair_phrase[multi], kind="stable")]
    multi_phrase = gt.pair_phrase[multi]
    lo = np.searchsorted(multi_phrase, phrase, side="left")
    hi = np.searchsorted(multi_phrase, phrase, side="right")
    counts = hi - lo
    step = max(1, _COMPARE_ELEMENTS // max(1, K))
    tp_of = np.repeat(np.arange(len(phrase)), counts)
    offsets = np.arange(len(tp_of)) - np.repeat(np.cumsum(counts) - counts, counts)
    other = multi[np.repeat(lo, counts) + offsets]  # [C] pairs of the same phrase
    for a in range(0, len(tp_of), step):
        t, q = tp_of[a:a + step], other[a:a + step]
        keep = q != tps.pair[t]
        t, q = t[keep], q[keep]
        s = score[t, None]
        before = (pair_scores[q] > s) | ((pair_scores[q] == s) & (gt.pair_image[q] < image[t])[:, None])
        weights = extra[q] * np.count_nonzero(before, axis=1)
        ranks += np.bincount(t, weights=weights, minlength=len(ranks)).astype(np.int64)
    return ranks + 1


def localization_success(gt: PhraseGroundTruth, dets: PhraseDetections, iou_thresh: float = 0.5) -> np.ndarray:
    """bool [G]: the top-1 detection of the instance's phrase in its image (highest score, equal
    scores: smaller k) has IoU >= ``iou_thresh`` with the instance's box."""
    _check_iou_thresh("the localization IoU threshold", iou_thresh)
    if gt.num_instances == 0:
        return np.zeros(0, dtype=bool)
    pair_scores = dets.scores[gt.pair_image, gt.pair_phrase]
    order, _ = _pair_order(pair_scores)
    top = order[:, 0]
    pairs = np.arange(gt.num_pairs)
    valid = ~np.isnan(pair_scores[pairs, top])
    top_box = dets.pair_boxes[pairs, top]
    iou = paired_iou(top_box[gt.gt_pair], gt.gt_box)
    return valid[gt.gt_pair] & (iou >= iou_thresh)


@dataclass
class PhraseDetectionResult:
    """Per-phrase outcome of :func:`evaluate_phrase_detection` (fractions, not percentages).

    Attributes
    ----------
    phrases : list of str [V]
    num_gt : int64 [V]        test instances of each phrase
    num_tp : int64 [V]        true-positive entries
    ap : float64 [V]          average precision in [0, 1]; NaN where ``num_gt == 0`` (skipped)
    num_localized : int64 [V] instances localized by the top-1 detection
    mode : str
    iou_thresh : float
    """
    phrases: List[str]
    num_gt: np.ndarray
    num_tp: np.ndarray
    ap: np.ndarray
    num_localized: np.ndarray
    mode: str
    iou_thresh: float

    def buckets(self, vocabulary: PhraseVocabulary) -> List[str]:
        """Bucket of each phrase from its *training* count."""
        return [vocabulary.bucket(p) for p in self.phrases]

    def summarize(self, vocabulary: PhraseVocabulary) -> dict:
        """Detectron2-style metrics, in percent.

        ``mAP_<bucket>``: mean AP over the bucket's phrases with test instances (NaN if none);
        ``mAP``: mean of the bucket mAPs over the non-empty buckets (the paper's "mean" column);
        ``loc_acc`` / ``loc_acc_<bucket>``: localized instances / instances;
        ``num_phrases_<bucket>``, ``num_instances_<bucket>``: evaluated phrases and test instances.
        """
        bucket = np.array(self.buckets(vocabulary))
        evaluated = self.num_gt > 0
        out = {"mAP": float("nan")}
        bucket_maps = []
        for b in BUCKETS:
            sel = evaluated & (bucket == b)
            out[f"mAP_{b}"] = float(100.0 * self.ap[sel].mean()) if sel.any() else float("nan")
            if sel.any():
                bucket_maps.append(out[f"mAP_{b}"])
        if bucket_maps:
            out["mAP"] = float(np.mean(bucket_maps))
        total = int(self.num_gt.sum())
        out["loc_acc"] = float(100.0 * self.num_localized.sum() / total) if total else float("nan")
        for b in BUCKETS:
            sel = bucket == b
            n = int(self.num_gt[sel].sum())
            out[f"loc_acc_{b}"] = float(100.0 * self.num_localized[sel].sum() / n) if n else float("nan")
        for b in BUCKETS:
            out[f"num_phrases_{b}"] = int((evaluated & (bucket == b)).sum())
        for b in BUCKETS:
            out[f"num_instances_{b}"] = int(self.num_gt[bucket == b].sum())
        return out

    def per_phrase(self, vocabulary: PhraseVocabulary) -> List[dict]:
        """One record per evaluated phrase: phrase, bucket, train_count, num_gt, num_tp, ap (%),
        loc_acc (%)."""
        records = []
        for j in np.flatnonzero(self.num_gt > 0):
            p = self.phrases[j]
            records.append({
                "phrase": p, "bucket": vocabulary.bucket(p), "train_count": int(vocabulary.count(p)),
                "num_gt": int(self.num_gt[j]), "num_tp": int(self.num_tp[j]), "ap": float(100.0 * self.ap[j]),
                "loc_acc": float(100.0 * self.num_localized[j] / self.num_gt[j]),
            })
        return records


def evaluate_phrase_detection(gt: PhraseGroundTruth, dets: PhraseDetections, mode: str = "reference",
                              iou_thresh: float = 0.5, loc_iou_thresh: Optional[float] = None) -> PhraseDetectionResult:
    """Per-phrase AP and localization of the detections ``dets`` on the test split ``gt``.

    Parameters
    ----------
    gt : PhraseGroundTruth
    dets : PhraseDetections
        Rows of images never added count as "no detection" (:meth:`PhraseDetections.finalize`
        is called here).
    mode : "reference" or "standard"
        How entries are labelled (module docstring).
    iou_thresh : float
        IoU for a true positive (>=), in [0, 1] (ValueError otherwise).
    loc_iou_thresh : float, optional
        IoU for a localized instance, in [0, 1]; defaults to ``iou_thresh``.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if dets.gt is not gt:
        raise ValueError("the detections were stored for another ground truth")
    dets.finalize()
    V = gt.num_phrases
    tps = match_detections(gt, dets, mode, iou_thresh)
    ranks = rank_true_positives(gt, dets, tps, mode)
    phrase = gt.pair_phrase[tps.pair]
    order = np.lexsort((ranks, phrase))
    phrase, ranks = phrase[order], ranks[order]
    num_tp = np.bincount(phrase, minlength=V)  # int64
    first = np.cumsum(num_tp) - num_tp
    j = np.arange(1, len(phrase) + 1) - first[phrase]  # 1-based index among the phrase's TPs
    precision_sum = np.bincount(phrase, weights=j / ranks, minlength=V)
    ap = np.where(gt.num_gt > 0, precision_sum / np.maximum(gt.num_gt, 1), np.nan)
    loc = localization_success(gt, dets, iou_thresh if loc_iou_thresh is None else loc_iou_thresh)
    num_localized = np.bincount(gt.gt_phrase[loc], minlength=V)  # int64
    return PhraseDetectionResult(list(gt.phrases), gt.num_gt.copy(), num_tp, ap, num_localized, mode, float(iou_thresh))
