"""Fuzz tests (tests/fuzz.py) of the text pipeline's other files: a damaged phrase vocabulary
JSON fails with a BadFileError naming the file; a damaged encoded-vocabulary cache is ignored
(logged) and the phrases are encoded again."""
import json
import os
import tempfile

import numpy as np
import pytest
from gensim.models import KeyedVectors
from hypothesis import given

from phrasedet.fileio import BadFileError
from phrasedet.text import EncodedVocabulary, MeanPoolEncoder, PhraseVocabulary
from phrasedet.text.normalize import load_stopwords
from tests.fuzz import check_reader, damaged_bytes, damaged_json, fuzz_settings, write_file
from tests.fuzz_npz import damaged_npz

VOCABULARY = {"thresholds": [0, 100], "counts": {"dog": 1, "man": 100, "woman": 101}}


@fuzz_settings
@given(data=damaged_json(VOCABULARY, dump=lambda o: json.dumps(o, indent=1).encode()))
def test_phrase_vocabulary_json(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "vocab.json", data)
    vocab = check_reader(lambda: PhraseVocabulary.from_json(path), path)
    if isinstance(vocab, PhraseVocabulary):
        assert all(isinstance(c, int) and c >= 0 for c in vocab.counts.values())


def test_phrase_vocabulary_messages(tmp_path):
    path = tmp_path / "vocab.json"
    path.write_text(json.dumps({**VOCABULARY, "counts": {"dog": -1}}))
    with pytest.raises(BadFileError,
                       match=f"^{path}: key 'counts': phrase 'dog': the count must be an integer >= 0, got -1$"):
        PhraseVocabulary.from_json(str(path))
    path.write_text(json.dumps({**VOCABULARY, "thresholds": [100, 0]}))
    with pytest.raises(BadFileError, match=f"^{path}: key 'thresholds': bucket thresholds must be strictly increasing"):
        PhraseVocabulary.from_json(str(path))
    path.write_bytes(b'{"thresholds": [0, 100],\n "counts": {"d\xffg": 1}}')
    with pytest.raises(BadFileError, match=f"^{path}:2:15: byte 0xff"):
        PhraseVocabulary.from_json(str(path))


# ----------------------------------------------------------------------------- encoded vocabulary cache
PHRASES = ["a b", "c", "zebra"]


def _encoder():
    kv = KeyedVectors(2, count=0, dtype=np.float32)
    kv.add_vectors(["a", "b", "c"], np.array([[1, 0], [0, 1], [3, 4]], dtype=np.float32))
    return MeanPoolEncoder(kv)


def _valid_cache() -> tuple:
    """(file name, arrays) of the cache of PHRASES, as EncodedVocabulary writes it."""
    with tempfile.TemporaryDirectory() as folder:
        path = EncodedVocabulary(_encoder(), PHRASES, cache_dir=folder).cache_path()
        with np.load(path) as data:
            return os.path.basename(path), {k: data[k] for k in data.files}


CACHE_NAME, CACHE = _valid_cache()


@fuzz_settings
@given(data=damaged_npz(CACHE))
def test_encoded_vocabulary_cache(tmp_path_factory, data):
    path = write_file(tmp_path_factory, CACHE_NAME, data)
    vocab = EncodedVocabulary(_encoder(), PHRASES, cache_dir=os.path.dirname(path))
    assert vocab.phrases == PHRASES
    np.testing.assert_array_equal(vocab.matrix, CACHE["matrix"])
    with np.load(path) as rewritten:  # a damaged cache is replaced
        np.testing.assert_array_equal(rewritten["matrix"], CACHE["matrix"])


def test_a_damaged_cache_is_logged_and_replaced(tmp_path, caplog):
    path = tmp_path / CACHE_NAME
    path.write_bytes(b"PK\x03\x04 truncated")
    with caplog.at_level("WARNING", logger="phrasedet.text"):
        vocab = EncodedVocabulary(_encoder(), PHRASES, cache_dir=str(tmp_path))
    assert f"ignoring the damaged cache {path} ({path}: not a readable numpy file" in caplog.text
    np.testing.assert_array_equal(vocab.matrix, CACHE["matrix"])
    np.testing.assert_array_equal(np.load(path)["matrix"], CACHE["matrix"])


@fuzz_settings
@given(data=damaged_bytes(b"# stop words\nthe\na  # article\nof\n"))
def test_stop_word_list(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "stopwords.txt", data)
    check_reader(lambda: load_stopwords(path), path)


def test_stop_word_list_loses_its_byte_order_mark_and_names_a_bad_byte(tmp_path):
    path = tmp_path / "stop.txt"
    path.write_bytes("\ufeffthe\nof\n".encode())
    assert load_stopwords(str(path)) == frozenset({"the", "of"})
    path.write_bytes(b"the\no\xfff\n")
    with pytest.raises(BadFileError, match=r"stop.txt:2:2: byte 0xff \(byte offset 5\) is not valid UTF-8"):
        load_stopwords.__wrapped__(str(path))
