"""Tokenization that needs no downloaded nltk data.

``nltk.word_tokenize`` first splits sentences with the ``punkt`` model, which must be downloaded;
the Treebank-style word tokenizer underneath it needs nothing, and phrases and captions are
single sentences anyway.
"""
from functools import lru_cache

from nltk.tokenize import NLTKWordTokenizer

__all__ = ["tokenize"]


@lru_cache(maxsize=1)
def _tokenizer() -> NLTKWordTokenizer:
    return NLTKWordTokenizer()


#: Texts whose tokens are remembered. nltk 3.10 runs every regular expression of the tokenizer under
#: a time-out guard (``nltk.redos``): about 0.1-0.2 ms per caption, paid again each time word vectors,
#: vocabularies and sentence encoders read the same captions and phrases. 65,536 entries hold the
#: built-in dataset's texts (about 4,000 captions and their phrases) many times over; on a larger
#: corpus the least recently used texts are forgotten, so memory stays bounded.
CACHED_TEXTS = 1 << 16


@lru_cache(maxsize=CACHED_TEXTS)
def _tokens(text: str) -> tuple:
    return tuple(_tokenizer().tokenize(text))


def tokenize(text: str) -> list[str]:
    """Split ``text`` into word tokens (Penn-Treebank rules, as ``nltk.word_tokenize``); a new list
    each call (the tokens of a recent text are remembered, :data:`CACHED_TEXTS`)."""
    return list(_tokens(text))
