"""Scorers (image-caption similarity) and the score matrix computed block by block.

A scorer is any object with

* ``pairwise(images [n, D], captions [m, D]) -> Tensor[n, m]``: the score of every image with
  every caption;
* ``paired(images [k, D], captions [k, D]) -> Tensor[k]``: the score of row i with row i.

Higher is more similar. Inputs are CPU float32 tensors; a scorer that lives on a GPU moves them
there itself and may return its scores on the GPU (they are copied back for counting). The metric
code never assumes dot products: only :class:`DotProductScorer` does.
"""
from typing import Iterator, Tuple

import numpy as np
import torch

__all__ = ["DotProductScorer", "as_embeddings", "paired_scores", "score_blocks"]

# Captions scored per ``paired`` call. A constant, so the ground-truth scores (and the ranks that
# compare against them) do not depend on ``chunk_size``.
_PAIRED_ROWS = 1024


class DotProductScorer:
    """``score(i, j) = <image_i, caption_j>``: the cosine similarity of L2-normalized embeddings."""

    def pairwise(self, images: torch.Tensor, captions: torch.Tensor) -> torch.Tensor:
        """images [n, D], captions [m, D] -> scores [n, m]."""
        return images @ captions.T

    def paired(self, images: torch.Tensor, captions: torch.Tensor) -> torch.Tensor:
        """images [k, D], captions [k, D] -> scores [k] (row i with row i)."""
        return torch.einsum("kd,kd->k", images, captions)  # no [k, D] product temporary

    def __repr__(self):
        return "DotProductScorer()"


def as_embeddings(x, name: str) -> torch.Tensor:
    """``x`` (array or tensor) as a float32 CPU tensor [rows, D]; ValueError naming ``name`` otherwise."""
    t = torch.as_tensor(x).detach().to("cpu", torch.float32)
    if t.dim() != 2:
        raise ValueError(f"{name} must be a matrix [rows, D], got shape {tuple(t.shape)}")
    return t


def _to_numpy(scores, what: str, shape: tuple) -> np.ndarray:
    """A scorer's output as a CPU numpy array of ``shape``, floating point."""
    s = scores.detach().cpu().numpy() if isinstance(scores, torch.Tensor) else np.asarray(scores)
    if s.shape != shape:
        raise ValueError(f"{what} returned scores of shape {s.shape}, expected {shape}")
    return s if np.issubdtype(s.dtype, np.floating) else s.astype(np.float64)


def score_blocks(images: torch.Tensor, captions: torch.Tensor, scorer,
                 chunk_size: int) -> Iterator[Tuple[int, np.ndarray]]:
    """Yield ``(first_row, scores [b, M])`` for consecutive blocks of at most ``chunk_size`` images
    against all M captions, in row order (numpy, on the CPU). Memory: one block at a time."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    num_images, num_captions = images.shape[0], captions.shape[0]
    for start in range(0, num_images, chunk_size):
        rows = images[start:start + chunk_size]
        yield start, _to_numpy(scorer.pairwise(rows, captions), f"{type(scorer).__name__}.pairwise",
                               (rows.shape[0], num_captions))


def paired_scores(images: torch.Tensor, captions: torch.Tensor, caption_to_image: np.ndarray, scorer) -> np.ndarray:
    """Ground-truth score of every caption with its own image [M]: ``scorer.paired`` on
    ``(images[caption_to_image], captions)``, in fixed blocks of captions."""
    index = torch.as_tensor(np.asarray(caption_to_image, dtype=np.int64))
    parts = []
    for start in range(0, captions.shape[0], _PAIRED_ROWS):
        rows = captions[start:start + _PAIRED_ROWS]
        parts.append(_to_numpy(scorer.paired(images[index[start:start + _PAIRED_ROWS]], rows),
                               f"{type(scorer).__name__}.paired", (rows.shape[0],)))
    return np.concatenate(parts) if parts else np.zeros(0, np.float32)
