"""Phrase normalization examples (the normalized string is the phrase's category)."""
import os

import pytest

from phrasedet.text import UNK, normalize_phrase
from phrasedet.text.normalize import nfc


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("Two young , White males", "two young white males"),  # lowercase, punctuation dropped
        ("the yard", "yard"),  # stop word dropped
        ("the one", "the one"),  # all stop words: kept rather than emptied
        ("...", UNK),
        ("", UNK),
    ],
)
def test_normalize_phrase_examples(raw, expected):
    assert normalize_phrase(raw) == expected


def test_raw_phrase_is_kept_by_callers_and_normalization_is_idempotent():
    raw = "A Dog's ball"
    annotation = {"phrase_raw": raw, "phrase": normalize_phrase(raw)}  # as the dataset loaders store it
    assert annotation == {"phrase_raw": "A Dog's ball", "phrase": "dog ball"}  # "'s" is a stop word
    for phrase in ("two young white males", "yard", "the one", UNK):
        assert normalize_phrase(phrase) == phrase


def test_nfc_composes_a_decomposed_word_and_keeps_ascii():
    """'pin' + combining tilde + 'ata' (NFD, as macOS writes it) becomes the one-character ñ."""
    assert nfc("pin\u0303ata") == "pi\u00f1ata" and len(nfc("pin\u0303ata")) == 6
    assert nfc("plain ascii") == "plain ascii"
    assert normalize_phrase("A pin\u0303ata") == normalize_phrase("a pi\u00f1ata") == "pi\u00f1ata"


def test_remembered_tokens_equal_nltk_s_on_every_built_in_caption_and_a_caller_cannot_change_them(builtin_root):
    """tokenize remembers the tokens of recent texts (nltk 3.10's guarded regular expressions are
    slow): on every caption of the built-in dataset, read twice, it gives what a fresh nltk
    tokenizer gives, and a list a caller changes is its own copy."""
    import glob
    import re

    from nltk.tokenize import NLTKWordTokenizer

    from phrasedet.text.tokenize import _tokens, tokenize

    lines = []
    for path in sorted(glob.glob(os.path.join(builtin_root, "flickr30k_entities", "Sentences", "*.txt"))):
        with open(path, encoding="utf-8") as f:
            lines += [re.sub(r"\[/EN#\d+/\S+ ([^\]]*)\]", r"\1", line.strip()) for line in f]
    assert len(lines) > 4000
    fresh = NLTKWordTokenizer()
    _tokens.cache_clear()
    for _ in range(2):
        assert [tokenize(line) for line in lines] == [fresh.tokenize(line) for line in lines]
    assert _tokens.cache_info().hits >= len(lines)
    words = tokenize(lines[0])
    words.append("changed")
    assert tokenize(lines[0]) == fresh.tokenize(lines[0])
