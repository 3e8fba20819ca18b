"""``PhraseFeatureBank``: phrase strings -> fixed phrase feature vectors (the frozen text input).

Paper 003's code feeds every classifier the mean-pooled, L2-normalized word vectors of a phrase
(frozen). The bank wraps an :class:`~phrasedet.text.EncodedVocabulary`, so each phrase is
encoded once per process (and once across runs with the on-disk cache).
"""
import torch
from torch import nn

from phrasedet.text.build import build_encoded_vocabulary

__all__ = ["PhraseFeatureBank", "build_phrase_feature_bank"]


class PhraseFeatureBank(nn.Module):
    """Look up phrase features by phrase string.

    Args:
        encoded: an :class:`~phrasedet.text.EncodedVocabulary` (encodes unseen phrases on demand).
    """

    def __init__(self, encoded):
        super().__init__()
        self.encoded = encoded
        self.register_buffer("_device_anchor", torch.zeros(0), persistent=False)

    @property
    def dim(self) -> int:
        """Phrase feature dimension D_t."""
        return self.encoded.encoder.dim

    def forward(self, phrases) -> torch.Tensor:
        """
        Args:
            phrases: list[str] of P normalized phrases.

        Returns:
            float32 tensor [P, D_t] on the module's device (no gradient).
        """
        if len(phrases) == 0:
            return self._device_anchor.new_zeros((0, self.dim))
        rows = self.encoded.lookup(list(phrases))
        return torch.as_tensor(rows, dtype=torch.float32, device=self._device_anchor.device)


def build_phrase_feature_bank(cfg, phrases=()):
    """The bank of ``cfg.PHRASEDET.TEXT`` (word vectors from the training split), pre-filled with ``phrases``."""
    return PhraseFeatureBank(build_encoded_vocabulary(cfg, list(phrases)))
