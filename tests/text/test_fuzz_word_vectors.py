"""Fuzz tests (tests/fuzz.py) of the word vector readers: damaged word2vec binary, word2vec text
and GloVe text files load, or fail with a BadFileError naming the file (and, for text, the line)."""
import gzip
import os
import tempfile

import numpy as np
import pytest
from gensim.models import KeyedVectors
from hypothesis import given

from phrasedet.fileio import BadFileError
from phrasedet.text import cached_word2vec, load_word_vectors
from tests.fuzz import check_reader, damaged_bytes, fuzz_settings, write_file

WORDS = ["cat", "dog", "über"]
VECTORS = np.array([[0.5, -1.25, 3.0], [1.0, 2.0, -0.125], [0.0, 0.25, 8.0]], dtype=np.float32)


def _valid_file(binary: bool) -> bytes:
    """The three vectors as written by gensim (word2vec binary or text)."""
    kv = KeyedVectors(3, count=0, dtype=np.float32)
    kv.add_vectors(WORDS, VECTORS)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "vectors")
        kv.save_word2vec_format(path, binary=binary)
        with open(path, "rb") as f:
            return f.read()


def _check_loaded(result):
    """A damaged file that loads gives finite float32 vectors, one per word."""
    if isinstance(result, KeyedVectors):
        assert result.vectors.dtype == np.float32 and result.vectors.shape == (len(result), result.vector_size)
        assert np.isfinite(result.vectors).all()


BINARY = _valid_file(binary=True)
TEXT = _valid_file(binary=False)
GLOVE = "cat 0.5 -1.25 3.0\ndog 1 2 -0.125\nüber 0 0.25 8\n".encode()


@fuzz_settings
@given(data=damaged_bytes(BINARY))
def test_word2vec_binary(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "vectors.bin", data)
    _check_loaded(check_reader(lambda: load_word_vectors(path), path))


@fuzz_settings
@given(data=damaged_bytes(TEXT))
def test_word2vec_text(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "vectors.txt", data)
    _check_loaded(check_reader(lambda: load_word_vectors(path, fmt="word2vec_text"), path))


@fuzz_settings
@given(data=damaged_bytes(GLOVE))
def test_glove_text(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "glove.txt", data)
    _check_loaded(check_reader(lambda: load_word_vectors(path), path))


@fuzz_settings
@given(data=damaged_bytes(gzip.compress(GLOVE, mtime=0)))
def test_gzipped_glove_text(tmp_path_factory, data):
    path = write_file(tmp_path_factory, "glove.txt.gz", data)
    _check_loaded(check_reader(lambda: load_word_vectors(path, fmt="glove_text"), path))


# ----------------------------------------------------------------------------- exact messages
def test_bad_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "glove.txt"
    path.write_bytes(b"cat 0.5 1.0\nd\xffg 1.0 2.0\n")
    with pytest.raises(BadFileError, match=f"^{path}:2:2: byte 0xff \\(byte offset 13\\) is not valid UTF-8$"):
        load_word_vectors(str(path))


def test_a_byte_order_mark_is_removed(tmp_path):
    for name, data in (("glove.txt", GLOVE), ("w2v.txt", TEXT)):
        path = tmp_path / name
        path.write_bytes("\ufeff".encode() + data)
        kv = load_word_vectors(str(path))
        assert kv.index_to_key == WORDS
        np.testing.assert_array_equal(kv.vectors, VECTORS)


def test_non_finite_value_names_file_and_line(tmp_path):
    path = tmp_path / "glove.txt"
    path.write_text("cat 0.5 1.0\ndog nan 2.0\n")
    with pytest.raises(BadFileError, match=f"^{path}:2: word 'dog': a value is not a finite number"):
        load_word_vectors(str(path))


def test_truncated_binary_file_names_it(tmp_path):
    path = tmp_path / "vectors.bin"
    path.write_bytes(BINARY[:12])
    with pytest.raises(BadFileError, match=f"^{path}: header announces 3 vectors of dimension 3 "
                                           "\\(at least 43 bytes\\), but the file has 12 bytes: truncated\\?$"):
        load_word_vectors(str(path))
    path.write_bytes(BINARY[:-5])
    with pytest.raises(BadFileError, match=f"^{path}: not a word2vec binary file \\(EOFError: unexpected end of input"):
        load_word_vectors(str(path))
    path.write_bytes(b"3 x\n" + BINARY[4:])
    with pytest.raises(BadFileError, match=f"^{path}:1: expected a '<count> <dim>' header"):
        load_word_vectors(str(path))


def test_a_damaged_word2vec_cache_is_retrained(tmp_path, caplog):
    sentences = [["a", "b", "c"], ["b", "c", "d"]] * 5
    params = dict(vector_size=4, epochs=1)
    first = cached_word2vec(sentences, str(tmp_path), **params)
    (cache,) = os.listdir(tmp_path)
    (tmp_path / cache).write_bytes(b"")
    with caplog.at_level("WARNING", logger="phrasedet.text"):
        again = cached_word2vec(sentences, str(tmp_path), **params)
    assert "retraining" in caplog.text and cache in caplog.text
    np.testing.assert_array_equal(again.vectors, first.vectors)
    np.testing.assert_array_equal(cached_word2vec(sentences, str(tmp_path), **params).vectors, first.vectors)
