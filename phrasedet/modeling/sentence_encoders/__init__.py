"""Sentence encoders for the retrieval family (and the pointing game); importing registers them."""
from .build import SENTENCE_ENCODER_REGISTRY, build_sentence_encoder, training_captions
from .fixed_vector import FixedVectorSentenceEncoder
from .gru import GRUSentenceEncoder
from .text_cnn import TextCNNSentenceEncoder
from .word_vector_rnn import WordVectorRNNSentenceEncoder

__all__ = ["SENTENCE_ENCODER_REGISTRY", "build_sentence_encoder", "training_captions", "FixedVectorSentenceEncoder",
           "GRUSentenceEncoder", "TextCNNSentenceEncoder", "WordVectorRNNSentenceEncoder"]
