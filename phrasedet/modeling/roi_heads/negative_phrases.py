"""Negative phrase augmentation (NPA; QA R-CNN, paper 003 Sec. 3.3.1 and Table IV).

For each training phrase, a table of up to ``TABLE_SIZE`` hard-negative phrases: the training
phrases the current model scores highest on that phrase's ground-truth regions. During training,
ceil(fraction * P) of an image's P phrases each bring one hard negative drawn from their row,
labelled negative on exactly the regions sampled as the source phrase's foreground
(:func:`append_negative_targets`), so the sigmoid loss pushes it down where the model confuses it.

False-negative filters (a hard negative must really be wrong on the source's boxes):

- WordNet parent-child: the phrases' head words (last token) where one is a hypernym of the other
  (transitive closure, any sense): "person" is never a hard negative of "man", nor the reverse.
  Identical head words are kept ("red shirt" vs "blue shirt" are the useful hard negatives);
- co-annotation: phrases annotated on the same object (an identical individual box of one image)
  in at least ``MIN_COOCCURRENCE`` training images.

The table is built by :class:`phrasedet.engine.npa_hook.NegativePhraseHook` from a score matrix.
"""
import itertools
import math
from collections import Counter

import torch

__all__ = [
    "NegativePhraseTable",
    "WordNetHypernyms",
    "append_negative_targets",
    "coannotated_pairs",
    "draw_negatives",
    "head_word",
    "hypernym_pairs",
    "negatives_per_image",
]

NPA_WORDNET_KEY = "MODEL.PHRASE_ROI_HEADS.NPA.WORDNET_FILTER"


def head_word(phrase: str) -> str:
    """The head word of a normalized phrase: its last token ("" for an empty phrase)."""
    words = phrase.split()
    return words[-1] if words else ""


class WordNetHypernyms:
    """``hypernyms(word) -> set[str]``: every lemma (lowercase, spaces for underscores) of every
    hypernym and instance hypernym, transitively, of every sense of ``word``.

    Args:
        wordnet: an nltk ``WordNetCorpusReader``; default nltk's, loaded through
            :class:`~phrasedet.data.ppa.WordNetLexicon` (its install instructions when missing,
            prefixed with the NPA key that asked for it).
    """

    def __init__(self, wordnet=None):
        from phrasedet.data.ppa import WordNetLexicon, WordNetUnavailable

        try:
            self._wn = WordNetLexicon(wordnet)._wn
        except WordNetUnavailable as e:
            raise WordNetUnavailable(f"Negative phrase augmentation's false-negative filter ({NPA_WORDNET_KEY} True; "
                                     f"set it False to train without it) cannot load WordNet: {e}") from e
        self._cache = {}

    def __call__(self, word: str) -> set:
        if word not in self._cache:
            names = set()
            for synset in self._wn.synsets(word):
                for s in synset.closure(lambda x: x.hypernyms() + x.instance_hypernyms()):
                    names.update(n.lower().replace("_", " ") for n in s.lemma_names())
            self._cache[word] = names
        return self._cache[word]


def hypernym_pairs(phrases, hypernyms) -> set:
    """Unordered phrase pairs (frozensets) whose head words are parent and child.

    Args:
        phrases: the vocabulary.
        hypernyms: ``word -> set of its (transitive) hypernyms``, e.g. :class:`WordNetHypernyms`.
    """
    by_head = {}
    for p in phrases:
        by_head.setdefault(head_word(p), []).append(p)
    pairs = set()
    for child, members in by_head.items():
        for parent in hypernyms(child):
            if parent != child and parent in by_head:
                pairs.update(frozenset((a, b)) for a in members for b in by_head[parent])
    return pairs


def coannotated_pairs(dataset_dicts, min_count: int) -> set:
    """Unordered phrase pairs (frozensets) annotated on the same object (an identical individual
    box, ``annotations[*]["boxes"]``, of one image) in at least ``min_count`` images."""
    counts = Counter()
    for d in dataset_dicts:
        by_box = {}
        for a in d.get("annotations", ()):
            for box in a.get("boxes") or [a["bbox"]]:
                by_box.setdefault(tuple(float(x) for x in box), set()).add(a["phrase"])
        pairs = {frozenset(pair) for names in by_box.values() for pair in itertools.combinations(sorted(names), 2)}
        counts.update(pairs)
    return {pair for pair, n in counts.items() if n >= min_count}


