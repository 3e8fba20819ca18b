import os

import numpy as np
import pytest
from detectron2.config import get_cfg
from detectron2.data import DatasetCatalog

from phrasedet.config import add_phrasedet_config
from phrasedet.text.build import build_encoded_vocabulary, build_text_encoder, build_word_vectors
from phrasedet.text.word_vectors import caption_sentences

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "configs")


def _cfg(*opts):
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(os.path.join(CONFIGS, "Base-Builtin.yaml"))
    cfg.merge_from_list(["PHRASEDET.TEXT.WORD2VEC_DIM", 16, "PHRASEDET.TEXT.WORD2VEC_EPOCHS", 2, *opts])
    return cfg


def test_word2vec_sees_training_captions_only_and_is_cached(builtin_root, caplog):
    cfg = _cfg()
    with caplog.at_level("INFO", logger="phrasedet.text"):
        kv = build_word_vectors(cfg)
        again = build_word_vectors(cfg)
    train_words = {w for s in caption_sentences(DatasetCatalog.get("builtin_flickr30k_entities_train")) for w in s}
    assert set(kv.index_to_key) == train_words and kv.vector_size == 16
    np.testing.assert_array_equal(kv.vectors, again.vectors)
    assert "loading cached word2vec" in caplog.text


def test_encoders_cover_the_test_phrases(builtin_root):
    cfg = _cfg()
    phrases = sorted({a["phrase"] for d in DatasetCatalog.get("builtin_flickr30k_entities_test") for a in d["annotations"]})
    mean = build_encoded_vocabulary(cfg, phrases)
    assert mean.matrix.shape == (len(phrases), 16)
    np.testing.assert_allclose(np.linalg.norm(mean.matrix, axis=1), 1.0, rtol=1e-5)
    fisher = build_text_encoder(_cfg("PHRASEDET.TEXT.ENCODER", "fisher", "PHRASEDET.TEXT.FISHER_COMPONENTS", 2))
    assert fisher.encode(phrases[:3]).shape == (3, 2 * 2 * 16)
    assert fisher.oov.n_oov_tokens == 0  # zero-shot phrases are new combinations of known words


def test_config_errors_name_the_key():
    with pytest.raises(ValueError, match="WORD_VECTORS_PATH"):
        build_word_vectors(_cfg("PHRASEDET.TEXT.WORD_VECTORS", "file"))
    with pytest.raises(ValueError, match="PHRASEDET.TEXT.WORD_VECTORS must be one of"):
        build_word_vectors(_cfg("PHRASEDET.TEXT.WORD_VECTORS", "fasttext"))
    with pytest.raises(ValueError, match="is a test dataset"):
        build_word_vectors(_cfg("PHRASEDET.TEXT.WORD2VEC_DATASET", "builtin_flickr30k_entities_test"))


def test_the_word2vec_dataset_must_be_named_somewhere():
    with pytest.raises(ValueError) as error:
        build_word_vectors(_cfg("DATASETS.TRAIN", "()"))
    assert str(error.value) == "PHRASEDET.TEXT.WORD_VECTORS 'word2vec' needs DATASETS.TRAIN or PHRASEDET.TEXT.WORD2VEC_DATASET"
    with pytest.raises(ValueError) as error:
        build_word_vectors(_cfg("PHRASEDET.TEXT.WORD_VECTORS", "file"))
    assert str(error.value) == "PHRASEDET.TEXT.WORD_VECTORS 'file' needs PHRASEDET.TEXT.WORD_VECTORS_PATH"


