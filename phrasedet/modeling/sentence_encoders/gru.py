"""``GRUSentenceEncoder``: VSE++'s caption encoder, a GRU over trainable word embeddings.

Words come from :class:`~phrasedet.text.WordVocabulary` built from the training captions
(``MODEL.RETRIEVAL.GRU.MIN_WORD_COUNT``, VSE++: 4); embeddings are initialized U(-0.1, 0.1) as in
VSE++'s code, or from ``PHRASEDET.TEXT``'s word vectors (``INIT_WORD_VECTORS``). The sentence
vector is the last layer's hidden state at the caption's last word. With ``GRU.HIDDEN_DIM`` 0 the
GRU's hidden size is the embedding size and nothing follows (VSE++'s code); otherwise a linear
layer maps the hidden state to ``EMBED_DIM`` (VSE++'s Eq. 2).

The vocabulary is rebuilt from the training split when the model is built; its fingerprint is a
buffer of the checkpoint, and loading a checkpoint made with another vocabulary is an error.
"""

import torch
from detectron2.config import configurable
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from phrasedet.text import WordVocabulary
from phrasedet.text.build import build_word_vectors

from .build import (
    SENTENCE_ENCODER_REGISTRY,
    check_vocab_fingerprint,
    encode_captions,
    init_embedding_from_word_vectors,
    training_word_vocabulary,
    vocab_fingerprint_buffer,
)

__all__ = ["GRUSentenceEncoder"]


@SENTENCE_ENCODER_REGISTRY.register()
class GRUSentenceEncoder(nn.Module):
    """list of C captions -> [C, embed_dim].

    Args:
        vocab: word indices.
        word_dim: word embedding size (VSE++: 300).
        embed_dim: output size.
        hidden_dim: GRU hidden size; 0 = ``embed_dim`` and no projection.
        num_layers: GRU layers.
        word_vectors: optional gensim KeyedVectors of size ``word_dim`` to initialize the
            embeddings of the words they know.
    """

    @configurable
    def __init__(self, vocab: WordVocabulary, *, word_dim: int, embed_dim: int, hidden_dim: int = 0,
                 num_layers: int = 1, word_vectors=None):
        super().__init__()
        self.vocab = vocab
        hidden = hidden_dim or embed_dim
        self.embedding = nn.Embedding(len(vocab), word_dim, padding_idx=0)
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
        with torch.no_grad():
            self.embedding.weight[0].zero_()
        if word_vectors is not None:
            init_embedding_from_word_vectors(self.embedding, vocab, word_vectors, "MODEL.RETRIEVAL.GRU.WORD_DIM",
                                             "GRUSentenceEncoder")
        self.gru = nn.GRU(word_dim, hidden, num_layers=num_layers, batch_first=True)
        self.projection = nn.Linear(hidden, embed_dim) if hidden_dim else nn.Identity()
        self.register_buffer("vocab_fingerprint", vocab_fingerprint_buffer(vocab))
        self._empty_captions = 0

    @classmethod
    def from_config(cls, cfg):
        g = cfg.MODEL.RETRIEVAL.GRU
        vocab = training_word_vocabulary(cfg, "GRUSentenceEncoder", g.MIN_WORD_COUNT)
        return {"vocab": vocab, "word_dim": g.WORD_DIM, "embed_dim": cfg.MODEL.RETRIEVAL.EMBED_DIM,
                "hidden_dim": g.HIDDEN_DIM, "num_layers": g.NUM_LAYERS,
                "word_vectors": build_word_vectors(cfg) if g.INIT_WORD_VECTORS else None}

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        check_vocab_fingerprint(state_dict, prefix, self.vocab_fingerprint, self.vocab, "MODEL.RETRIEVAL.GRU.MIN_WORD_COUNT")
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def tokenize(self, captions) -> tuple:
        """captions -> (word indices [C, T] long, padded with 0; lengths [C] long, all >= 1).

        A caption without any word gets one ``<unk>``; such captions are counted and logged."""
        ids, empty = encode_captions(self.vocab, captions, "GRUSentenceEncoder", self._empty_captions)
        self._empty_captions += empty
        lengths = torch.tensor([len(x) for x in ids], dtype=torch.long)
        tokens = torch.zeros((len(ids), int(lengths.max()) if ids else 0), dtype=torch.long)
        for row, x in enumerate(ids):
            tokens[row, : len(x)] = torch.tensor(x, dtype=torch.long)
        return tokens, lengths

    def forward(self, captions) -> torch.Tensor:
        """list of C caption strings -> [C, embed_dim]."""
        device = self.embedding.weight.device
        if len(captions) == 0:
            return self.embedding.weight.new_zeros((0, self._out_dim()))
        tokens, lengths = self.tokenize(captions)
        packed = pack_padded_sequence(self.embedding(tokens.to(device)), lengths, batch_first=True, enforce_sorted=False)
        _, hidden = self.gru(packed)  # [layers, C, H], each caption's state at its last word
        return self.projection(hidden[-1])

    def _out_dim(self) -> int:
        return self.projection.out_features if isinstance(self.projection, nn.Linear) else self.gru.hidden_size
