"""Training-set phrase vocabulary: instance counts of normalized phrases and their frequency buckets.

Phrase-detection mAP (paper 003) is reported per bucket of the *training* instance count of a
normalized phrase: ``zero_shot`` (0), ``few_shot`` (1..100) and ``common`` (>100). A phrase falls
into the first bucket whose threshold ``t`` satisfies ``count <= t``; a count of exactly 100 is
therefore few-shot.
"""
import json
import os
from collections import Counter
from typing import Iterable, Mapping, Optional, Sequence

from phrasedet.fileio import BadFileError, check_record, load_json_file

__all__ = ["BUCKETS", "DEFAULT_THRESHOLDS", "bucket_of_count", "PhraseVocabulary"]

BUCKETS = ("zero_shot", "few_shot", "common")
DEFAULT_THRESHOLDS = (0, 100)


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _check_thresholds(thresholds: Sequence[int]) -> tuple:
    """Validate bucket thresholds: one fewer than ``BUCKETS``, strictly increasing."""
    thresholds = tuple(int(t) for t in thresholds)
    if len(thresholds) != len(BUCKETS) - 1:
        raise ValueError(f"need {len(BUCKETS) - 1} thresholds for buckets {BUCKETS}, got {thresholds}")
    if any(a >= b for a, b in zip(thresholds, thresholds[1:])):
        raise ValueError(f"bucket thresholds must be strictly increasing, got {thresholds}")
    return thresholds


def bucket_of_count(count: int, thresholds: Sequence[int] = DEFAULT_THRESHOLDS) -> str:
    """Bucket name of a training instance count.

    Parameters
    ----------
    count : int
        Number of training ground-truth instances of a phrase (>= 0).
    thresholds : sequence of int, length ``len(BUCKETS) - 1``
        Inclusive upper bounds of all buckets but the last.

    Returns
    -------
    str
        ``BUCKETS[i]`` for the first ``i`` with ``count <= thresholds[i]``, else ``BUCKETS[-1]``.
    """
    if count < 0:
        raise ValueError(f"instance count must be >= 0, got {count}")
    for name, upper in zip(BUCKETS, _check_thresholds(thresholds)):
        if count <= upper:
            return name
    return BUCKETS[-1]


class PhraseVocabulary:
    """Training instance counts of normalized phrases, with bucket thresholds.

    Parameters
    ----------
    counts : mapping str -> int, optional
        Instance count of each normalized phrase.
    thresholds : sequence of int
        Bucket thresholds, see :func:`bucket_of_count`.
    """

    def __init__(self, counts: Optional[Mapping[str, int]] = None,
                 thresholds: Sequence[int] = DEFAULT_THRESHOLDS):
        self.counts = Counter(counts or {})
        self.thresholds = _check_thresholds(thresholds)

    @classmethod
    def from_dataset_dicts(cls, dicts: Iterable[dict],
                           thresholds: Sequence[int] = DEFAULT_THRESHOLDS) -> "PhraseVocabulary":
        """Count the ``phrase`` of every ground-truth annotation (``d["annotations"]``) of the records.

        Only box-target annotations count (not ``unboxed_phrases``, not captions): these are the
        instances the detector is trained on. Pass the training split only.
        """
        counts = Counter(ann["phrase"] for d in dicts for ann in d.get("annotations", ()))
        return cls(counts, thresholds)

    @property
    def total(self) -> int:
        """Number of instances of all phrases together."""
        return sum(self.counts.values())

    def count(self, phrase: str) -> int:
        """Training instance count of ``phrase`` (0 when unseen)."""
        return self.counts.get(phrase, 0)

    def bucket(self, phrase: str) -> str:
        """Bucket (one of ``BUCKETS``) of ``phrase`` by its training count."""
        return bucket_of_count(self.count(phrase), self.thresholds)

    def bucket_counts(self, phrases: Iterable[str]) -> dict:
        """Number of *distinct* phrases of ``phrases`` in each bucket (every bucket present, maybe 0)."""
        result = dict.fromkeys(BUCKETS, 0)
        for phrase in set(phrases):
            result[self.bucket(phrase)] += 1
        return result

    def phrases(self) -> list:
        """Phrases with a positive count, sorted."""
        return sorted(p for p, c in self.counts.items() if c > 0)

    def frequencies(self) -> dict:
        """Share of all training instances of each phrase (``count / total``, as in inverse
        frequency sampling); keys in :meth:`phrases` order, empty when there are no instances."""
        total = self.total
        return {p: self.counts[p] / total for p in self.phrases()} if total else {}

    def __len__(self) -> int:
        return sum(1 for c in self.counts.values() if c > 0)

    def __contains__(self, phrase: str) -> bool:
        return self.count(phrase) > 0

    def __eq__(self, other) -> bool:
        if not isinstance(other, PhraseVocabulary):
            return NotImplemented
        return self.thresholds == other.thresholds and +self.counts == +other.counts

    def __repr__(self) -> str:
        return (f"PhraseVocabulary({len(self)} phrases, {self.total} instances, "
                f"thresholds={self.thresholds})")

    def to_json(self, path: str) -> None:
        """Write ``{"thresholds": [...], "counts": {phrase: count}}`` (phrases sorted) to ``path``."""
        data = {"thresholds": list(self.thresholds),
                "counts": {p: self.counts[p] for p in self.phrases()}}
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=1)

    @classmethod
    def from_json(cls, path: str) -> "PhraseVocabulary":
        """Read a vocabulary written by :meth:`to_json` (UTF-8; a byte-order mark is removed).

        Raises
        ------
        phrasedet.fileio.BadFileError
            Naming the file and the JSON syntax error's line and column, or the missing or
            ill-typed key (``counts`` must map phrases to integers >= 0, ``thresholds`` must be
            valid bucket thresholds).
        """
        data = check_record(load_json_file(path, "phrase vocabulary file"),
                            {"thresholds": "list", "counts": "dict"}, path)
        for phrase, count in data["counts"].items():
            if not (_is_int(count) and count >= 0):
                raise BadFileError(f"{path}: key 'counts': phrase {phrase!r}: the count must be an integer >= 0, "
                                   f"got {count!r}")
        thresholds = data["thresholds"]
        try:
            if not all(_is_int(t) for t in thresholds):
                raise ValueError(f"thresholds must be integers, got {thresholds!r}")
            return cls(data["counts"], thresholds)
        except ValueError as e:
            raise BadFileError(f"{path}: key 'thresholds': {e}") from None
