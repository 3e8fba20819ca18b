"""Phrase filtering (paper 003, Sec. 6.2 and Table VI): retrieved sentences narrow open-ended detection.

An image-sentence retrieval model ranks the sentences of a training set against each test image;
the tokens of the image's top-N sentences form its set of *allowed tokens*. A test phrase that
shares no token with that set is filtered out of the image: every detection of it there gets the
score -inf. As in the released code (``lib/datasets/imdb.py``, quirk (iii) of docs/EVALUATION.md),
filtered detections **stay in the ranking**: they are entries of their phrase (false positives,
or true positives ranked after every unfiltered entry), so the filter changes the mAP only by
re-ranking. "No detection" (NaN) stays NaN. Localization accuracy is the detector's top-1 box,
which the filter does not change (the released code counts ``labels[0]`` whatever the filter).

Tokens:

* phrase tokens: ``normalize_phrase(phrase).split()`` (test phrases are already normalized, so
  these are the phrase's words: lowercase, punctuation stripped, stop words dropped unless the
  phrase is made of nothing else) -- the released code's ``set(phrase.split())``;
* sentence tokens: :func:`~phrasedet.text.normalize.caption_words` (lowercased, Treebank
  tokenization, punctuation stripped, stop words **kept**), as the released code's
  ``set(line.split())`` of its preprocessed training sentences.

N = 100 in the paper, 75 in the released code (``TEST.SENTENCE_FILTERING``).

The filter is saved as JSON::

    {"top_n": 75, "retrieval_model": {...} or "..." or null,
     "images": {"<image_id>": {"captions": [caption indices, best first], "tokens": [sorted tokens]}}}

This module is pure numpy/Python; :mod:`phrasedet.engine.phrase_filtering` builds a filter with a
trained retrieval model.
"""
import json
import logging
import os
from typing import Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from tabulate import tabulate

from phrasedet.fileio import BadFileError, check_record, load_json_file
from phrasedet.text.normalize import caption_words, normalize_phrase
from phrasedet.text.vocab import BUCKETS

from .detections import PhraseDetections
from .ground_truth import PhraseGroundTruth
from .phrase_detection_ap import evaluate_phrase_detection
from .report import format_results_table

__all__ = ["PhraseFilter", "phrase_tokens", "caption_tokens", "evaluate_with_filter", "filter_metrics",
           "format_filtered_report"]

logger = logging.getLogger(__name__)

# The keys of a filter file and of its images, with their kinds (phrasedet.fileio.KINDS).
_TOP_KINDS = {"top_n": "int", "retrieval_model": "any", "images": "dict"}
_IMAGE_KINDS = {"captions": "list", "tokens": "str_list"}


def phrase_tokens(phrase: str) -> List[str]:
    """Tokens of a test phrase: ``normalize_phrase(phrase).split()``."""
    return normalize_phrase(phrase).split()


def caption_tokens(caption: str) -> List[str]:
    """Tokens of a retrieved sentence: :func:`caption_words` (lowercase, tokenized, punctuation
    stripped, stop words kept; ``[]`` for a sentence without words)."""
    return caption_words(caption)


class _TokenIndex:
    """Inverted index of a vocabulary: token -> int64 array of the phrases containing it."""

    def __init__(self, phrases: Sequence[str]):
        lists: Dict[str, list] = {}
        for j, p in enumerate(phrases):
            for t in set(phrase_tokens(p)):
                lists.setdefault(t, []).append(j)
        self.num_phrases = len(phrases)
        self.index = {t: np.asarray(js) for t, js in lists.items()}  # int64 (numpy 2 ints)

    def keep(self, tokens: Iterable[str]) -> np.ndarray:
        """bool [V]: the phrases sharing at least one token with ``tokens``."""
        keep = np.zeros(self.num_phrases, dtype=bool)
        for t in tokens:
            js = self.index.get(t)
            if js is not None:
                keep[js] = True
        return keep


