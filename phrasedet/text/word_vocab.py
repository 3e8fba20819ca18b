"""``WordVocabulary``: word -> index for trainable word embeddings (the GRU sentence encoder).

Built from the training captions' words (:func:`~phrasedet.text.caption_words`, the same
tokenization as word2vec's training text), keeping words seen at least ``min_count`` times (VSE++:
4), most frequent first (ties alphabetically), after two reserved entries: index 0 ``<pad>`` and
index 1 ``<unk>`` (every other word). The order is deterministic, so a model rebuilt from the same
training captions gets the same indices; :meth:`fingerprint` identifies the vocabulary in
checkpoints.
"""
import hashlib
import json
from collections import Counter
from typing import Iterable, Sequence

from .normalize import caption_words

__all__ = ["PAD", "UNKNOWN", "WordVocabulary"]

PAD, UNKNOWN = "<pad>", "<unk>"


class WordVocabulary:
    """Indices of words; ``encode`` maps a caption to word indices.

    Args:
        words: the kept words, in index order after ``<pad>`` and ``<unk>``.
    """

    def __init__(self, words: Sequence[str]):
        self.words = [PAD, UNKNOWN] + [w for w in words if w not in (PAD, UNKNOWN)]
        self.index = {w: i for i, w in enumerate(self.words)}
        if len(self.index) != len(self.words):
            raise ValueError("WordVocabulary: duplicate words")

    @classmethod
    def from_captions(cls, captions: Iterable[str], min_count: int = 1) -> "WordVocabulary":
        """Words of ``captions`` seen at least ``min_count`` times, most frequent first."""
        if min_count < 1:
            raise ValueError(f"min_count must be >= 1, got {min_count}")
        counts = Counter(w for c in captions for w in caption_words(c))
        kept = sorted((w for w, n in counts.items() if n >= min_count), key=lambda w: (-counts[w], w))
        return cls(kept)

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.index

    def encode(self, caption: str) -> list:
        """Word indices of a caption (``<unk>`` = 1 for unknown words); ``[]`` for no word."""
        return [self.index.get(w, 1) for w in caption_words(caption)]

    def fingerprint(self) -> str:
        """16 hex digits of the SHA-256 of the word list."""
        return hashlib.sha256(json.dumps(self.words, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]

    def __repr__(self) -> str:
        return f"WordVocabulary({len(self)} entries, fingerprint {self.fingerprint()})"
