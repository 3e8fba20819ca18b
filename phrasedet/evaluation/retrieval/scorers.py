"""The score matrix of a scorer, computed block by block, and the ground-truth scores.

A scorer is any object with

* ``pairwise(images [n, D], captions [m, D]) -> Tensor[n, m]``: the score of every image with
  every caption;
* ``paired(images [k, D], captions [k, D]) -> Tensor[k]``: the score of row i with row i.

Higher is more similar. The scorers are the model's (``phrasedet.modeling.scorers``, one class
for training and evaluation): :class:`DotProductScorer` (the cosine of L2-normalized embeddings)
and paper 000's ``SimilarityNetwork``. Inputs are CPU float32 tensors; a scorer that lives on a
GPU moves them there itself and may return its scores on the GPU (they are copied back for
counting). The metric code never assumes dot products.
"""
from typing import Iterator, Tuple

import numpy as np
import torch

from phrasedet.modeling.scorers import DotProductScorer

__all__ = ["DotProductScorer", "as_embeddings", "paired_scores", "score_blocks"]

# Captions scored per ``paired`` call. A constant, so the ground-truth scores (and the ranks that
# compare against them) do not depend on ``chunk_size``.
_PAIRED_ROWS = 1024


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
    ``(images[caption_to_image], captions)``, in fixed blocks of captions, written into one array
    (a list of small parts would pin glibc's heap and keep every block's temporaries resident)."""
    index = torch.as_tensor(np.asarray(caption_to_image, dtype=np.int64))
    out = np.zeros(captions.shape[0], np.float32)
    for start in range(0, captions.shape[0], _PAIRED_ROWS):
        rows = captions[start:start + _PAIRED_ROWS]
        part = _to_numpy(scorer.paired(images[index[start:start + _PAIRED_ROWS]], rows),
                         f"{type(scorer).__name__}.paired", (rows.shape[0],))
        if part.dtype != out.dtype:
            out = out.astype(np.result_type(out.dtype, part.dtype))
        out[start:start + len(part)] = part
    return out
