"""``SENTENCE_ENCODER_REGISTRY``: caption strings -> sentence vectors, chosen by
``MODEL.RETRIEVAL.SENTENCE_ENCODER``.

An encoder is an ``nn.Module`` called with a list of C caption strings (as written in the
dataset) that returns [C, MODEL.RETRIEVAL.EMBED_DIM] (not normalized: the meta-architecture
L2-normalizes). Tokenization, vocabularies and word vectors come from :mod:`phrasedet.text`.
"""
import logging

import numpy as np
import torch
from detectron2.data import DatasetCatalog
from fvcore.common.registry import Registry

from phrasedet.text import WordVocabulary

__all__ = ["SENTENCE_ENCODER_REGISTRY", "build_sentence_encoder", "training_captions", "training_word_vocabulary", "fingerprint_value",
           "check_fingerprint", "vocab_fingerprint_buffer", "check_vocab_fingerprint", "encode_captions",
           "init_embedding_from_word_vectors"]

logger = logging.getLogger(__name__)

SENTENCE_ENCODER_REGISTRY = Registry("SENTENCE_ENCODER")
SENTENCE_ENCODER_REGISTRY.__doc__ = """Sentence encoders by class name; each is built as ``cls(cfg)``."""


def build_sentence_encoder(cfg):
    """The encoder named by ``cfg.MODEL.RETRIEVAL.SENTENCE_ENCODER``."""
    return SENTENCE_ENCODER_REGISTRY.get(cfg.MODEL.RETRIEVAL.SENTENCE_ENCODER)(cfg)


def training_captions(cfg, who: str) -> list:
    """Every caption of every ``DATASETS.TRAIN`` split, in dataset order (vocabularies and encoder
    caches are built from these, never from a test split)."""
    if not cfg.DATASETS.TRAIN:
        raise ValueError(f"{who} builds its vocabulary from the captions of DATASETS.TRAIN, which is empty")
    return [c for name in cfg.DATASETS.TRAIN for record in DatasetCatalog.get(name) for c in record.get("captions", ())]


def training_word_vocabulary(cfg, who: str, min_count: int) -> WordVocabulary:
    """The :class:`WordVocabulary` of the training captions (words seen ``min_count`` times), logged."""
    vocab = WordVocabulary.from_captions(training_captions(cfg, who), min_count)
    logger.info("%s: %r from the captions of %s (words seen >= %d times)", who, vocab, ", ".join(cfg.DATASETS.TRAIN), min_count)
    return vocab


def fingerprint_value(hex_digest: str) -> int:
    """The first 15 hex digits of a fingerprint as an int (fits in an int64 buffer)."""
    return int(hex_digest[:15], 16)


def check_fingerprint(state_dict: dict, key: str, expected, what: str, kind: str = "words") -> None:
    """Raise when a checkpoint's fingerprint buffer ``state_dict[key]`` differs from ``expected``
    (a one-element tensor): the checkpoint was trained with other ``kind`` (words, training
    images) than ``what`` (which says how to fix it)."""
    if key in state_dict and int(state_dict[key].reshape(-1)[0]) != int(expected.reshape(-1)[0]):
        raise ValueError(f"{key}: the checkpoint was trained with other {kind} than {what}")


# Encoders with trainable embeddings of a WordVocabulary built from DATASETS.TRAIN (GRUSentenceEncoder,
# TextCNNSentenceEncoder) share the helpers below.


def vocab_fingerprint_buffer(vocab) -> torch.Tensor:
    """A one-element int64 tensor identifying a :class:`~phrasedet.text.WordVocabulary`; encoders
    register it as the buffer ``vocab_fingerprint`` and check it with :func:`check_vocab_fingerprint`."""
    return torch.tensor([fingerprint_value(vocab.fingerprint())], dtype=torch.long)


def check_vocab_fingerprint(state_dict: dict, prefix: str, expected, vocab, min_count_key: str) -> None:
    """In ``_load_from_state_dict``: refuse a checkpoint whose ``<prefix>vocab_fingerprint`` is not
    ``expected`` (it was trained with another vocabulary; ``min_count_key`` is the config key of the
    vocabulary's minimum word count)."""
    check_fingerprint(state_dict, prefix + "vocab_fingerprint", expected,
                      f"the word vocabulary built from DATASETS.TRAIN now ({vocab!r}); use the training "
                      f"splits and {min_count_key} it was trained with")


def encode_captions(vocab, captions, who: str, empty_so_far: int = 0) -> tuple:
    """captions -> (list of C lists of word indices, each non-empty; number of empty captions).

    A caption without any word gets one ``<unk>`` (index 1); such captions are logged as ``who``'s,
    with ``empty_so_far`` plus their number as the running count."""
    ids = [vocab.encode(c) for c in captions]
    empty = sum(1 for x in ids if not x)
    if empty:
        logger.warning("%s: %d caption(s) without any word encoded as '<unk>' (%d so far)", who, empty,
                       empty_so_far + empty)
    return [x or [1] for x in ids], empty


def init_embedding_from_word_vectors(embedding, vocab, kv, dim_key: str, who: str) -> int:
    """Copy the vectors of gensim ``KeyedVectors`` ``kv`` into the rows of ``embedding`` (an
    ``nn.Embedding`` indexed by ``vocab``) of the words ``kv`` knows; other rows are left as they are.
    The sizes must agree (``dim_key`` is the config key of the embedding size). Returns the number of
    rows copied."""
    if kv.vector_size != embedding.embedding_dim:
        raise ValueError(f"{dim_key} is {embedding.embedding_dim} but the word vectors "
                         f"(PHRASEDET.TEXT) are {kv.vector_size}-d: make them equal to initialize from them")
    known = [(i, w) for i, w in enumerate(vocab.words[2:], start=2) if w in kv.key_to_index]
    if known:
        rows, words = zip(*known)
        with torch.no_grad():
            embedding.weight[list(rows)] = torch.as_tensor(np.stack([kv[w] for w in words]), dtype=embedding.weight.dtype)
    logger.info("%s: %d of %d words initialized from the word vectors", who, len(known), len(vocab) - 2)
    return len(known)
