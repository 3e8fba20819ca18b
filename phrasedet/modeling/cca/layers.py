"""CCA-initialized fully connected layers (paper 003 Sec. 4.1, Eq. 4 and 5).

A layer computes

    h(x) = ((x - mu) @ W + b) * sigma          (scale_bias=True, the released code, default)
    h(x) = ((x - mu) @ W) * sigma + b          (scale_bias=False, the paper's Eq. 4)

with mu [D_in] (the training-set input mean) and sigma [D_out] (the normalized-CCA scaling, the
top canonical correlations) frozen buffers, and W [D_in, D_out] (initialized from the CCA
projection of that view) and b [D_out] (initialized to 0) trained. Before training the layer
reproduces the CCA projection ``((x - mean) @ A) * scale`` exactly.

The regularizer against forgetting the CCA solution (Eq. 5) is

    0.5 * l2_weight * ||W - W_init||_F^2 + l1_bias_weight * ||b||_1

The paper writes lambda_2 ||W^ - W|| without saying whether it is squared; the released code
uses TensorFlow's ``l2_loss`` (half the squared Frobenius norm, lambda_2 = 5e-5) and an L1 on the
biases weighted by WEIGHT_DECAY (1e-4) in the in-network Embedding classifier (the external CITE
code has none). Its gradient is l2_weight * (W - W_init) + l1_bias_weight * sign(b); it is zero
at initialization.
"""
import math

import numpy as np
import torch
from torch import nn

__all__ = ["CCAInitLinear"]


def _as_tensor(x):
    return torch.as_tensor(np.asarray(x) if not torch.is_tensor(x) else x, dtype=torch.float32).detach().clone()


class CCAInitLinear(nn.Module):
    """h(x) = ((x - mu) @ W + b) * sigma; see the module docstring.

    Args:
        mean: mu [D_in] (frozen).
        weight: W [D_in, D_out] (trained; its initial value is kept as the buffer ``weight_init``).
        scale: sigma [D_out] (frozen).
        scale_bias: True (code): sigma multiplies the bias too; False (paper Eq. 4): it does not.
        cca_initialized: whether W comes from a CCA (classifiers add :meth:`regularizer` only then).
    """

    def __init__(self, mean, weight, scale, scale_bias: bool = True, cca_initialized: bool = True):
        super().__init__()
        weight = _as_tensor(weight)
        if weight.dim() != 2:
            raise ValueError(f"weight must be [D_in, D_out], got {tuple(weight.shape)}")
        d_in, d_out = weight.shape
        mean, scale = _as_tensor(mean).reshape(-1), _as_tensor(scale).reshape(-1)
        if mean.numel() != d_in or scale.numel() != d_out:
            raise ValueError(f"mean {tuple(mean.shape)} / scale {tuple(scale.shape)} do not match weight [{d_in}, {d_out}]")
        self.weight = nn.Parameter(weight)
        self.bias = nn.Parameter(torch.zeros(d_out))
        self.register_buffer("mean", mean)
        self.register_buffer("scale", scale)
        self.register_buffer("weight_init", weight.clone())
        self.scale_bias = scale_bias
        # a buffer, so a checkpoint restores it (the regularizer applies to CCA-initialized layers only)
        self.register_buffer("cca_flag", torch.tensor(bool(cca_initialized)))

    @property
    def cca_initialized(self) -> bool:
        return bool(self.cca_flag)

    @classmethod
    def from_projection(cls, mean, A, scale, scale_bias: bool = True):
        """One side of a fitted CCA (``CCAProjection``: mean_x, A, scale or mean_y, B, scale)."""
        return cls(mean, A, scale, scale_bias=scale_bias, cca_initialized=True)

    @classmethod
    def random(cls, in_dim: int, out_dim: int, scale_bias: bool = True):
        """An ordinary linear layer: mu = 0, sigma = 1, W like ``nn.Linear`` (uniform +-1/sqrt(D_in)), b = 0."""
        bound = 1.0 / math.sqrt(in_dim)
        weight = torch.empty(in_dim, out_dim).uniform_(-bound, bound)
        return cls(torch.zeros(in_dim), weight, torch.ones(out_dim), scale_bias=scale_bias, cca_initialized=False)

    @property
    def in_features(self) -> int:
        return self.weight.shape[0]

    @property
    def out_features(self) -> int:
        return self.weight.shape[1]

    def forward(self, x):
        """[..., D_in] -> [..., D_out]."""
        y = (x - self.mean) @ self.weight
        if self.scale_bias:
            return (y + self.bias) * self.scale
        return y * self.scale + self.bias

    def regularizer(self, l2_weight: float = 5e-5, l1_bias_weight: float = 0.0):
        """0.5 * l2_weight * ||W - W_init||_F^2 + l1_bias_weight * ||b||_1 (a scalar tensor)."""
        return 0.5 * l2_weight * (self.weight - self.weight_init).pow(2).sum() + l1_bias_weight * self.bias.abs().sum()

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, scale_bias={self.scale_bias}, cca_initialized={self.cca_initialized}"
