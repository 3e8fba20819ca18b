"""The phrase-predictions file: writing (by the evaluator), reading, and evaluating it.

A record is one detection::

    {"image_id": "1000092795", "phrase": "young man", "box": [12.5, 30.0, 140.0, 310.25], "score": 0.91}

``image_id`` (str) names a test image, ``phrase`` is the *normalized* phrase, ``box`` is
``[x1, y1, x2, y2]`` in continuous original-image coordinates, ``score`` a number (``Infinity``
and ``-Infinity`` allowed, NaN not). A (image, phrase) may have several records: they are its
detections k = 0, 1, ... in file order. The file is a JSON list of records, or JSON lines (one
record per line): JSON lines when the name ends in ``.jsonl`` or the first non-blank character
is not ``[``.

Reading is strict: a box must be 4 finite numbers with x2 >= x1 and y2 >= y1, an empty file is an
error, and a phrase that is not a test phrase is first normalized with the project's
``normalize_phrase`` (files written by other code, e.g. MDETR or GLIP, hold raw phrases; the log
says how many were normalized). Records whose phrase is still not a test phrase are ignored and
counted; when more than ``max_ignored_fraction`` (default 0.5) of the records are ignored, reading
fails and says why (the phrases are probably of another dataset or normalization). The file is
UTF-8 (a byte-order mark is removed); every error is a :class:`phrasedet.fileio.BadFileError`
whose message starts with the file (``path:line:column`` for a bad byte or a JSON syntax error).
"""
import json
import logging
import math
import os
from array import array
from typing import Optional, Sequence

import numpy as np

from phrasedet.data.statistics import training_vocabulary
from phrasedet.fileio import (KINDS, BadFileError, check_record, is_number, iter_text_lines, load_json_file,
                              parse_json_line)
from phrasedet.text import normalize_phrase
from .dataset import load_test_split, train_dataset_of
from .detections import PhraseDetections
from .ground_truth import PhraseGroundTruth
from .phrase_detection_ap import evaluate_phrase_detection
from .phrase_filter import PhraseFilter, evaluate_with_filter
from .ppa_ground_truth import augment_ground_truth, build_test_augmenter, evaluate_with_ppa, restrict_detections
from .presence_oracle import presence_oracle_detections

__all__ = ["PredictionWriter", "format_prediction_lines", "iter_prediction_records", "load_predictions",
           "evaluate_predictions_file"]

logger = logging.getLogger(__name__)

# The keys of a record and their kinds (phrasedet.fileio.KINDS); the box is checked by _check_box.
_RECORD_KINDS = {"image_id": "str", "phrase": "str", "box": "any", "score": "number"}
_BOM = b"\xef\xbb\xbf"
_is_finite = KINDS["finite"][0]
# Share of records whose phrase is not a test phrase (after normalization) above which reading fails.
MAX_IGNORED_FRACTION = 0.5


def _json_number(x: float) -> str:
    if math.isfinite(x):
        return "%.9g" % x  # 9 significant digits: float32 values round-trip exactly
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


def format_prediction_lines(image_id: str, phrases_json: Sequence[str], scores: np.ndarray, boxes: np.ndarray) -> list:
    """JSON lines of one image's detections (NaN scores = no detection, not written).

    ``phrases_json[r]`` is the JSON encoding of the phrase of row r; ``scores [P, K]`` and
    ``boxes [P, K, 4]`` are cast to float32 first, so the file holds exactly what the in-loop
    evaluator compares.
    """
    scores = np.asarray(scores, dtype=np.float32)
    boxes = np.asarray(boxes, dtype=np.float32).reshape(scores.shape + (4,))
    r_idx, k_idx = np.nonzero(~np.isnan(scores))
    s = scores[r_idx, k_idx].astype(np.float64)
    b = boxes[r_idx, k_idx].astype(np.float64)
    head = '{"image_id": %s, "phrase": ' % json.dumps(str(image_id))
    if np.isfinite(s).all() and np.isfinite(b).all():
        fmt = head + '%s, "box": [%.9g, %.9g, %.9g, %.9g], "score": %.9g}\n'
        return [fmt % (phrases_json[r], x1, y1, x2, y2, sc)
                for r, (x1, y1, x2, y2), sc in zip(r_idx.tolist(), b.tolist(), s.tolist())]
    fmt = head + '%s, "box": [%s], "score": %s}\n'
    return [fmt % (phrases_json[r], ", ".join(map(_json_number, bb)), _json_number(sc))
            for r, bb, sc in zip(r_idx.tolist(), b.tolist(), s.tolist())]


