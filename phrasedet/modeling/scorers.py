"""How an image embedding and a caption embedding are scored, as one interface for the losses,
the model and the retrieval evaluator:

* ``pairwise(images [n, D], captions [m, D]) -> [n, m]``: every image against every caption;
* ``paired(images [k, D], captions [k, D]) -> [k]``: row i against row i.

:class:`DotProductScorer` is the cosine of L2-normalized embeddings (embedding networks, VSE++);
:class:`SimilarityNetwork` is paper 000's similarity network: the element-wise product of the two
embeddings through FC -> ReLU -> ... -> FC to one logit (512 -> 256 -> 1 in the paper).
"""
from typing import Sequence

import torch
from torch import nn

__all__ = ["DotProductScorer", "SimilarityNetwork", "build_scorer"]


class DotProductScorer(nn.Module):
    """Scores are dot products (cosines for unit vectors)."""

    def pairwise(self, images: torch.Tensor, captions: torch.Tensor) -> torch.Tensor:
        return images @ captions.t()

    def paired(self, images: torch.Tensor, captions: torch.Tensor) -> torch.Tensor:
        return (images * captions).sum(dim=-1)


class SimilarityNetwork(nn.Module):
    """Paper 000's similarity network on top of the two embeddings.

    Args:
        embed_dim: D.
        hidden_dims: sizes of the hidden FC layers, each followed by a ReLU (paper: [512, 256]);
            a last FC gives the logit.
        pairwise_budget: at most this many (image, caption) products are formed at once by
            :meth:`pairwise` (memory: budget x D floats).
    """

    def __init__(self, embed_dim: int, hidden_dims: Sequence[int] = (512, 256), pairwise_budget: int = 1 << 16):
        super().__init__()
        layers, d = [], embed_dim
        for h in hidden_dims:
            layers += [nn.Linear(d, h), nn.ReLU(inplace=True)]
            d = h
        layers.append(nn.Linear(d, 1))
        self.head = nn.Sequential(*layers)
        self.pairwise_budget = int(pairwise_budget)

    def paired(self, images: torch.Tensor, captions: torch.Tensor) -> torch.Tensor:
        """[k, D], [k, D] -> [k] logits."""
        return self.head(images * captions).squeeze(-1)

    def pairwise(self, images: torch.Tensor, captions: torch.Tensor) -> torch.Tensor:
        """[n, D], [m, D] -> [n, m] logits, a block of images at a time."""
        rows = max(1, self.pairwise_budget // max(1, captions.shape[0]))
        blocks = []
        for start in range(0, images.shape[0], rows):
            block = images[start:start + rows]
            products = block[:, None, :] * captions[None, :, :]  # [b, m, D]
            blocks.append(self.head(products).squeeze(-1))
        return torch.cat(blocks) if blocks else images.new_zeros((0, captions.shape[0]))


SCORES = ("cosine", "similarity_network")


def build_scorer(name: str, embed_dim: int, hidden_dims=(512, 256)) -> nn.Module:
    """``MODEL.RETRIEVAL.SCORE``: ``"cosine"`` or ``"similarity_network"``."""
    if name == "cosine":
        return DotProductScorer()
    if name == "similarity_network":
        return SimilarityNetwork(embed_dim, hidden_dims)
    raise ValueError(f"MODEL.RETRIEVAL.SCORE must be one of {SCORES}, got {name!r}")
