"""``FixedVectorSentenceEncoder``: paper 000's text branch over a fixed sentence vector.

Paper 000 encodes a sentence as an HGLMM Fisher vector of word2vec vectors (PCA to 6,000-d) and
learns only the two-layer branch on top. Here the fixed vector is ``PHRASEDET.TEXT.ENCODER``'s
("mean": mean-pooled, L2-normalized word vectors; "fisher": a GMM Fisher vector) over every word
of the caption (``caption_words``), computed once per caption and cached on disk
(:class:`~phrasedet.text.EncodedVocabulary`); the projection (``FIXED_VECTOR.PROJECTION``) is the
two-layer branch of ``MODEL.RETRIEVAL.BRANCH`` or a linear layer.
"""
import torch
from detectron2.config import configurable
from torch import nn

from phrasedet.text import caption_words
from phrasedet.text.build import build_encoded_vocabulary, build_text_encoder

from ..projection import build_projection
from .build import SENTENCE_ENCODER_REGISTRY, training_captions

__all__ = ["FixedVectorSentenceEncoder"]


def _normalized(caption: str) -> str:
    return " ".join(caption_words(caption))


@SENTENCE_ENCODER_REGISTRY.register()
class FixedVectorSentenceEncoder(nn.Module):
    """list of C captions -> [C, embed_dim]: frozen sentence vectors [C, D_t] -> projection.

    Args:
        encoded: an :class:`~phrasedet.text.EncodedVocabulary` over normalized caption strings
            (unseen captions are encoded on demand).
        projection: module [N, D_t] -> [N, embed_dim].
    """

    @configurable
    def __init__(self, encoded, projection: nn.Module):
        super().__init__()
        self.encoded = encoded
        self.projection = projection
        self.register_buffer("_device_anchor", torch.zeros(0), persistent=False)

    @classmethod
    def from_config(cls, cfg):
        encoder = build_text_encoder(cfg, whole_text=True)
        captions = [_normalized(c) for c in training_captions(cfg, "FixedVectorSentenceEncoder")]
        encoded = build_encoded_vocabulary(cfg, captions, encoder)
        r = cfg.MODEL.RETRIEVAL
        return {"encoded": encoded, "projection": build_projection(r.FIXED_VECTOR.PROJECTION, encoder.dim, cfg)}

    def sentence_vectors(self, captions) -> torch.Tensor:
        """[C, D_t] fixed vectors (no gradient)."""
        rows = self.encoded.lookup([_normalized(c) for c in captions])
        return torch.as_tensor(rows, dtype=torch.float32, device=self._device_anchor.device)

    def forward(self, captions) -> torch.Tensor:
        return self.projection(self.sentence_vectors(captions))
