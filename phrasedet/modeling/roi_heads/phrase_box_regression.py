"""Phrase-conditioned bounding-box regression (paper 003 Sec. 3.2): one FC layer to 4 deltas on
r (.) ReLU(BN(FC(v))), the region feature gated by the projected phrase feature."""
import torch
from torch import nn

__all__ = ["PhraseBoxRegressor"]


class PhraseBoxRegressor(nn.Module):
    """deltas = FC(r * ReLU(BN(FC(v)))).

    Args:
        region_dim: D_r; phrase_dim: D_t.
    """

    def __init__(self, region_dim: int, phrase_dim: int):
        super().__init__()
        self.phrase_embed = nn.Sequential(nn.Linear(phrase_dim, region_dim), nn.BatchNorm1d(region_dim), nn.ReLU())
        self.bbox_pred = nn.Linear(region_dim, 4)
        nn.init.normal_(self.bbox_pred.weight, std=0.001)  # as the released code
        nn.init.zeros_(self.bbox_pred.bias)

    def embed_phrases(self, phrase_feats: torch.Tensor) -> torch.Tensor:
        """[P, D_t] -> [P, D_r]. BatchNorm statistics come from the P phrases of the batch."""
        if self.training and phrase_feats.shape[0] == 1:  # BN cannot normalize one sample
            bn = self.phrase_embed[1]
            x = self.phrase_embed[0](phrase_feats)
            return torch.relu(nn.functional.batch_norm(x, bn.running_mean, bn.running_var, bn.weight, bn.bias, False))
        return self.phrase_embed(phrase_feats)

    def forward(self, region_feats: torch.Tensor, phrase_embeds: torch.Tensor) -> torch.Tensor:
        """region_feats [..., D_r] and phrase_embeds broadcastable to it -> deltas [..., 4]."""
        return self.bbox_pred(region_feats * phrase_embeds)
