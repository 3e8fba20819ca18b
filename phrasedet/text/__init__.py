"""Text pipeline: tokenization, phrase normalization, phrase vocabulary, word vectors, phrase encoders."""
from .normalize import UNK, load_stopwords, normalize_phrase, normalize_tokens
from .tokenize import tokenize
