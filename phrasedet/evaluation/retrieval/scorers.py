"""The score matrix of a scorer, computed block by block, and the ground-truth scores.

A scorer is any object with

* ``pairwise(images [n, D], captions [m, D]) -> Tensor[n, m]``: the score of every image with
  every caption;
* ``paired(images [k, D], captions [k, D]) -> Tensor[k]``: the score of row i with row i.

Higher is more similar. The scorers are the model's (``phrasedet.modeling.scorers``, one class
for training and evaluation): :class:`DotProductScorer` (the cosine of L2-normalized embeddings)
and paper 000's ``SimilarityNetwork``. Embeddings are moved to the device of the scorer's
parameters (the CPU for a scorer without any) and scored without autograd; scores come back to
the CPU for counting. The metric code never assumes dot products.
"""
from typing import Iterator, Tuple

import numpy as np
import torch

from phrasedet.modeling.scorers import DotProductScorer

__all__ = ["DotProductScorer", "as_embeddings", "paired_scores", "score_blocks", "scorer_device"]

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


def scorer_device(scorer) -> torch.device:
    """Where a scorer computes: the device of its first parameter (an ``nn.Module`` such as the
    similarity network, on the model's device), else the CPU."""
    parameters = getattr(scorer, "parameters", None)
    for p in parameters() if callable(parameters) else ():
        return p.device
    return torch.device("cpu")


def score_blocks(images: torch.Tensor, captions: torch.Tensor, scorer,
                 chunk_size: int) -> Iterator[Tuple[int, np.ndarray]]:
    """Yield ``(first_row, scores [b, M])`` for consecutive blocks of at most ``chunk_size`` images
    against all M captions, in row order (numpy, on the CPU). Embeddings go to the scorer's device
    (:func:`scorer_device`); scores are computed without autograd. Memory: one block at a time."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    device = scorer_device(scorer)
    num_images, captions = images.shape[0], captions.to(device)
    for start in range(0, num_images, chunk_size):
        rows = images[start:start + chunk_size].to(device)
        with torch.no_grad():  # not around the yield: grad mode would stay off in the caller
            scores = scorer.pairwise(rows, captions)
        scores = _to_numpy(scores, f"{type(scorer).__name__}.pairwise", (rows.shape[0], captions.shape[0]))
        yield start, scores
        del scores  # one block alive at a time: freed before the next is scored


def paired_scores(images: torch.Tensor, captions: torch.Tensor, caption_to_image: np.ndarray, scorer) -> np.ndarray:
    """Ground-truth score of every caption with its own image [M]: ``scorer.paired`` on
    ``(images[caption_to_image], captions)``, in fixed blocks of captions, on the scorer's device
    and without autograd, written into one array (a list of small parts would pin glibc's heap and
    keep every block's temporaries resident)."""
    device = scorer_device(scorer)
    index = torch.as_tensor(np.asarray(caption_to_image, dtype=np.int64))
    out = np.zeros(captions.shape[0], np.float32)
    for start in range(0, captions.shape[0], _PAIRED_ROWS):
        rows = captions[start:start + _PAIRED_ROWS]
        with torch.no_grad():
            part = scorer.paired(images[index[start:start + _PAIRED_ROWS]].to(device), rows.to(device))
        part = _to_numpy(part, f"{type(scorer).__name__}.paired", (rows.shape[0],))
        if part.dtype != out.dtype:
            out = out.astype(np.result_type(out.dtype, part.dtype))
        out[start:start + len(part)] = part
    return out
