"""Counts that describe a loaded split: images, boxes, phrase instances, buckets."""
from collections import Counter

from detectron2.data import DatasetCatalog

from phrasedet.text.vocab import BUCKETS, PhraseVocabulary

__all__ = ["split_statistics", "bucket_statistics", "training_vocabulary", "known_words", "unseen_word_statistics"]


def training_vocabulary(dataset_names, thresholds=(0, 100)):
    """:class:`PhraseVocabulary` of ground-truth phrase counts over the given (training) datasets:
    the counts that define the zero/few/common buckets."""
    dicts = [d for name in dataset_names for d in DatasetCatalog.get(name)]
    return PhraseVocabulary.from_dataset_dicts(dicts, thresholds=tuple(thresholds))


def split_statistics(dicts):
    """Counts over dataset dicts (docs/DATA.md).

    Returns:
        dict with ``images``, ``captions``, ``boxes`` (distinct boxes per image, summed),
        ``instances`` (box-target phrase occurrences), ``phrases`` (distinct normalized phrases
        with a box), and ``unboxed_<reason>`` for every reason present.
    """
    stats = Counter(images=len(dicts))
    phrases = set()
    for d in dicts:
        stats["captions"] += len(d.get("captions", ())) - len(d.get("unrelated_captions", ()))
        stats["instances"] += len(d["annotations"])
        stats["boxes"] += len({tuple(b) for a in d["annotations"] for b in a["boxes"]})
        phrases.update(a["phrase"] for a in d["annotations"])
        for u in d.get("unboxed_phrases", ()):
            stats[f"unboxed_{u['reason']}"] += 1
    stats["phrases"] = len(phrases)
    return dict(stats)


def bucket_statistics(dicts, vocabulary):
    """Distinct phrases and instances of ``dicts`` per zero/few/common bucket of ``vocabulary``.

    Returns:
        ``{bucket: {"phrases": int, "instances": int}}`` for every bucket in ``BUCKETS``.
    """
    instances = Counter(a["phrase"] for d in dicts for a in d["annotations"])
    out = {b: {"phrases": 0, "instances": 0} for b in BUCKETS}
    for phrase, n in instances.items():
        bucket = out[vocabulary.bucket(phrase)]
        bucket["phrases"] += 1
        bucket["instances"] += n
    return out


def known_words(training_phrases):
    """The words of the (normalized) training phrases: a zero-shot phrase with any other word has an
    unseen word."""
    return {w for p in training_phrases for w in p.split()}


def unseen_word_statistics(dicts, vocabulary):
    """How many zero-shot phrases of ``dicts`` hold a word that no training phrase holds (a new
    word, as against a new combination of known words), over the words of the normalized phrases
    (the categories; ``vocabulary``'s phrases are the training ones).

    Returns:
        ``{"phrases": zero-shot phrases, "with_unseen_word": of them, "instances": their
        instances, "instances_with_unseen_word": of them, "unseen_words": sorted new words}``.
    """
    known = known_words(vocabulary.phrases())
    instances = Counter(a["phrase"] for d in dicts for a in d["annotations"] if vocabulary.bucket(a["phrase"]) == "zero_shot")
    new = {p: sorted(set(p.split()) - known) for p in instances}
    return {"phrases": len(instances), "with_unseen_word": sum(1 for w in new.values() if w),
            "instances": sum(instances.values()), "instances_with_unseen_word": sum(n for p, n in instances.items() if new[p]),
            "unseen_words": sorted({w for ws in new.values() for w in ws})}
