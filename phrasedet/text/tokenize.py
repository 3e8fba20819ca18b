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


def tokenize(text: str) -> list[str]:
    """Split ``text`` into word tokens (Penn-Treebank rules, as ``nltk.word_tokenize``)."""
    return _tokenizer().tokenize(text)