class PhraseFilter:
    """Per test image, the tokens allowed by its retrieved sentences (see the module docstring).

    Parameters
    ----------
    tokens : mapping image_id -> iterable of str
        The allowed tokens of each image (the union of its retrieved sentences' tokens).
    captions : mapping image_id -> sequence of int, optional
        Indices of the retrieved sentences, best first (for the record; not used to filter).
    top_n : int, optional
        Sentences retrieved per image.
    retrieval_model : JSON value, optional
        A description of the retrieval model (config, weights, sentence database).
    source : str
        Where the filter comes from (its file), named in errors.
    """

    def __init__(self, tokens: Mapping[str, Iterable[str]], captions: Optional[Mapping[str, Sequence[int]]] = None,
                 top_n: Optional[int] = None, retrieval_model=None, source: str = "<phrase filter in memory>"):
        self.tokens = {str(i): frozenset(t) for i, t in tokens.items()}
        captions = {str(i): c for i, c in (captions or {}).items()}
        self.captions = {i: [int(c) for c in captions.get(i, ())] for i in self.tokens}
        self.top_n = None if top_n is None else int(top_n)
        self.retrieval_model = retrieval_model
        self.source = source
        self._index = (None, None)  # (phrase list, its _TokenIndex): built once per vocabulary

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_retrieved(cls, image_ids: Sequence[str], retrieved, sentences: Sequence[str], top_n: int,
                       retrieval_model=None) -> "PhraseFilter":
        """The filter of ranked sentences: ``retrieved[n]`` are the indices (into ``sentences``)
        of image ``image_ids[n]``'s best sentences, best first; the first ``top_n`` are kept.
        Each sentence is tokenized once, when first retrieved."""
        cache: Dict[int, List[str]] = {}
        tokens, captions = {}, {}
        for image_id, row in zip(image_ids, retrieved):
            row = [int(c) for c in list(row)[:top_n]]
            allowed = set()
            for c in row:
                if c not in cache:
                    cache[c] = caption_tokens(sentences[c])
                allowed.update(cache[c])
            tokens[str(image_id)], captions[str(image_id)] = allowed, row
        return cls(tokens, captions, top_n=top_n, retrieval_model=retrieval_model)

    # ------------------------------------------------------------------ queries
    @property
    def image_ids(self) -> List[str]:
        return list(self.tokens)

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, image_id) -> bool:
        return str(image_id) in self.tokens

    def check_images(self, gt: PhraseGroundTruth) -> None:
        """Every image of ``gt`` must have allowed tokens: a missing image is an error naming it
        and the filter's file."""
        missing = [i for i in gt.image_ids if i not in self.tokens]
        if missing:
            more = f" (and {len(missing) - 1} more of the {gt.num_images} test images)" if len(missing) > 1 else ""
            raise ValueError(f"{self.source}: the phrase filter has no entry for test image {missing[0]!r}{more}; "
                             "build it for this test split")

    def _token_index(self, gt: PhraseGroundTruth) -> _TokenIndex:
        phrases, index = self._index
        if phrases is not gt.phrases:
            index = _TokenIndex(gt.phrases)
            self._index = (gt.phrases, index)
        return index

    def keep_masks(self, gt: PhraseGroundTruth) -> Iterator[Tuple[int, np.ndarray]]:
        """``(image index, keep bool [V])`` for every image of ``gt`` in dataset order, one image
        at a time (never an [N, V] matrix); ``keep[v]``: phrase v survives in the image."""
        self.check_images(gt)
        index = self._token_index(gt)
        for i, image_id in enumerate(gt.image_ids):
            yield i, index.keep(self.tokens[image_id])

    def keep_mask(self, gt: PhraseGroundTruth, image_index: int) -> np.ndarray:
        """bool [V]: the phrases of ``gt`` that survive in image ``image_index``."""
        image_id = gt.image_ids[int(image_index)]
        if image_id not in self.tokens:
            raise ValueError(f"{self.source}: the phrase filter has no entry for test image {image_id!r}")
        return self._token_index(gt).keep(self.tokens[image_id])

    def apply(self, dets: PhraseDetections) -> int:
        """Set, in place, the scores of the filtered (image, phrase) pairs to -inf where there is a
        detection (NaN stays NaN). Returns how many (image, phrase) pairs with a detection were
        filtered. Rows of images never added are first set to "no detection"."""
        dets.finalize()
        filtered = 0
        for i, keep in self.keep_masks(dets.gt):
            row = dets.scores[i]  # [V, K] view
            drop = ~keep
            if not drop.any():
                continue
            sub = row[drop]
            has = ~np.isnan(sub)
            sub[has] = -np.inf
            row[drop] = sub
            filtered += int(has.any(axis=1).sum())
        return filtered

    def statistics(self, gt: PhraseGroundTruth, vocabulary=None) -> dict:
        """Fractions (not percent): ``recall`` (ground-truth instances whose phrase survives in
        their image), ``recall_<bucket>`` with a ``vocabulary`` (NaN for a bucket without
        instances), and ``kept`` ((image, phrase) pairs that survive, of N x V)."""
        G, V, N = gt.num_instances, gt.num_phrases, gt.num_images
        kept_instance = np.zeros(G, dtype=bool)
        kept_pairs = 0
        starts = np.searchsorted(gt.gt_image, np.arange(N + 1))  # instances are sorted by image
        for i, keep in self.keep_masks(gt):
            rows = slice(int(starts[i]), int(starts[i + 1]))
            kept_instance[rows] = keep[gt.gt_phrase[rows]]
            kept_pairs += int(keep.sum())
        out = {"recall": float(kept_instance.mean()) if G else float("nan"),
               "kept": float(kept_pairs / (N * V)) if N * V else float("nan")}
        if vocabulary is not None:
            bucket = np.array([vocabulary.bucket(p) for p in gt.phrases])[gt.gt_phrase]
            for b in BUCKETS:
                sel = bucket == b
                out[f"recall_{b}"] = float(kept_instance[sel].mean()) if sel.any() else float("nan")
        return out

    def mean_tokens(self) -> float:
        """The mean number of tokens allowed per image (0 for a filter of no image)."""
        return sum(len(t) for t in self.tokens.values()) / max(1, len(self.tokens))

    def recall(self, gt: PhraseGroundTruth) -> float:
        """Fraction of the ground-truth instances (rows of ``gt_image`` / ``gt_phrase``) whose
        phrase survives the filter in their image (the best recall a filtered detector can reach)."""
        return self.statistics(gt)["recall"]

    # ------------------------------------------------------------------ files
    def to_json(self) -> dict:
        return {"top_n": self.top_n, "retrieval_model": self.retrieval_model,
                "images": {i: {"captions": list(self.captions[i]), "tokens": sorted(t)}
                           for i, t in self.tokens.items()}}

    def save(self, path: str) -> None:
        """Write the JSON file (UTF-8), atomically."""
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.to_json(), f, ensure_ascii=False)
        os.replace(tmp, path)
        self.source = path

    @classmethod
    def load(cls, path: str) -> "PhraseFilter":
        """Read a file written by :meth:`save` (UTF-8; a byte-order mark is removed).

        Raises :class:`~phrasedet.fileio.BadFileError` (a ValueError) naming the file and the
        ``line:column`` of a byte that is not UTF-8 or a JSON syntax error, or the file, the image
        id and the key that is missing or ill-typed.
        """
        data = check_record(load_json_file(path, "phrase filter"), _TOP_KINDS, path)
        if data["top_n"] < 1:
            raise BadFileError(f"{path}: key 'top_n': must be a positive integer, got {data['top_n']!r}")
        if not (data["retrieval_model"] is None or isinstance(data["retrieval_model"], (str, dict))):
            raise BadFileError(f"{path}: key 'retrieval_model': must be an object, a string or null, "
                               f"got {data['retrieval_model']!r}")
        tokens, captions = {}, {}
        for image_id, entry in data["images"].items():
            where = f"{path}: image {image_id!r}"
            c = check_record(entry, _IMAGE_KINDS, where)["captions"]
            if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in c):
                raise BadFileError(f"{where}: key 'captions': must be a list of caption indices (integers >= 0), "
                                   f"got {c!r}")
            tokens[image_id], captions[image_id] = entry["tokens"], c
        return cls(tokens, captions, top_n=data["top_n"], retrieval_model=data["retrieval_model"], source=path)