class PredictionWriter:
    """Writes the records of images, one JSON line per detection, to ``path``."""

    def __init__(self, path: str):
        self.path = path
        self._file = open(path, "w", encoding="utf-8")
        self._phrases = None
        self._phrases_json = None
        self.num_records = 0

    def write(self, image_id: str, phrases: Sequence[str], scores, boxes) -> None:
        """Append the detections of one image (``phrases`` as in the model output contract)."""
        if phrases is not self._phrases:  # the open-vocabulary model passes the same list every time
            self._phrases, self._phrases_json = phrases, [json.dumps(p) for p in phrases]
        lines = format_prediction_lines(image_id, self._phrases_json, scores, boxes)
        self._file.writelines(lines)
        self.num_records += len(lines)

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _first_char(path: str) -> bytes:
    """The first byte of ``path`` that is not JSON whitespace, after a byte-order mark; ``b""`` for
    a blank file."""
    with open(path, "rb") as f:
        if f.read(len(_BOM)) != _BOM:
            f.seek(0)
        for chunk in iter(lambda: f.read(1 << 16), b""):
            chunk = chunk.lstrip(b" \t\r\n")
            if chunk:
                return chunk[:1]
    return b""


def _is_json_lines(path: str) -> bool:
    return path.endswith(".jsonl") or _first_char(path) != b"["


