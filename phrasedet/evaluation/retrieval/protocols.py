"""Evaluation protocols: the whole test split (``folds=1``) and F folds of consecutive images.

With F > 1 the N images are cut into F folds of N / F consecutive images (dataset order); each
fold is evaluated against its own images and captions only, and every metric (medr and meanr
included) is averaged over the folds, as VSE++'s COCO 1K numbers (5 folds of the 5K test split;
fractional medians such as 1.8 are expected). All protocols are counted in **one pass** over the
full N x M score matrix: a fold reads its diagonal sub-block of each row block, so the numbers of
every protocol come from the same scores (those a saved scores file holds).
"""
from typing import Callable, Dict, Iterable, Optional, Sequence, Tuple

import numpy as np

from .metrics import average_metrics, recall_metrics
from .ranks import RankCounter, check_embeddings, check_similarity, similarity_blocks
from .scorers import DotProductScorer, paired_scores, score_blocks

__all__ = ["check_folds", "evaluate_blocks", "evaluate_retrieval", "evaluate_similarity", "result_key"]


def result_key(folds: int) -> str:
    """``"retrieval"`` for the whole split, ``"retrieval_<F>fold"`` for F folds."""
    return "retrieval" if folds == 1 else f"retrieval_{folds}fold"


def check_folds(folds, num_images: int) -> Tuple[int, ...]:
    """``folds`` (an int or a sequence of ints) as distinct fold counts, in order; ValueError when
    one is < 1 or does not divide ``num_images``."""
    folds = (folds,) if isinstance(folds, (int, np.integer)) else tuple(folds)
    if not folds:
        raise ValueError("folds is empty: give at least one protocol (1 = the whole test split)")
    out = []
    for f in folds:
        if isinstance(f, bool) or not isinstance(f, (int, np.integer)) or f < 1:
            raise ValueError(f"folds must be integers >= 1, got {f!r}")
        if num_images % f:
            raise ValueError(f"{num_images} test images do not split into {f} folds of equal size "
                             f"({num_images} is not a multiple of {f})")
        if int(f) not in out:
            out.append(int(f))
    return tuple(out)


def _columns(mask: np.ndarray):
    """Indices where ``mask`` holds, as a slice when they are consecutive (a view, not a copy)."""
    cols = np.flatnonzero(mask)
    if len(cols) == 0:
        return slice(0, 0)
    if cols[-1] - cols[0] + 1 == len(cols):
        return slice(int(cols[0]), int(cols[-1]) + 1)
    return cols


class _Fold:
    """One evaluated set: images ``[first, end)`` and their captions, counted from full-row blocks."""

    def __init__(self, first: int, end: int, caption_to_image: np.ndarray, gt_scores: np.ndarray):
        self.first, self.end = first, end
        self.cols = _columns((caption_to_image >= first) & (caption_to_image < end))
        self.counter = RankCounter(caption_to_image[self.cols] - first, end - first, gt_scores[self.cols])

    def add(self, first_row: int, scores: np.ndarray) -> None:
        """Count the part of block ``scores [b, M]`` (rows from ``first_row``) inside this fold."""
        r0, r1 = max(first_row, self.first), min(first_row + scores.shape[0], self.end)
        if r0 < r1:
            self.counter.add(r0 - self.first, scores[r0 - first_row:r1 - first_row, self.cols])


def evaluate_blocks(blocks: Iterable[Tuple[int, np.ndarray]], caption_to_image: np.ndarray, num_images: int,
                    gt_scores: np.ndarray, folds=(1,)) -> Dict[str, Dict[str, float]]:
    """Metrics of every protocol in ``folds`` from one pass over ``(first_row, scores [b, M])``
    blocks covering the matrix in row order; ``{result_key(F): metrics}``."""
    folds = check_folds(folds, num_images)
    sets = {F: [_Fold(f * (num_images // F), (f + 1) * (num_images // F), caption_to_image, gt_scores)
                for f in range(F)] for F in folds}
    for first_row, scores in blocks:
        for fold_sets in sets.values():
            for s in fold_sets:
                s.add(first_row, scores)
        del scores  # one block alive at a time: freed before the next is scored
    return {result_key(F): average_metrics([recall_metrics(*s.counter.ranks()) for s in fold_sets])
            for F, fold_sets in sets.items()}


def _tee(blocks, sink: Optional[Callable[[int, np.ndarray], None]]):
    for first_row, scores in blocks:
        if sink is not None:
            sink(first_row, scores)
        yield first_row, scores
        del scores


def evaluate_retrieval(images, captions, caption_to_image, folds: Sequence[int] = (1,), scorer=None,
                       chunk_size: int = 1024, score_sink=None) -> Dict[str, Dict[str, float]]:
    """Retrieval metrics of embeddings under ``scorer`` (default :class:`DotProductScorer`).

    Parameters
    ----------
    images : [N, D], captions : [M, D]
        Embeddings in dataset order (tensors or arrays; used as float32).
    caption_to_image : int [M]
        Image of each caption.
    folds : int or sequence of int
        Protocols: 1 = all images; F > 1 = F folds of N / F consecutive images, averaged.
    scorer : object with ``pairwise`` and ``paired`` (``scorers.py``)
    chunk_size : int
        Images scored at a time (memory: ``chunk_size x M`` scores).
    score_sink : callable ``(first_row, scores [b, M])``, optional
        Receives every block of the full score matrix (e.g. to save it in the same pass).

    Returns
    -------
    ``{"retrieval": metrics}`` for F = 1, ``{"retrieval_<F>fold": metrics}`` for F > 1, where
    metrics is :func:`recall_metrics`'s flat dict of floats.
    """
    images, captions, c2i = check_embeddings(images, captions, caption_to_image)
    check_folds(folds, images.shape[0])  # before any scoring
    scorer = scorer or DotProductScorer()
    blocks = _tee(score_blocks(images, captions, scorer, chunk_size), score_sink)
    return evaluate_blocks(blocks, c2i, images.shape[0], paired_scores(images, captions, c2i, scorer), folds)


def evaluate_similarity(similarity, caption_to_image, folds: Sequence[int] = (1,), chunk_size: int = 1024,
                        gt_scores=None) -> Dict[str, Dict[str, float]]:
    """:func:`evaluate_retrieval` on a given score matrix ``similarity [N, M]``; ``gt_scores [M]``
    are the text -> image ground-truth scores (default: the matrix entries)."""
    similarity, c2i, gt_scores = check_similarity(similarity, caption_to_image, gt_scores)
    return evaluate_blocks(similarity_blocks(similarity, chunk_size), c2i, similarity.shape[0], gt_scores, folds)
