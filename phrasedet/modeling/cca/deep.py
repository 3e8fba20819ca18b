"""Deep CCA (paper 003 Sec. 3.3.3, after Andrew et al. 2013): a correlation loss trains one FC
layer per view on frozen features, then linear CCA
(:func:`phrasedet.modeling.cca.linear.fit_cca_paired`) learns the final transform on the FC outputs
of all pairs.

The loss is minus the total canonical correlation of a minibatch: the sum of the (top-k) singular
values of T = S11^-1/2 S12 S22^-1/2, with centered covariances / (N - 1) and ``ridge`` I on S11 and
S22 (Andrew et al.; the released CCA code's normalization). Whitening with the inverse Cholesky
factor L^-1 (S = L L^T) instead of S^-1/2 gives the same singular values (L^-1 = Q S^-1/2 with Q
orthogonal) and a stable gradient: the gradient of S^-1/2 through ``eigh`` divides by eigenvalue
gaps, which vanish when a batch has fewer rows than dimensions (the ridge floor repeats). The
singular values come from ``eigvalsh`` of T^T T (or T T^T, the smaller), whose gradient is
V diag(g) V^T, free of gaps too.

Each view's layer is ``sigmoid(W standardize(x) + b)``: one FC layer as the paper, with Andrew et
al.'s (and VahidooX/DeepCCA's) sigmoid; without a nonlinearity FC + CCA would be linear CCA again.
Inputs are standardized with the training pairs' per-dimension mean and std (frozen), so Adam
starts every unit in the sigmoid's near-linear range whatever the feature scales.
"""
import logging
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .linear import CCAProjection, fit_cca_paired

__all__ = ["DeepCCAProjector", "cca_correlation_loss", "deep_cca_layer", "paired_correlations", "train_deep_cca"]

logger = logging.getLogger(__name__)

# Eigenvalues of T^T T (squared correlations) below this count as 0: sqrt has no gradient at 0.
_EPS = 1e-12


def _covariance(a, b, n):
    return a.T @ b / (n - 1)


def cca_correlation_loss(h1, h2, ridge: float = 1e-4, k: int | None = None):
    """Minus the total canonical correlation of paired rows (Andrew et al.'s Deep CCA objective).

    Args:
        h1: [N, d1], h2: [N, d2] (N >= 2); computed in float64, returned in ``h1``'s dtype.
        ridge: added to the diagonals of S11 and S22.
        k: sum only the k largest correlations; None = all (the trace norm of T).

    Returns:
        a scalar: -sum of the top-k singular values of S11^-1/2 S12 S22^-1/2.
    """
    if h1.ndim != 2 or h2.ndim != 2 or len(h1) != len(h2) or len(h1) < 2:
        raise ValueError(f"cca_correlation_loss needs paired rows [N, d1], [N, d2] with N >= 2, got {tuple(h1.shape)} and {tuple(h2.shape)}")
    n = len(h1)
    x, y = h1.double(), h2.double()
    x, y = x - x.mean(0), y - y.mean(0)
    s11, s22 = _covariance(x, x, n), _covariance(y, y, n)
    s11.diagonal().add_(ridge)  # in place: no identity matrix to build (and to put on the right device)
    s22.diagonal().add_(ridge)
    l1, info1 = torch.linalg.cholesky_ex(s11)
    l2, info2 = torch.linalg.cholesky_ex(s22)
    if info1.item() or info2.item():
        raise ValueError("cca_correlation_loss: a covariance is not positive definite (non-finite features, or raise the ridge)")
    # T' = L1^-1 S12 L2^-T: the singular values of T
    t = torch.linalg.solve_triangular(l1, _covariance(x, y, n), upper=False)
    t = torch.linalg.solve_triangular(l2, t.T, upper=False).T
    m = t.T @ t if t.shape[1] <= t.shape[0] else t @ t.T
    correlations = torch.linalg.eigvalsh(m).clamp_min(_EPS).sqrt()  # ascending
    if k is not None:
        correlations = correlations[-k:]
    return (-correlations.sum()).to(h1.dtype)


def deep_cca_layer(x, mean, std, weight, bias):
    """One view's Deep CCA layer: sigmoid(((x - mean) / std) W^T + b).

    Args:
        x: [N, D]; mean, std: [D]; weight: [E, D]; bias: [E]. Returns [N, E].
    """
    return torch.sigmoid(torch.nn.functional.linear((x - mean) / std, weight, bias))


def paired_correlations(a, b):
    """Pearson correlation of each column pair: a, b [N, k] -> [k] (numpy); a constant column
    gives 0. The held-out canonical correlations of projections fitted on other pairs."""
    a = np.asarray(a, dtype=np.float64) - np.mean(a, 0)
    b = np.asarray(b, dtype=np.float64) - np.mean(b, 0)
    norm = np.sqrt((a * a).sum(0) * (b * b).sum(0))
    return np.where(norm > 0, (a * b).sum(0) / np.where(norm > 0, norm, 1.0), 0.0)