# ---------------------------------------------------------------------- evaluation with a filter
def filter_metrics(stats: dict, top_n) -> dict:
    """The filter's entries of the filtered metrics, in percent: ``filter_recall``,
    ``filter_recall_<bucket>``, ``filter_kept`` and ``filter_top_n``."""
    out = {"filter_recall": 100.0 * stats["recall"]}
    out.update({f"filter_recall_{b}": 100.0 * stats[f"recall_{b}"] for b in BUCKETS if f"recall_{b}" in stats})
    out["filter_kept"] = 100.0 * stats["kept"]
    out["filter_top_n"] = int(top_n) if top_n is not None else -1
    return out


def evaluate_with_filter(gt: PhraseGroundTruth, dets: PhraseDetections, phrase_filter: PhraseFilter, vocabulary,
                         mode: str = "reference", iou_thresh: float = 0.5):
    """Evaluate ``dets`` unfiltered, then filtered (``dets`` is modified in place, so the scores
    are never copied: ReferIt's matrix is 1.3 GB).

    Returns ``(results, filtered_result, unfiltered_result)`` with ``results`` =
    ``{"phrase_detection": filtered metrics + filter_metrics, "phrase_detection_unfiltered":
    unfiltered metrics}``. The filtered result's localization is the unfiltered one (the filter
    re-ranks; it does not change which box is an image's top-1 for its phrase).
    """
    phrase_filter.check_images(gt)  # before the work: a filter of another split fails at once
    unfiltered = evaluate_phrase_detection(gt, dets, mode=mode, iou_thresh=iou_thresh)
    stats = phrase_filter.statistics(gt, vocabulary)
    num_filtered = phrase_filter.apply(dets)
    logger.info("Phrase filter (%s, top %s sentences): %d (image, phrase) pairs with detections set to -inf; "
                "%.2f%% of the pairs kept, recall of the test instances %.2f%%", phrase_filter.source,
                phrase_filter.top_n, num_filtered, 100.0 * stats["kept"], 100.0 * stats["recall"])
    filtered = evaluate_phrase_detection(gt, dets, mode=mode, iou_thresh=iou_thresh)
    filtered.num_localized = unfiltered.num_localized.copy()
    metrics = filtered.summarize(vocabulary)
    metrics.update(filter_metrics(stats, phrase_filter.top_n))
    results = {"phrase_detection": metrics, "phrase_detection_unfiltered": unfiltered.summarize(vocabulary)}
    return results, filtered, unfiltered


