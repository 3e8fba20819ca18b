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
