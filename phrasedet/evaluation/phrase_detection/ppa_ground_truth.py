"""PPA-augmented evaluation (paper 003 Sec. 4.2, Tables III, V and VI; quirk (iv) of docs/EVALUATION.md).

Positive phrase augmentation at test: every ground-truth instance (image, phrase p, box) also
becomes an instance of each PPA phrase of p (:class:`~phrasedet.data.ppa.PositivePhraseAugmenter`
over the test split's own phrases, so every augmented phrase is a test phrase, scored by the
open-vocabulary model), on the same box. mAP (both modes) and localization accuracy are then
computed on the augmented ground truth; an augmented phrase falls in the bucket of its own training
count.

Duplicates: an augmented (image, phrase, box) is added **once**, and not at all when the same
(image, phrase, box) is already annotated (several captions naming the same entity with different
phrases, e.g. "young man" and "man" on one box, would otherwise count one positive twice). The
annotated instances are left as they are (each (caption, phrase) occurrence stays its own instance),
so the plain metrics are unchanged. Skipped duplicates are counted and logged.

The detections are collected over the augmented ground truth (its pairs are a superset of the
plain ones: boxes of augmented pairs are needed) and :func:`restrict_detections` gives the plain
evaluation a view sharing the score matrix.
"""
import logging
from typing import Optional, Tuple

from tabulate import tabulate

from phrasedet.data.ppa import PositivePhraseAugmenter, WordNetLexicon, ppa_style_of
from phrasedet.text.vocab import BUCKETS
from .detections import PhraseDetections
from .ground_truth import PhraseGroundTruth
from .phrase_detection_ap import evaluate_phrase_detection
from .phrase_filter import PhraseFilter, evaluate_with_filter, filter_metrics, format_filtered_report
from .report import format_results_table

__all__ = ["PPA_CONFIG_KEY", "PPA_KEY", "build_test_augmenter", "augment_ground_truth", "restrict_detections",
           "evaluate_with_ppa", "format_ppa_report"]

logger = logging.getLogger(__name__)

# The config key switching PPA evaluation on (named by the missing-WordNet error).
PPA_CONFIG_KEY = "TEST.PHRASE_DETECTION.PPA"
# Suffix of the results keys holding the PPA-augmented metrics ("phrase_detection_ppa", ...).
PPA_KEY = "_ppa"


def build_test_augmenter(dataset_name: str, gt: PhraseGroundTruth, lexicon=None) -> PositivePhraseAugmenter:
    """The augmenter of a test split: candidates among ``gt.phrases``, the split's style
    (:func:`~phrasedet.data.ppa.ppa_style_of`), ``lexicon`` defaulting to WordNet (raises
    :class:`~phrasedet.data.ppa.WordNetUnavailable` naming ``TEST.PHRASE_DETECTION.PPA``)."""
    if lexicon is None:
        lexicon = WordNetLexicon(config_key=PPA_CONFIG_KEY)
    return PositivePhraseAugmenter(gt.phrases, lexicon, style=ppa_style_of(dataset_name))


def augment_ground_truth(gt: PhraseGroundTruth, augmenter) -> Tuple[PhraseGroundTruth, int]:
    """A new ground truth: ``gt``'s instances plus, for each, one instance of every augmented
    phrase ``augmenter(phrase)`` on the same box (see the module docstring for duplicates).

    Returns ``(augmented ground truth, number of skipped duplicates)``. ``gt`` is not modified;
    the result has the same images and vocabulary (an augmented phrase outside it is an error).
    The order is deterministic: annotated instances first inside a pair, then augmented ones in
    the order of their source instances and of the sorted augmented phrases.
    """
    seen = {(int(i), int(j), tuple(b)) for i, j, b in zip(gt.gt_image, gt.gt_phrase, gt.gt_box.tolist())}
    new_image, new_phrase, new_box = [], [], []
    duplicates = 0
    for i, j, b in zip(gt.gt_image.tolist(), gt.gt_phrase.tolist(), gt.gt_box.tolist()):
        for alt in augmenter(gt.phrases[j]):
            a = gt.phrase_index.get(alt)
            if a is None:
                raise ValueError(f"PPA phrase {alt!r} of {gt.phrases[j]!r} is not a test phrase "
                                 "(the augmenter must draw its candidates from the split's phrases)")
            key = (i, a, tuple(b))
            if key in seen:
                duplicates += 1
                continue
            seen.add(key)
            new_image.append(i)
            new_phrase.append(a)
            new_box.append(b)
    augmented = PhraseGroundTruth(gt.image_ids, gt.phrases, gt.gt_image.tolist() + new_image,  # it casts and reshapes
                                  gt.gt_phrase.tolist() + new_phrase, gt.gt_box.tolist() + new_box)
    logger.info("PPA evaluation: %d test instances + %d augmented = %d (%d augmented duplicates of an instance of "
                "the same phrase on the same box skipped); %d -> %d (image, phrase) pairs", gt.num_instances,
                len(new_image), augmented.num_instances, duplicates, gt.num_pairs, augmented.num_pairs)
    return augmented, duplicates


