"""Ranks of the ground truth in image-sentence retrieval, counted block by block of image rows.

* **Image -> text** (caption retrieval): an image with captions is a query. Its rank is the rank of
  its best-ranked own caption among all captions of the evaluated set: 1 + the number of *other
  images'* captions scoring >= its best own caption's score. Captions of the same image do not
  count against each other. An image without captions is in the gallery but is no query.
* **Text -> image** (image retrieval): every caption is a query. Its rank is 1 + the number of
  other images scoring >= its own image. The ground-truth score is given per caption
  (``scorer.paired`` or the matrix entry), and the own image's entry is excluded by index, so a
  rounding difference between the two can never count the ground truth against itself.
* **Ties** are pessimistic: a gallery item scoring exactly the ground truth's score ranks ahead of
  it, so a constant model gets the worst ranks, never the best. A NaN score counts as a tie (ahead
  of the ground truth); a NaN ground-truth score gives its query the worst rank.

Both directions come from one pass over the score matrix; ranks are exact integers of the scores,
so they do not depend on the blocking. Memory: one block of ``chunk_size`` rows at a time.
"""
import logging
from typing import Iterable, Optional, Tuple

import numpy as np

from .scorers import DotProductScorer, as_embeddings, paired_scores, score_blocks

__all__ = ["RankCounter", "check_caption_to_image", "ranks_from_similarity", "retrieval_ranks",
           "similarity_blocks"]

logger = logging.getLogger(__name__)


def check_caption_to_image(caption_to_image, num_images: int, num_captions: Optional[int] = None) -> np.ndarray:
    """``caption_to_image`` as int64 [M] with values in [0, num_images); ValueError otherwise."""
    c2i = np.asarray(caption_to_image)
    if c2i.ndim != 1 or not (np.issubdtype(c2i.dtype, np.integer) or c2i.size == 0):
        raise ValueError(f"caption_to_image must be a 1-D integer array, got dtype {c2i.dtype} and shape {c2i.shape}")
    if num_captions is not None and len(c2i) != num_captions:
        raise ValueError(f"caption_to_image has {len(c2i)} entries for {num_captions} captions")
    c2i = c2i.astype(np.int64)
    if len(c2i) and (c2i.min() < 0 or c2i.max() >= num_images):
        raise ValueError(f"caption_to_image values must lie in [0, {num_images}) (the number of images), "
                         f"got values from {c2i.min()} to {c2i.max()}")
    return c2i


class RankCounter:
    """Counts, from blocks of consecutive image rows of the score matrix [N, M], the gallery items
    ranked ahead of each query's ground truth (module docstring), then gives the ranks.

    Parameters
    ----------
    caption_to_image : int64 [M]
        Image (row) of each caption (column).
    num_images : int
        N.
    gt_scores : float [M]
        Score of each caption with its own image (the text -> image threshold).
    """

    def __init__(self, caption_to_image: np.ndarray, num_images: int, gt_scores: np.ndarray):
        self._c2i = caption_to_image
        self._gt = np.asarray(gt_scores)
        self._order = np.argsort(caption_to_image, kind="stable")  # captions grouped by image
        self._starts = np.searchsorted(caption_to_image[self._order], np.arange(num_images + 1))
        self._i2t_ahead = np.zeros(num_images, np.int64)
        self._t2i_ahead = np.zeros(len(caption_to_image), np.int64)
        self._next_row = 0
        if np.isnan(self._gt).any():
            logger.warning("%d ground-truth scores are NaN: those caption queries get the worst rank",
                           int(np.isnan(self._gt).sum()))

    def add(self, first_row: int, scores: np.ndarray) -> None:
        """Count the block ``scores [b, M]`` of image rows ``first_row .. first_row + b - 1``
        (blocks must come in row order, each row once)."""
        if first_row != self._next_row:
            raise ValueError(f"score blocks must come in row order: expected row {self._next_row}, got {first_row}")
        b, num_captions = scores.shape
        self._next_row += b
        cols = self._order[self._starts[first_row]:self._starts[first_row + b]]
        rows = self._c2i[cols] - first_row
        own = scores[rows, cols]
        # image -> text: captions scoring >= the best own caption, minus the own captions among them
        best = np.full(b, -np.inf, dtype=np.result_type(scores.dtype, np.float32))
        with np.errstate(invalid="ignore"):
            np.maximum.at(best, rows, own)  # NaN propagates: a NaN own score gives the worst rank
        not_ahead = np.count_nonzero(scores < best[:, None], axis=1)
        own_ahead = np.bincount(rows[~(own < best[rows])], minlength=b)
        self._i2t_ahead[first_row:first_row + b] = num_captions - not_ahead - own_ahead
        # text -> image: this block's images scoring >= each caption's ground truth, but its own image
        self._t2i_ahead += b - np.count_nonzero(scores < self._gt, axis=0)
        self._t2i_ahead[cols] -= ~(own < self._gt[cols])

    def ranks(self) -> Tuple[np.ndarray, np.ndarray]:
        """1-based ranks ``(i2t [N_q], t2i [M])``, int64; i2t has one entry per image with at least
        one caption (``np.unique(caption_to_image)``), in image order."""
        if self._next_row != len(self._i2t_ahead):
            raise ValueError(f"score blocks covered {self._next_row} of {len(self._i2t_ahead)} image rows")
        has_query = np.diff(self._starts) > 0
        return self._i2t_ahead[has_query] + 1, self._t2i_ahead + 1