@dataclass
class DeepCCAProjector:
    """A fitted Deep CCA: per view a layer (:func:`deep_cca_layer`), then the linear ``cca``.

    Attributes (numpy, float): region_mean, region_std [D_r], region_weight [E, D_r],
    region_bias [E]; phrase_mean, phrase_std [D_t], phrase_weight [E, D_t], phrase_bias [E];
    cca: a :class:`CCAProjection` of E-d inputs.
    """

    region_mean: np.ndarray
    region_std: np.ndarray
    region_weight: np.ndarray
    region_bias: np.ndarray
    phrase_mean: np.ndarray
    phrase_std: np.ndarray
    phrase_weight: np.ndarray
    phrase_bias: np.ndarray
    cca: CCAProjection

    LAYER_FIELDS = ("mean", "std", "weight", "bias")

    def layer(self, side: str):
        """The arrays of ``side`` ("region" or "phrase"), in :func:`deep_cca_layer`'s order."""
        return [getattr(self, f"{side}_{name}") for name in self.LAYER_FIELDS]

    def features(self, x, side: str) -> np.ndarray:
        """[N, D] -> the layer's outputs [N, E] (float64)."""
        params = [torch.as_tensor(v, dtype=torch.float64) for v in self.layer(side)]
        with torch.no_grad():
            return deep_cca_layer(torch.as_tensor(np.asarray(x), dtype=torch.float64), *params).numpy()

    def project_regions(self, x) -> np.ndarray:
        """[N, D_r] -> [N, k]."""
        return self.cca.project_regions(self.features(x, "region"))

    def project_phrases(self, y) -> np.ndarray:
        """[N, D_t] -> [N, k]."""
        return self.cca.project_phrases(self.features(y, "phrase"))


class _View(nn.Module):
    """One view's trainable layer, standardized by ``data``'s statistics."""

    def __init__(self, data: torch.Tensor, out_dim: int):
        super().__init__()
        self.register_buffer("mean", data.mean(0))
        std = data.std(0)
        self.register_buffer("std", torch.where(std > 0, std, torch.ones_like(std)))  # a constant input stays 0
        self.fc = nn.Linear(data.shape[1], out_dim)

    def forward(self, x):
        return deep_cca_layer(x, self.mean, self.std, self.fc.weight, self.fc.bias)

    def arrays(self):
        return [v.detach().double().numpy() for v in (self.mean, self.std, self.fc.weight, self.fc.bias)]


def train_deep_cca(regions, phrases, out_dim: int, batch_size: int, iters: int, lr: float, ridge: float = 1e-4,
                   seed: int | None = 0, cca_dim: int | None = None, power: float = 1.0, log_period: int = 100) -> DeepCCAProjector:
    """Train Deep CCA's FC layers on paired rows, then fit linear CCA on their outputs.

    Args:
        regions: [N, D_r]; phrases: [N, D_t], row i of each is pair i (CPU, float32 training).
        out_dim: E, each layer's output size.
        batch_size: pairs per Adam step, drawn without replacement within an epoch; the full set
            (one batch, the same every step) when >= N.
        iters: Adam steps; lr: its learning rate.
        ridge: on the loss's and the final CCA's covariance diagonals.
        seed: initialization and batch order (None or < 0: not seeded).
        cca_dim, power: the final linear CCA's k (default E) and scaling power (see ``fit_cca``).

    Raises:
        ValueError: for fewer than 2 pairs, unpaired rows, non-finite inputs, batch_size < 2, or a
            loss that stops being finite (naming the step: lower LR or raise BATCH_SIZE / RIDGE).
    """
    x = torch.as_tensor(np.asarray(regions), dtype=torch.float32)
    y = torch.as_tensor(np.asarray(phrases), dtype=torch.float32)
    n = len(x)
    if x.ndim != 2 or y.ndim != 2 or len(y) != n or n < 2:
        raise ValueError(f"Deep CCA needs paired rows regions [N, D_r], phrases [N, D_t] with N >= 2, got {tuple(x.shape)} and {tuple(y.shape)}")
    for name, v in (("regions", x), ("phrases", y)):
        if not torch.isfinite(v).all():
            raise ValueError(f"Deep CCA: {name} hold values that are not finite")
    if batch_size < 2:
        raise ValueError(f"Deep CCA's batch size must be >= 2 (covariances), got {batch_size}")
    generator = torch.Generator()
    if seed is not None and seed >= 0:
        generator.manual_seed(seed)
    else:
        generator.seed()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(torch.randint(2**31, (1,), generator=generator)))
        views = nn.ModuleList([_View(x, out_dim), _View(y, out_dim)])
    optimizer = torch.optim.Adam(views.parameters(), lr=lr)
    batch = min(batch_size, n)
    order, start = torch.randperm(n, generator=generator), 0
    for step in range(iters):
        if batch < n:
            if start + batch > n:
                order, start = torch.randperm(n, generator=generator), 0
            rows, start = order[start:start + batch], start + batch
            xb, yb = x[rows], y[rows]
        else:
            xb, yb = x, y
        try:
            loss = cca_correlation_loss(views[0](xb), views[1](yb), ridge)
        except ValueError as e:
            raise ValueError(f"Deep CCA step {step + 1} (batch {batch}, lr {lr}): {e}") from None
        if not torch.isfinite(loss):
            raise ValueError(f"Deep CCA: the correlation loss is {loss.item()} at step {step + 1} (batch {batch}, lr {lr}): "
                             "lower LR or raise BATCH_SIZE / RIDGE")
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if log_period and ((step + 1) % log_period == 0 or step == 0):
            logger.info("Deep CCA step %d/%d: total correlation of the batch %.3f (of %d)", step + 1, iters, -loss.item(), out_dim)
    with torch.no_grad():
        hx, hy = views[0](x).double().numpy(), views[1](y).double().numpy()
    cca = fit_cca_paired(hx, hy, cca_dim, ridge, power)
    return DeepCCAProjector(*views[0].arrays(), *views[1].arrays(), cca)
