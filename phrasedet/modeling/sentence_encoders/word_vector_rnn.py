"""``WordVectorRNNSentenceEncoder``: paper 004's text path, a recurrent net over fixed word vectors.

Words (:func:`~phrasedet.text.caption_words`) are looked up in ``PHRASEDET.TEXT``'s word vectors,
which are not trained (paper 004: Skip-Thoughts' 620-d word table; here the project's word2vec,
a word2vec/GloVe file, or GloVe 6B): any word the table knows works, also one never seen in a
training caption. A word the table lacks becomes a zero vector; such words are counted
(:attr:`oov_words`) and logged. A caption without any word is one zero vector, also counted.

The recurrent net (``MODEL.RETRIEVAL.RNN``) has hidden size ``EMBED_DIM`` and no projection after
it (paper 004): the output of its last layer at the caption's last word is the sentence vector.

* ``"sru"``: the Simple Recurrent Unit of the PyPI package ``sru`` (Lei et al.), with
  ``SRU_V1`` the released code's ``v1=True, use_tanh=True, has_skip_term=True, rescale=False``;
  ``DROPOUT`` and ``RNN_DROPOUT`` as its ``dropout`` and ``rnn_dropout``. On CPU the package runs
  its PyTorch implementation (its CUDA kernels compile on first use on a GPU machine).
* ``"gru"``: ``torch.nn.GRU`` with ``DROPOUT`` between layers.

The word table's fingerprint is a buffer of the checkpoint; loading a checkpoint made with other
word vectors is an error.
"""
import logging
import warnings

import numpy as np
import torch
from detectron2.config import configurable
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from phrasedet.text import caption_words, keyed_vectors_fingerprint
from phrasedet.text.build import build_word_vectors

from .build import SENTENCE_ENCODER_REGISTRY, check_fingerprint, fingerprint_value

__all__ = ["WordVectorRNNSentenceEncoder", "RNN_TYPES", "build_sru"]

logger = logging.getLogger(__name__)
RNN_TYPES = ("sru", "gru")


def build_sru(input_dim: int, hidden_dim: int, num_layers: int, dropout: float, rnn_dropout: float, v1: bool):
    """An ``sru.SRU`` (imported here: the package warns at import that it cannot compile CUDA
    kernels on a machine without CUDA, and about the deprecated v1 options; both are expected)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import sru

        options = dict(use_tanh=True, has_skip_term=True, v1=True, rescale=False) if v1 else {}
        return sru.SRU(input_dim, hidden_dim, num_layers=num_layers, dropout=dropout, rnn_dropout=rnn_dropout, **options)


@SENTENCE_ENCODER_REGISTRY.register()
class WordVectorRNNSentenceEncoder(nn.Module):
    """list of C captions -> [C, hidden_dim].

    Args:
        word_vectors: gensim ``KeyedVectors`` (K-d), fixed.
        hidden_dim: RNN hidden size (the sentence vector's size).
        rnn_type: ``"sru"`` or ``"gru"``.
        num_layers, dropout, rnn_dropout, sru_v1: see the module docstring.
    """

    @configurable
    def __init__(self, word_vectors, *, hidden_dim: int, rnn_type: str = "sru", num_layers: int = 4,
                 dropout: float = 0.25, rnn_dropout: float = 0.25, sru_v1: bool = True):
        super().__init__()
        if rnn_type not in RNN_TYPES:
            raise ValueError(f"MODEL.RETRIEVAL.RNN.TYPE must be one of {RNN_TYPES}, got {rnn_type!r}")
        self.word_vectors = word_vectors
        # the word table itself (no copy when it is float32 already, as gensim keeps it)
        self._table = torch.from_numpy(np.ascontiguousarray(word_vectors.vectors, dtype=np.float32))
        self.rnn_type = rnn_type
        k = word_vectors.vector_size
        if rnn_type == "sru":
            self.rnn = build_sru(k, hidden_dim, num_layers, dropout, rnn_dropout, sru_v1)
        else:
            self.rnn = nn.GRU(k, hidden_dim, num_layers=num_layers, dropout=dropout if num_layers > 1 else 0.0)
        self.hidden_dim = hidden_dim
        fingerprint = fingerprint_value(keyed_vectors_fingerprint(word_vectors))
        self.register_buffer("word_vectors_fingerprint", torch.tensor([fingerprint], dtype=torch.long))
        self.oov_words = 0
        self.empty_captions = 0

    @classmethod
    def from_config(cls, cfg):
        r = cfg.MODEL.RETRIEVAL
        return {"word_vectors": build_word_vectors(cfg), "hidden_dim": r.EMBED_DIM, "rnn_type": r.RNN.TYPE,
                "num_layers": r.RNN.NUM_LAYERS, "dropout": r.RNN.DROPOUT, "rnn_dropout": r.RNN.RNN_DROPOUT,
                "sru_v1": r.RNN.SRU_V1}

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        check_fingerprint(state_dict, prefix + "word_vectors_fingerprint", self.word_vectors_fingerprint,
                          "PHRASEDET.TEXT's word vectors now; use the word vectors it was trained with")
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def word_rows(self, captions) -> tuple:
        """captions -> (rows [C, T] long into the table, -1 = unknown word or padding; lengths [C] >= 1).

        Unknown words and captions without any word are counted and logged."""
        index = self.word_vectors.key_to_index
        words = [caption_words(c) for c in captions]
        rows = [[index.get(w, -1) for w in ws] or [-1] for ws in words]
        oov = sum(1 for ws in words for w in ws if w not in index)
        empty = sum(1 for ws in words if not ws)
        if oov or empty:
            self.oov_words += oov
            self.empty_captions += empty
            logger.warning("WordVectorRNNSentenceEncoder: %d word(s) without a word vector and %d caption(s) without any "
                           "word read as zero vectors (%d and %d so far)", oov, empty, self.oov_words, self.empty_captions)
        lengths = torch.tensor([len(r) for r in rows], dtype=torch.long)
        out = torch.full((len(rows), int(lengths.max())), -1, dtype=torch.long)
        for i, r in enumerate(rows):
            out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        return out, lengths

    def forward(self, captions) -> torch.Tensor:
        """list of C caption strings -> [C, hidden_dim]."""
        device = self.word_vectors_fingerprint.device
        if len(captions) == 0:
            return torch.zeros((0, self.hidden_dim), device=device)
        rows, lengths = self.word_rows(captions)
        known = (rows >= 0)[..., None]
        inputs = (self._table[rows.clamp(min=0)] * known).transpose(0, 1).to(device)  # [T, C, K], zeros where unknown
        if self.rnn_type == "gru":
            _, hidden = self.rnn(pack_padded_sequence(inputs, lengths, enforce_sorted=False))
            return hidden[-1]
        pad = torch.arange(inputs.shape[0])[:, None] >= lengths[None, :]  # [T, C], True after the last word
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Running SRU on CPU")
            outputs, _ = self.rnn(inputs, mask_pad=pad.to(device))  # [T, C, H]
        return outputs[lengths.to(device) - 1, torch.arange(len(captions), device=device)]
