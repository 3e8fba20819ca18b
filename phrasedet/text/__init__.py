"""Text pipeline shared by every task family: tokenization, phrase and caption normalization,
phrase vocabulary (buckets), word vocabulary, word vectors, phrase/sentence vector encoders."""
from .encoders import (
    PHRASE_ENCODER_REGISTRY,
    EncodedVocabulary,
    FisherVectorEncoder,
    MeanPoolEncoder,
    OOVStats,
    PhraseEncoder,
    build_phrase_encoder,
)
from .normalize import UNK, caption_words, nfc, load_stopwords, normalize_phrase, normalize_tokens
from .tokenize import tokenize
from .vocab import BUCKETS, DEFAULT_THRESHOLDS, PhraseVocabulary, bucket_of_count
from .word_vocab import PAD, UNKNOWN, WordVocabulary
from .word_vectors import (
    WORD_VECTOR_FORMATS,
    cached_word2vec,
    caption_sentences,
    keyed_vectors_fingerprint,
    load_glove_6b_50d,
    load_word_vectors,
    train_word2vec,
)

__all__ = [
    # tokenize / normalize
    "tokenize", "UNK", "nfc", "caption_words", "load_stopwords", "normalize_tokens", "normalize_phrase",
    # vocabulary
    "BUCKETS", "DEFAULT_THRESHOLDS", "bucket_of_count", "PhraseVocabulary", "PAD", "UNKNOWN", "WordVocabulary",
    # word vectors
    "WORD_VECTOR_FORMATS", "caption_sentences", "train_word2vec", "load_word_vectors",
    "load_glove_6b_50d", "cached_word2vec", "keyed_vectors_fingerprint",
    # encoders
    "OOVStats", "PhraseEncoder", "MeanPoolEncoder", "FisherVectorEncoder",
    "PHRASE_ENCODER_REGISTRY", "build_phrase_encoder", "EncodedVocabulary",
]
