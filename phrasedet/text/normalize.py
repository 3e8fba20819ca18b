"""Phrase normalization as in paper 003's released code (tools/build_vocab.py).

Unicode NFC -> lowercase -> typographic apostrophes to ASCII -> tokenize -> strip punctuation (every Unicode
punctuation character, and the ASCII symbols of ``string.punctuation``) -> drop stop words unless
that empties the phrase -> ``unk`` for an empty phrase. The normalized string is the phrase's
category: it decides training counts, the zero/few/common buckets and which detections are
evaluated together.

Not reproduced: the released code's Norvig spelling correction against its word2vec vocabulary
(it depends on that vocabulary file; see docs/DECISIONS.md).
"""
import os
import string
import unicodedata
from functools import lru_cache
from typing import Iterable, Optional

from phrasedet.fileio import read_text_lines

from .tokenize import tokenize

__all__ = ["UNK", "nfc", "caption_words", "load_stopwords", "normalize_tokens", "normalize_phrase"]

UNK = "unk"
# ASCII punctuation marks that Unicode files under symbols (S*), and the acute accent
_EXTRA_PUNCTUATION = frozenset(string.punctuation + "`´")
# Typographic apostrophes written as the ASCII one before tokenizing, so that "don’t" splits as "don't"
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u02bc": "'"})


class _PunctuationTable(dict):
    """``str.translate`` table deleting every Unicode punctuation character (categories P*: the
    ASCII marks, typographic quotes, dashes, the ellipsis, guillemets ...) and ``_EXTRA_PUNCTUATION``;
    each code point is classified once, on first sight."""

    def __missing__(self, code):
        char = chr(code)
        self[code] = None if unicodedata.category(char).startswith("P") or char in _EXTRA_PUNCTUATION else char
        return self[code]


_PUNCT_TABLE = _PunctuationTable()
_DEFAULT_STOPWORDS = os.path.join(os.path.dirname(__file__), "stopwords.txt")


def nfc(text: str) -> str:
    """``text`` in Unicode normalization form C (composed). The same word can be stored decomposed
    (NFD "pin\u0303ata": ``n`` + a combining tilde, as macOS file systems and some editors write it)
    or composed ("pi\u00f1ata"); they look the same but compare unequal, so a phrase of one form
    would never match a test phrase of the other. Every phrase and caption goes through here:
    :func:`normalize_phrase`, :func:`caption_words` and the readers' caption cleaning."""
    return text if text.isascii() else unicodedata.normalize("NFC", text)


@lru_cache(maxsize=8)
def load_stopwords(path: Optional[str] = None) -> frozenset:
    """Read a stop-word list: one word per line, ``#`` starts a comment. ``None``: the shipped list.
    UTF-8 (a byte-order mark removed; a bad byte is a ``BadFileError`` naming ``path:line:column``)."""
    words = (line.split("#", 1)[0].strip().lower() for line in read_text_lines(path or _DEFAULT_STOPWORDS, "stop-word list"))
    return frozenset(word for word in words if word)


def normalize_tokens(tokens: Iterable[str], stopwords: Optional[frozenset] = None) -> list[str]:
    """Lowercase, strip punctuation and drop stop words from already tokenized text.

    Stop words are kept when removing them would leave nothing ("the one" stays "the one").
    Returns ``[UNK]`` when nothing but punctuation is left.
    """
    stopwords = load_stopwords() if stopwords is None else stopwords
    words = [t.lower().translate(_PUNCT_TABLE) for t in tokens]
    words = [w for w in words if w]
    content = [w for w in words if w not in stopwords]
    return content or words or [UNK]


def normalize_phrase(raw: str, stopwords: Optional[frozenset] = None) -> str:
    """Normalized category string of a raw phrase: ``"Two young, White males"`` -> ``"two young white males"``."""
    return " ".join(normalize_tokens(tokenize(nfc(raw).lower().translate(_APOSTROPHES)), stopwords))


def caption_words(caption: str) -> list[str]:
    """Words of a whole caption for word vectors and sentence encoders: lowercased, tokenized and
    stripped of punctuation as :func:`normalize_phrase`, but stop words kept; ``[]`` when no word
    is left (never ``[UNK]``)."""
    words = normalize_tokens(tokenize(nfc(caption).lower().translate(_APOSTROPHES)), frozenset())
    return [] if words == [UNK] else words
