"""``TwoLayerBranch``: the two-layer branch of two-branch image-text networks, shared by every family.

Paper 000 (Wang et al.) maps each modality through FC -> ReLU -> FC into the joint space; its
released code puts BatchNorm after the first FC and dropout after the ReLU (retrieval: 0.5).
Paper 003's Embedding Network and CITE use the same branch without BatchNorm or dropout, with
layers that can be CCA-initialized (:meth:`TwoLayerBranch.set_layers`).
"""
from typing import Sequence

import torch.nn.functional as F
from torch import nn

from .cca import CCAInitLinear

__all__ = ["TwoLayerBranch"]


class TwoLayerBranch(nn.Module):
    """x [N, in_dim] -> layer1 -> [BatchNorm] -> ReLU -> [Dropout] -> layer2 -> [N, out_dim].

    No activation after layer 2. Both layers are :class:`CCAInitLinear`: random layers are
    ordinary linear layers; :meth:`set_layers` swaps in CCA-initialized ones (their output sizes
    then come from the CCA, as in paper 003's released code).

    Args:
        in_dim, hidden_dim, out_dim: layer sizes.
        scale_bias: see :class:`CCAInitLinear` (only matters for CCA-initialized layers).
        batch_norm: BatchNorm1d after layer 1 (paper 000's code).
        dropout: dropout probability after the ReLU (paper 000, retrieval: 0.5); 0 = none.
    """

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, scale_bias: bool = True,
                 batch_norm: bool = False, dropout: float = 0.0):
        super().__init__()
        self.layers = nn.ModuleList([CCAInitLinear.random(in_dim, hidden_dim, scale_bias), CCAInitLinear.random(hidden_dim, out_dim, scale_bias)])
        self.norm = nn.BatchNorm1d(hidden_dim) if batch_norm else nn.Identity()
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    def set_layers(self, layers: Sequence[CCAInitLinear]) -> None:
        if len(layers) != 2:
            raise ValueError(f"expected 2 layers, got {len(layers)}")
        if layers[0].in_features != self.layers[0].in_features or layers[1].in_features != layers[0].out_features:
            raise ValueError(
                f"CCA layer sizes {[(l.in_features, l.out_features) for l in layers]} do not chain from input size {self.layers[0].in_features}"
            )
        if isinstance(self.norm, nn.BatchNorm1d) and self.norm.num_features != layers[0].out_features:
            self.norm = nn.BatchNorm1d(layers[0].out_features).to(self.norm.weight.device)
        self.layers = nn.ModuleList(layers)

    @property
    def out_features(self) -> int:
        return self.layers[-1].out_features

    def forward(self, x):
        return self.layers[1](self.dropout(F.relu(self.norm(self.layers[0](x)))))

    def regularizer(self, l2_weight: float, l1_bias_weight: float):
        """Sum of the CCA regularizers of the CCA-initialized layers (None if there are none)."""
        terms = [l.regularizer(l2_weight, l1_bias_weight) for l in self.layers if l.cca_initialized]
        return sum(terms) if terms else None