class NegativePhraseTable:
    """Hard negatives of each training phrase, hardest first.

    Args:
        rows: ``{phrase: [negative phrases, hardest first]}``.
    """

    def __init__(self, rows):
        self.rows = {p: list(r) for p, r in rows.items()}

    @classmethod
    def from_scores(cls, phrases, vocabulary, scores, table_size: int, excluded=frozenset()):
        """Rank the vocabulary for each phrase.

        Args:
            phrases: list of S source phrases (those with ground-truth regions in the scored images).
            vocabulary: list of V candidate phrases.
            scores: [S, V], how strongly the model scores candidate v on phrase s's ground-truth
                regions (mean logit); higher = harder.
            table_size: at most this many negatives per row.
            excluded: unordered pairs (frozensets) never to pair (the false-negative filters).

        Returns:
            the table; a phrase is never its own negative; ties keep the vocabulary order.
        """
        if scores.shape != (len(phrases), len(vocabulary)):
            raise ValueError(f"scores {tuple(scores.shape)} do not match {len(phrases)} phrases x {len(vocabulary)} candidates")
        order = torch.sort(scores.float(), dim=1, descending=True, stable=True).indices.tolist()
        rows = {}
        for s, ranked in zip(phrases, order):
            row = []
            for v in ranked:
                if len(row) == table_size:
                    break
                cand = vocabulary[v]
                if cand != s and frozenset((s, cand)) not in excluded:
                    row.append(cand)
            rows[s] = row
        return cls(rows)

    def __len__(self):
        return len(self.rows)

    def sample(self, phrase: str, k: int = 1, generator=None, exclude=()) -> list:
        """Up to ``k`` distinct hard negatives of ``phrase``, uniformly among its row (the
        ``TABLE_SIZE`` hardest) minus ``exclude``; [] for a phrase without a row.
        ``generator``: a ``torch.Generator`` (default: torch's global RNG)."""
        options = [n for n in self.rows.get(phrase, ()) if n not in set(exclude)]
        if not options or k <= 0:
            return []
        pick = torch.randperm(len(options), generator=generator)[:k].tolist()
        return [options[i] for i in pick]

    def state_dict(self) -> dict:
        return {"rows": self.rows}

    @classmethod
    def from_state_dict(cls, state) -> "NegativePhraseTable":
        return cls(state["rows"])


def negatives_per_image(num_phrases: int, fraction: float) -> int:
    """Hard negatives appended to an image of P phrases: ceil(fraction * P) (code: ceil(P / 4))."""
    return int(math.ceil(fraction * num_phrases - 1e-9))


def draw_negatives(table: NegativePhraseTable, phrases, fraction: float, generator=None):
    """Choose an image's hard negatives.

    Args:
        phrases: the image's P phrases.

    Returns:
        (sources, negatives): indices into ``phrases`` of the source phrases (random, at most
        ceil(fraction * P); a phrase without a row brings none) and their negatives, one each,
        none of them among ``phrases`` or repeated.
    """
    k = negatives_per_image(len(phrases), fraction)
    taken, sources, negatives = set(phrases), [], []
    for i in torch.randperm(len(phrases), generator=generator).tolist():
        if len(sources) == k:
            break
        drawn = table.sample(phrases[i], 1, generator, exclude=taken)
        if drawn:
            sources.append(i)
            negatives.append(drawn[0])
            taken.add(drawn[0])
    return sources, negatives


def append_negative_targets(iou, sampled, sources, fg_threshold: float):
    """Add the rows of K hard negatives to one image's per-phrase targets.

    Args:
        iou, sampled: [P, R] targets of the image's phrases (``PhraseTargets`` fields).
        sources: K indices into the P phrases: the phrase each negative was drawn for.
        fg_threshold: the foreground IoU.

    Returns:
        iou [P + K, R] (0 on the negatives' rows: every region is a negative of them) and sampled
        [P + K, R]: a negative's row samples exactly its source's sampled foreground regions
        (the released code labels the hard negative -1 on the ground truth's positive boxes).
    """
    src = torch.as_tensor(sources, dtype=torch.long, device=iou.device)
    fg = sampled[src] & (iou[src] >= fg_threshold)
    return torch.cat([iou, iou.new_zeros(fg.shape)]), torch.cat([sampled, fg])