def iter_prediction_records(path: str):
    """Yield ``(where, record)`` for each record of a predictions file, where ``where`` is
    ``"line N"`` (JSON lines, 1-based, blank lines skipped) or ``"record N"`` (JSON list, 1-based).

    The file is UTF-8 (a byte-order mark is removed). A byte that is not UTF-8 or a JSON syntax
    error is a :class:`~phrasedet.fileio.BadFileError` naming ``path:line:column``.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"predictions file {path!r} does not exist")
    if _is_json_lines(path):
        for n, line in enumerate(iter_text_lines(path, "predictions file"), 1):  # streamed: files can be GBs
            if line.strip():
                yield f"line {n}", parse_json_line(line, path, n)
        return
    records = load_json_file(path, "predictions file")
    if not isinstance(records, list):
        raise BadFileError(f"{path}: a JSON predictions file must hold a list of records, got {type(records).__name__}")
    for n, record in enumerate(records, 1):
        yield f"record {n}", record


def _bad(path, where, key, why):
    return BadFileError(f"{path}: {where}: key {key!r}: {why}")


def _check_box(path, where, b) -> None:
    if not (isinstance(b, list) and len(b) == 4 and all(is_number(x) for x in b)):
        raise _bad(path, where, "box", f"must be a list of 4 numbers [x1, y1, x2, y2], got {b!r}")
    if not all(_is_finite(x) for x in b):
        raise _bad(path, where, "box", f"coordinates must be finite, got {b!r}")
    if b[2] < b[0] or b[3] < b[1]:
        raise _bad(path, where, "box", f"x2 < x1 or y2 < y1 in [x1, y1, x2, y2] = {b!r} (an xywh box?)")


def _checked_record(path, where, rec) -> dict:
    """``rec`` with a string ``image_id`` and ``phrase``, a valid ``box`` and a number ``score``."""
    check_record(rec, _RECORD_KINDS, f"{path}: {where}")
    _check_box(path, where, rec["box"])
    return rec


def _phrase_column(phrase: str, phrase_index: dict, normalized: dict):
    """The test-vocabulary index of ``phrase``, normalized with ``normalize_phrase`` when it is
    not a test phrase as written (counted in ``normalized``); None when it is not one either way."""
    j = phrase_index.get(phrase)
    if j is None:
        j = phrase_index.get(normalize_phrase(phrase))
        if j is not None:
            normalized[phrase] = normalized.get(phrase, 0) + 1
    return j


def load_predictions(path: str, gt: PhraseGroundTruth, max_ignored_fraction: float = MAX_IGNORED_FRACTION) -> PhraseDetections:
    """Read a predictions file into :class:`PhraseDetections` over ``gt``.

    Raises :class:`~phrasedet.fileio.BadFileError` (a ValueError) naming the file and the
    ``line:column`` of a byte that is not UTF-8 or a JSON syntax error; the file, the record
    (``line N`` / ``record N``) and the key of a malformed record (a box that is not 4 finite
    numbers with x2 >= x1 and y2 >= y1, included) or of an unknown ``image_id``; an empty file;
    or more than ``max_ignored_fraction`` of the records ignored. Phrases that are not test phrases are normalized first (counted and logged); records
    still outside the test vocabulary are ignored (logged with their count).
    """
    image_index, phrase_index = gt.image_index, gt.phrase_index
    img, phr = array("q"), array("q")
    score, box = array("d"), array("d")
    unknown_phrases, normalized = {}, {}
    n_records = 0
    for where, rec in iter_prediction_records(path):
        n_records += 1
        rec = _checked_record(path, where, rec)
        image_id, phrase, b, s = rec["image_id"], rec["phrase"], rec["box"], rec["score"]
        i = image_index.get(image_id)
        if i is None:
            raise _bad(path, where, "image_id", f"unknown image_id {image_id!r} (not in the test split)")
        j = _phrase_column(phrase, phrase_index, normalized)
        if j is None:
            unknown_phrases[phrase] = unknown_phrases.get(phrase, 0) + 1
            continue
        img.append(i)
        phr.append(j)
        score.append(s)
        box.extend(b)
    if n_records == 0:
        raise BadFileError(f"{path}: the predictions file holds no records")
    if normalized:
        first = next(iter(normalized))
        logger.info("%s: %d records of %d phrases were not normalized and were normalized with normalize_phrase "
                    "(e.g. %r -> %r)", path, sum(normalized.values()), len(normalized), first, normalize_phrase(first))
    if unknown_phrases:
        ignored, example = sum(unknown_phrases.values()), next(iter(unknown_phrases))
        if ignored > max_ignored_fraction * n_records:
            raise BadFileError(f"{path}: {ignored} of {n_records} records ({100.0 * ignored / n_records:.1f} %, more than "
                             f"{100.0 * max_ignored_fraction:.0f} %) name phrases that are not test phrases of this split even "
                             f"after normalization (e.g. {example!r}): predictions of another dataset or split?")
        logger.warning("%s: %d records of %d phrases that are not test phrases were ignored (e.g. %r)",
                       path, ignored, len(unknown_phrases), example)
    img = np.frombuffer(img, dtype=np.int64) if len(img) else np.zeros(0, np.int64)
    phr = np.frombuffer(phr, dtype=np.int64) if len(phr) else np.zeros(0, np.int64)
    key = img * gt.num_phrases + phr
    order = np.argsort(key, kind="stable")  # file order inside an (image, phrase)
    sorted_key = key[order]
    start = np.ones(len(key), dtype=bool)
    start[1:] = sorted_key[1:] != sorted_key[:-1]
    group_first = np.maximum.accumulate(np.where(start, np.arange(len(key)), 0))
    k = np.empty(len(key), dtype=np.int64)
    k[order] = np.arange(len(key)) - group_first
    K = int(k.max()) + 1 if len(k) else 1
    dets = PhraseDetections(gt, K)
    dets.add_records(img, phr, k, np.frombuffer(score, dtype=np.float64) if len(score) else np.zeros(0),
                     np.frombuffer(box, dtype=np.float64).reshape(-1, 4) if len(box) else np.zeros((0, 4)))
    logger.info("%s: %d records, %d images with detections, K=%d", path, n_records, int(dets.filled.sum()), K)
    return dets


def evaluate_predictions_file(path: str, dataset_name: str, mode: str = "reference", iou_thresh: float = 0.5,
                              train_dataset: Optional[str] = None, return_result: bool = False,
                              bucket_thresholds=(0, 100), phrase_filter=None, max_ignored_fraction: float = MAX_IGNORED_FRACTION,
                              ppa: bool = False, ppa_lexicon=None, presence_oracle: bool = False):
    """Evaluate a predictions file on a registered test split, with the in-loop evaluator's core.

    Returns ``{"phrase_detection": metrics}`` (the evaluator's format); with ``return_result``
    also the :class:`PhraseDetectionResult` and the bucket vocabulary, as a tuple.

    ``phrase_filter`` (a :class:`PhraseFilter` or the path of its JSON file) evaluates with phrase
    filtering as the evaluator does: ``{"phrase_detection": filtered metrics (with the filter's
    recall), "phrase_detection_unfiltered": unfiltered metrics}``; the returned result is the
    filtered one. ``max_ignored_fraction``: see :func:`load_predictions`.

    ``ppa`` adds the metrics on the PPA-augmented ground truth (``"phrase_detection_ppa"``, and
    ``"phrase_detection_ppa_unfiltered"`` with a filter), as the evaluator with ``ppa=True``
    (:mod:`.ppa_ground_truth`); ``ppa_lexicon`` replaces WordNet. The returned result stays the
    plain ``"phrase_detection"`` one.

    ``presence_oracle`` adds ``"phrase_detection_presence_oracle"``: the plain ground truth's
    metrics of the detections of phrases present in their image only (:mod:`.presence_oracle`),
    unfiltered.
    """
    train_name = train_dataset_of(dataset_name, train_dataset)
    _, gt = load_test_split(dataset_name)
    if isinstance(phrase_filter, (str, os.PathLike)):
        phrase_filter = PhraseFilter.load(os.fspath(phrase_filter))
    if phrase_filter is not None:
        phrase_filter.check_images(gt)  # before reading the predictions
    ppa_gt = augment_ground_truth(gt, build_test_augmenter(dataset_name, gt, ppa_lexicon))[0] if ppa else None
    dets = load_predictions(path, gt if ppa_gt is None else ppa_gt, max_ignored_fraction)
    vocabulary = training_vocabulary([train_name], bucket_thresholds)
    oracle = None
    if presence_oracle:  # before a filter changes the scores
        plain = dets if ppa_gt is None else restrict_detections(dets, gt)
        oracle = evaluate_phrase_detection(gt, presence_oracle_detections(plain), mode=mode,
                                           iou_thresh=iou_thresh).summarize(vocabulary)
    if ppa_gt is not None:
        results, per_key = evaluate_with_ppa(gt, ppa_gt, dets, vocabulary, mode=mode, iou_thresh=iou_thresh,
                                             phrase_filter=phrase_filter)
        result = per_key["phrase_detection"]
    elif phrase_filter is None:
        result = evaluate_phrase_detection(gt, dets, mode=mode, iou_thresh=iou_thresh)
        results = {"phrase_detection": result.summarize(vocabulary)}
    else:
        results, result, _ = evaluate_with_filter(gt, dets, phrase_filter, vocabulary, mode=mode, iou_thresh=iou_thresh)
    if oracle is not None:
        results["phrase_detection_presence_oracle"] = oracle
    return (results, result, vocabulary) if return_result else results