def count_ranks(blocks: Iterable[Tuple[int, np.ndarray]], caption_to_image: np.ndarray, num_images: int,
                gt_scores: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Ranks ``(i2t [N_q], t2i [M])`` from ``(first_row, scores [b, M])`` blocks covering the matrix."""
    counter = RankCounter(caption_to_image, num_images, gt_scores)
    for first_row, scores in blocks:
        counter.add(first_row, scores)
        del scores  # one block alive at a time: freed before the next is scored
    return counter.ranks()


def similarity_blocks(similarity: np.ndarray, chunk_size: int):
    """Yield ``(first_row, similarity[first_row:first_row + chunk_size])`` (views, not copies)."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    for start in range(0, similarity.shape[0], chunk_size):
        yield start, similarity[start:start + chunk_size]


def check_similarity(similarity, caption_to_image, gt_scores=None):
    """``(similarity [N, M], caption_to_image int64 [M], gt_scores [M])`` checked; ``gt_scores``
    defaults to the matrix entries ``similarity[caption_to_image[j], j]``."""
    similarity = np.asarray(similarity)
    if similarity.ndim != 2 or not np.issubdtype(similarity.dtype, np.floating):
        raise ValueError(f"the similarity matrix must be a 2-D float array [images, captions], "
                         f"got dtype {similarity.dtype} and shape {similarity.shape}")
    num_images, num_captions = similarity.shape
    c2i = check_caption_to_image(caption_to_image, num_images, num_captions)
    if gt_scores is None:
        gt_scores = similarity[c2i, np.arange(num_captions)]
    gt_scores = np.asarray(gt_scores)
    if gt_scores.shape != (num_captions,):
        raise ValueError(f"gt_scores must have shape ({num_captions},) (one per caption), got {gt_scores.shape}")
    return similarity, c2i, gt_scores


def ranks_from_similarity(similarity, caption_to_image, chunk_size: int = 1024,
                          gt_scores=None) -> Tuple[np.ndarray, np.ndarray]:
    """Ranks from a given score matrix.

    Parameters
    ----------
    similarity : float array [N, M]
        Score of image i with caption j (a memory map is read one block at a time).
    caption_to_image : int [M]
        Image of each caption.
    chunk_size : int
        Image rows counted at a time.
    gt_scores : float [M], optional
        Text -> image ground-truth scores (default: ``similarity[caption_to_image[j], j]``).

    Returns
    -------
    i2t_ranks : int64 [N_q]
        1-based, one per image with at least one caption, in image order.
    t2i_ranks : int64 [M]
        1-based, one per caption.
    """
    similarity, c2i, gt_scores = check_similarity(similarity, caption_to_image, gt_scores)
    return count_ranks(similarity_blocks(similarity, chunk_size), c2i, similarity.shape[0], gt_scores)


def check_embeddings(images, captions, caption_to_image):
    """``(images [N, D], captions [M, D])`` as float32 tensors and ``caption_to_image`` int64 [M], checked."""
    images, captions = as_embeddings(images, "images"), as_embeddings(captions, "captions")
    if images.shape[1] != captions.shape[1]:
        raise ValueError(f"images [{images.shape[0]}, {images.shape[1]}] and captions "
                         f"[{captions.shape[0]}, {captions.shape[1]}] have different embedding sizes")
    return images, captions, check_caption_to_image(caption_to_image, images.shape[0], captions.shape[0])


def retrieval_ranks(images, captions, caption_to_image, scorer=None,
                    chunk_size: int = 1024) -> Tuple[np.ndarray, np.ndarray]:
    """Ranks of embedded images and captions under ``scorer`` (default :class:`DotProductScorer`).

    Parameters
    ----------
    images : [N, D], captions : [M, D]
        Embeddings (tensors or arrays; used as float32).
    caption_to_image : int [M]
        Image of each caption.
    scorer : object with ``pairwise`` and ``paired`` (see ``scorers.py``)
    chunk_size : int
        Images scored at a time: memory is ``chunk_size x M`` scores.

    Returns ``(i2t_ranks [N_q], t2i_ranks [M])`` as :func:`ranks_from_similarity`.
    """
    images, captions, c2i = check_embeddings(images, captions, caption_to_image)
    scorer = scorer or DotProductScorer()
    return count_ranks(score_blocks(images, captions, scorer, chunk_size), c2i, images.shape[0],
                       paired_scores(images, captions, c2i, scorer))
