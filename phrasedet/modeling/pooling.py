"""Global pooling of a feature map into one vector per image: average, max and WELDON.

WELDON (Durand et al.; paper 004's DSVE-loc) keeps, per channel, the mean of the ``k_max`` largest
and the mean of the ``k_min`` smallest activations over all positions and adds them: with
``k_max = k_min = 1`` it is max + min (paper 004), with 15 and 15 the released DSVE-loc code.
"""
import torch
from torch import nn

__all__ = ["GlobalAvgPool", "GlobalMaxPool", "WeldonPool", "POOLINGS", "build_global_pooling"]


class GlobalAvgPool(nn.Module):
    """[B, C, H, W] -> [B, C]: the mean over positions."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(2, 3))


class GlobalMaxPool(nn.Module):
    """[B, C, H, W] -> [B, C]: the maximum over positions."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.amax(dim=(2, 3))


class WeldonPool(nn.Module):
    """[B, C, H, W] -> [B, C]: mean of the ``k_max`` largest + mean of the ``k_min`` smallest
    activations of each channel (``k_min = 0`` leaves out the second term). ``k`` larger than
    H * W uses every position."""

    def __init__(self, k_max: int = 1, k_min: int = 1):
        super().__init__()
        if k_max < 1 or k_min < 0:
            raise ValueError(f"WELDON pooling needs k_max >= 1 and k_min >= 0, got {k_max} and {k_min}")
        self.k_max, self.k_min = int(k_max), int(k_min)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.flatten(2)  # [B, C, H*W]
        n = flat.shape[2]
        out = flat.topk(min(self.k_max, n), dim=2).values.mean(dim=2)
        if self.k_min:
            out = out + flat.topk(min(self.k_min, n), dim=2, largest=False).values.mean(dim=2)
        return out

    def extra_repr(self) -> str:
        return f"k_max={self.k_max}, k_min={self.k_min}"


POOLINGS = ("avg", "max", "weldon")


def build_global_pooling(name: str, k_max: int = 1, k_min: int = 1) -> nn.Module:
    """The pooling called ``name`` (one of ``POOLINGS``); ``k_max`` / ``k_min`` for WELDON."""
    if name == "avg":
        return GlobalAvgPool()
    if name == "max":
        return GlobalMaxPool()
    if name == "weldon":
        return WeldonPool(k_max, k_min)
    raise ValueError(f"pooling must be one of {POOLINGS}, got {name!r}")
