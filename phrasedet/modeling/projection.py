"""Projections into the joint image-text space: VSE++'s linear layer or paper 000's two-layer branch."""
from torch import nn

from .two_branch import TwoLayerBranch

__all__ = ["PROJECTIONS", "build_projection", "xavier_linear"]

PROJECTIONS = ("linear", "two_layer")


def xavier_linear(in_dim: int, out_dim: int) -> nn.Linear:
    """A linear layer with Xavier-uniform weights and zero bias (VSE++'s initialization)."""
    layer = nn.Linear(in_dim, out_dim)
    nn.init.xavier_uniform_(layer.weight)
    nn.init.zeros_(layer.bias)
    return layer


def build_projection(kind: str, in_dim: int, cfg) -> nn.Module:
    """[N, in_dim] -> [N, MODEL.RETRIEVAL.EMBED_DIM]: ``"linear"`` or ``"two_layer"``
    (FC -> [BN] -> ReLU -> [Dropout] -> FC with ``MODEL.RETRIEVAL.BRANCH``)."""
    r = cfg.MODEL.RETRIEVAL
    if kind == "linear":
        return xavier_linear(in_dim, r.EMBED_DIM)
    if kind == "two_layer":
        b = r.BRANCH
        return TwoLayerBranch(in_dim, b.HIDDEN_DIM, r.EMBED_DIM, batch_norm=b.BATCH_NORM, dropout=b.DROPOUT)
    raise ValueError(f"projection must be one of {PROJECTIONS}, got {kind!r}")