def test_every_word2vec_key_reaches_word2vec_and_its_cache_is_the_configs(builtin_root, tmp_path, monkeypatch):
    from phrasedet.text import build

    calls = []
    monkeypatch.setattr(build, "cached_word2vec", lambda sentences, cache_dir, **params: calls.append((cache_dir, params)) or "kv")
    cfg = _cfg("DATASETS.TRAIN", "()", "PHRASEDET.TEXT.WORD2VEC_DATASET", "builtin_flickr30k_entities_val", "PHRASEDET.CACHE_DIR",
               str(tmp_path), "PHRASEDET.TEXT.WORD2VEC_WINDOW", 3, "PHRASEDET.TEXT.WORD2VEC_MIN_COUNT", 2,
               "PHRASEDET.TEXT.WORD2VEC_SEED", 7)
    assert build_word_vectors(cfg) == "kv"
    assert calls == [(str(tmp_path / "word_vectors"), {"vector_size": 16, "window": 3, "min_count": 2, "epochs": 2, "seed": 7})]
    monkeypatch.setattr(build, "load_glove_6b_50d", lambda: "glove")
    assert build_word_vectors(_cfg("PHRASEDET.TEXT.WORD_VECTORS", "glove_6b_50d")) == "glove"


def test_a_vectors_file_is_read_in_the_configs_format_and_a_missing_one_names_the_key(tmp_path):
    (tmp_path / "glove.bin").write_text("red 1 0 0\nblue 0 1 0\n")  # GloVe text under a name "auto" reads as binary
    kv = build_word_vectors(_cfg("PHRASEDET.TEXT.WORD_VECTORS", "file", "PHRASEDET.TEXT.WORD_VECTORS_PATH", str(tmp_path / "glove.bin"),
                                 "PHRASEDET.TEXT.WORD_VECTORS_FORMAT", "glove_text"))
    assert kv.index_to_key == ["red", "blue"] and kv.vectors.tolist() == [[1, 0, 0], [0, 1, 0]]
    with pytest.raises(FileNotFoundError, match=r"^PHRASEDET\.TEXT\.WORD_VECTORS_PATH "):
        build_word_vectors(_cfg("PHRASEDET.TEXT.WORD_VECTORS", "file", "PHRASEDET.TEXT.WORD_VECTORS_PATH", "no/such/vectors.bin"))


def test_the_encoder_reads_its_keys_and_the_given_vectors(tmp_path, monkeypatch):
    from phrasedet.text import build

    calls = []
    monkeypatch.setattr(build, "build_word_vectors", lambda cfg: pytest.fail("vectors were given"))
    monkeypatch.setattr(build, "build_phrase_encoder", lambda name, kv, **kwargs: calls.append((name, kv, kwargs)) or "encoder")
    build_text_encoder(_cfg("PHRASEDET.TEXT.MAX_TOKENS", 6), kv="kv")
    build_text_encoder(_cfg("PHRASEDET.TEXT.MAX_TOKENS", 0), kv="kv")
    build_text_encoder(_cfg("PHRASEDET.TEXT.MAX_TOKENS", 6), kv="kv", whole_text=True)
    build_text_encoder(_cfg("PHRASEDET.TEXT.ENCODER", "fisher", "PHRASEDET.TEXT.FISHER_COMPONENTS", 3, "PHRASEDET.TEXT.FISHER_SEED", 5),
                       kv="kv")
    assert calls == [("mean", "kv", {"max_tokens": 6}), ("mean", "kv", {"max_tokens": None}), ("mean", "kv", {"max_tokens": None}),
                     ("fisher", "kv", {"max_tokens": 10, "n_components": 3, "seed": 5})]


def test_the_encoded_vocabulary_uses_the_given_encoder_and_caches_under_the_configs_folder(builtin_root, tmp_path, monkeypatch):
    from phrasedet.text import build

    encoder = build_text_encoder(_cfg())
    monkeypatch.setattr(build, "build_text_encoder", lambda cfg: pytest.fail("an encoder was given"))
    vocabulary = build_encoded_vocabulary(_cfg("PHRASEDET.CACHE_DIR", str(tmp_path)), ["red circle", "blue star"], encoder=encoder)
    assert vocabulary.cache_dir == str(tmp_path / "encoded_phrases") and vocabulary.matrix.shape == (2, 16)
    assert [f.endswith(".npz") for f in os.listdir(tmp_path / "encoded_phrases")] == [True]