def restrict_detections(dets: PhraseDetections, gt: PhraseGroundTruth) -> PhraseDetections:
    """``dets`` (stored over a ground truth whose pairs include ``gt``'s, same images and
    vocabulary) seen as detections over ``gt``: the score matrix and ``filled`` are shared (not
    copied: changes, e.g. a phrase filter, apply to both), the boxes of ``gt``'s pairs copied."""
    if dets.gt.image_ids != gt.image_ids or dets.gt.phrases != gt.phrases:
        raise ValueError("restrict_detections: the ground truths differ in images or vocabulary")
    pair = dets.gt.find_pairs(gt.pair_image, gt.pair_phrase)
    if (pair < 0).any():
        raise ValueError("restrict_detections: a pair of the ground truth has no stored boxes")
    view = PhraseDetections(gt, dets.k)  # its own score matrix is never touched (np.empty), then replaced
    view.scores, view.filled = dets.scores, dets.filled
    view.pair_boxes = dets.pair_boxes[pair]
    return view


def evaluate_with_ppa(gt: PhraseGroundTruth, ppa_gt: PhraseGroundTruth, dets: PhraseDetections, vocabulary,
                      mode: str = "reference", iou_thresh: float = 0.5, phrase_filter: Optional[PhraseFilter] = None):
    """Evaluate ``dets`` (stored over ``ppa_gt``) on the plain and on the augmented ground truth.

    Returns ``(results, per_key)``: ``results`` = ``{"phrase_detection": plain metrics,
    "phrase_detection_ppa": augmented metrics}`` and ``per_key`` the
    :class:`PhraseDetectionResult` of each key. With a ``phrase_filter`` (applied once, in place,
    to the shared scores) both are the filtered ones, with the filter's metrics (its recall over
    the augmented instances for the PPA key), and ``"phrase_detection_unfiltered"`` /
    ``"phrase_detection_ppa_unfiltered"`` hold the unfiltered ones.
    """
    plain_dets = restrict_detections(dets, gt)
    if phrase_filter is None:
        per_key = {"phrase_detection": evaluate_phrase_detection(gt, plain_dets, mode=mode, iou_thresh=iou_thresh),
                   "phrase_detection_ppa": evaluate_phrase_detection(ppa_gt, dets, mode=mode, iou_thresh=iou_thresh)}
        return {k: r.summarize(vocabulary) for k, r in per_key.items()}, per_key
    ppa_unfiltered = evaluate_phrase_detection(ppa_gt, dets, mode=mode, iou_thresh=iou_thresh)  # before filtering
    results, plain, unfiltered = evaluate_with_filter(gt, plain_dets, phrase_filter, vocabulary, mode=mode,
                                                      iou_thresh=iou_thresh)  # filters the shared scores
    ppa = evaluate_phrase_detection(ppa_gt, dets, mode=mode, iou_thresh=iou_thresh)
    ppa.num_localized = ppa_unfiltered.num_localized.copy()  # the filter re-ranks, localization is unfiltered
    metrics = ppa.summarize(vocabulary)
    metrics.update(filter_metrics(phrase_filter.statistics(ppa_gt, vocabulary), phrase_filter.top_n))
    results["phrase_detection_ppa"] = metrics
    results["phrase_detection_ppa_unfiltered"] = ppa_unfiltered.summarize(vocabulary)
    per_key = {"phrase_detection": plain, "phrase_detection_unfiltered": unfiltered, "phrase_detection_ppa": ppa,
               "phrase_detection_ppa_unfiltered": ppa_unfiltered}
    return results, per_key


def _occurrences_table(plain: dict, ppa: dict) -> str:
    """The paper's footer: #test occurrences (instances) per bucket without and with PPA, and the
    mAPs next to them."""
    rows = []
    for label, m in (("without PPA", plain), ("with PPA", ppa)):
        counts = [m[f"num_instances_{b}"] for b in BUCKETS]
        rows.append([label] + [f"{n:,}" for n in counts + [sum(counts)]]
                    + ["%.2f" % m[f"mAP_{b}"] for b in BUCKETS] + ["%.2f" % m["mAP"]])
    headers = ["test GT"] + [f"#occ. {b}" for b in BUCKETS] + ["#occ. total"] + [f"mAP {b}" for b in BUCKETS] + ["mAP"]
    return tabulate(rows, headers=headers, tablefmt="pipe", disable_numparse=True,
                    colalign=("left",) + ("right",) * (len(headers) - 1))


def format_ppa_report(header: str, results: dict) -> str:
    """The tables of :func:`evaluate_with_ppa`'s results: plain, PPA-augmented (each filtered and
    unfiltered when a filter was used) and the per-bucket occurrences without and with PPA."""
    ppa_results = {k.replace(PPA_KEY, ""): v for k, v in results.items() if PPA_KEY in k}
    if "phrase_detection_unfiltered" in results:
        plain_text = format_filtered_report(header, results)
        ppa_text = format_filtered_report(f"{header}, PPA-augmented ground truth", ppa_results)
    else:
        plain_text = f"{header}, in %:\n{format_results_table(results['phrase_detection'])}"
        ppa_text = (f"{header}, PPA-augmented ground truth ({PPA_CONFIG_KEY}), in %:\n"
                    f"{format_results_table(ppa_results['phrase_detection'])}")
    footer = _occurrences_table(results["phrase_detection"], results["phrase_detection_ppa"])
    return f"{plain_text}\n{ppa_text}\nTest occurrences per bucket (paper 003 Tables IV/V footers), mAP in %:\n{footer}"