def format_filtered_report(header: str, results: dict) -> str:
    """Both tables of :func:`evaluate_with_filter`'s results (percent) and, per bucket, the mAP
    with and without the filter next to the filter's recall."""
    filtered, unfiltered = results["phrase_detection"], results["phrase_detection_unfiltered"]
    rows = [[b, unfiltered[f"mAP_{b}"], filtered[f"mAP_{b}"], filtered[f"filter_recall_{b}"]]
            for b in BUCKETS]
    rows.append(["all (mean of buckets)", unfiltered["mAP"], filtered["mAP"], filtered["filter_recall"]])
    summary = tabulate(rows, headers=["bucket", "mAP w/o filter", "mAP w/ filter", "filter recall"],
                       tablefmt="pipe", floatfmt=".2f", numalign="right")
    return (f"{header}, without phrase filtering, in %:\n{format_results_table(unfiltered)}\n"
            f"with phrase filtering (top {filtered['filter_top_n']} retrieved sentences per image; "
            f"{filtered['filter_recall']:.2f}% of the test instances keep their phrase, "
            f"{filtered['filter_kept']:.2f}% of the (image, phrase) pairs are kept), in %:\n"
            f"{format_results_table(filtered)}\n"
            f"mAP {unfiltered['mAP']:.2f} -> {filtered['mAP']:.2f} with the filter (filter recall "
            f"{filtered['filter_recall']:.2f}%):\n{summary}")
