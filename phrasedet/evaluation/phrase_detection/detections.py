"""Storage of a model's phrase detections over a test split, laid out for evaluation at scale.

Scores are kept dense: a float32 array ``[N_images, V_phrases, K]`` (NaN = no detection), filled
image by image into one preallocated matrix (ReferIt: 10,000 x 32,000 x 1 = 1.28 GB). Boxes are
kept only for the (image, phrase) pairs that have ground truth, ``[M_pairs, K, 4]``: a detection
of a phrase that is absent from its image is a false positive whatever its box, so those boxes are
never stored.

Scores are compared as float32 (inputs are cast), the same in the in-loop evaluator and in
:func:`~phrasedet.evaluation.phrase_detection.predictions.evaluate_predictions_file`.
"""
from typing import Dict, Optional, Sequence

import numpy as np
import torch

from phrasedet.text import nfc
from ..output_checks import check_output_rows
from .ground_truth import PhraseGroundTruth

__all__ = ["PhraseColumns", "PhraseDetections", "check_detections", "detection_arrays"]


def _cpu_numpy(tensor) -> np.ndarray:
    """A tensor on the CPU as numpy; bfloat16 (a mixed-precision detector's output, which NumPy
    cannot hold) as float32, which holds it exactly. Other dtypes are not copied twice."""
    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.float()
    return tensor.numpy()


def detection_arrays(scores, boxes, dtype=np.float32) -> tuple:
    """A phrase detector's output ``scores`` [P, K] (or [P]) and ``boxes`` [P, K, 4] (tensors or
    arrays) -> numpy ``(scores [P, K], boxes [P, K, 4])`` of ``dtype``, on the CPU."""
    scores, boxes = (np.asarray(_cpu_numpy(x) if hasattr(x, "detach") else x, dtype=dtype) for x in (scores, boxes))
    if scores.ndim == 1:
        scores = scores[:, None]
    return scores, boxes.reshape(scores.shape + (4,))


def check_detections(image_id: str, phrases: Sequence[str], scores: np.ndarray, boxes: np.ndarray) -> None:
    """A detection (a score that is not NaN; scores [P, K]) must have a finite box (boxes
    [P, K, 4]): ValueError naming the image, the row and its phrase otherwise."""
    bad = ~np.isfinite(boxes).all(axis=-1) & ~np.isnan(scores)
    check_output_rows(image_id, "boxes", bad, boxes, phrases, "finite numbers where the score is not NaN")


class PhraseColumns:
    """Where the rows of a model output (its ``phrases`` list) go in the vocabulary.

    Build it once per distinct ``phrases`` list (the open-vocabulary model passes the same list
    object for every image) and pass it to :meth:`PhraseDetections.add_image`.

    Parameters
    ----------
    phrases : sequence of str
        The phrases that were scored, in output-row order (compared in Unicode NFC, the form of
        every test phrase: a decomposed "piñata" is the test phrase "piñata").
    phrase_index : dict str -> int
        Vocabulary index of each phrase (:attr:`PhraseGroundTruth.phrase_index`).

    Attributes
    ----------
    rows : int64 array
        Output rows whose phrase is in the vocabulary.
    targets : int64 array
        Vocabulary index of each of ``rows``.
    position : int64 array [V]
        Output row of each vocabulary phrase, -1 when it was not scored. A phrase listed twice
        takes its last row.
    identity : bool
        ``phrases`` is exactly the vocabulary, in order (a plain copy, no scattering).
    num_unknown : int
        Rows whose phrase is not in the vocabulary (it has no test instance: such rows are
        dropped, since phrases without test instances are skipped by the mAP anyway).
    """

    def __init__(self, phrases: Sequence[str], phrase_index: Dict[str, int]):
        V = len(phrase_index)
        index = np.fromiter((phrase_index.get(nfc(p), -1) for p in phrases), dtype=np.int64, count=len(phrases))
        known = index >= 0
        self.rows = np.flatnonzero(known)
        self.targets = index[known]
        self.position = np.full(V, -1)  # int64 (numpy 2 ints)
        self.position[self.targets] = self.rows
        self.identity = len(index) == V and bool(np.array_equal(index, np.arange(V)))
        self.num_unknown = int(len(index) - len(self.rows))
        self.num_rows = len(index)


class PhraseDetections:
    """Dense detection scores of every vocabulary phrase in every image, and boxes of GT pairs.

    Parameters
    ----------
    gt : PhraseGroundTruth
        The test split (image and phrase indexing, the pairs).
    k : int
        Detections per (image, phrase) to start with, K >= 1; widened when an image brings more.

    Attributes
    ----------
    scores : float32 array [N, V, K]
        Score of detection ``k`` of phrase ``v`` in image ``n``; NaN where there is none. Rows of
        images never added are undefined until :meth:`finalize` sets them to NaN.
    pair_boxes : float32 array [M, K, 4]
        Boxes of the detections of each ground-truth pair (NaN: none).
    filled : bool array [N]
        Images added so far.
    """

    def __init__(self, gt: PhraseGroundTruth, k: int = 1):
        if int(k) < 1:
            raise ValueError(f"need at least one detection per phrase, got K={k}")
        self.gt = gt
        self.k = int(k)
        # np.empty: pages of rows never written are not committed (a process that sees a part
        # of the images, in distributed evaluation, pays only for its part).
        self.scores = np.empty((gt.num_images, gt.num_phrases, self.k), dtype=np.float32)
        self.pair_boxes = np.full((gt.num_pairs, self.k, 4), np.nan, dtype=np.float32)
        self.filled = np.zeros(gt.num_images, dtype=bool)

    def widen(self, k: int) -> None:
        """Make room for ``k`` detections per phrase (nothing when ``k <= K``): the stored images'
        extra columns are "no detection". K is the largest K' seen so far, never the first
        image's: a detector returns fewer than K boxes for an image with fewer proposals (none
        for an image without any), and the result must not depend on which image comes first."""
        k = int(k)
        if k <= self.k:
            return
        old_scores, old_boxes, old_k = self.scores, self.pair_boxes, self.k
        self.scores = np.empty((self.gt.num_images, self.gt.num_phrases, k), dtype=np.float32)
        for i in np.flatnonzero(self.filled):  # row by row: no temporary of the matrix' size
            self.scores[i, :, :old_k] = old_scores[i]
            self.scores[i, :, old_k:] = np.nan
        self.pair_boxes = np.full((self.gt.num_pairs, k, 4), np.nan, dtype=np.float32)
        self.pair_boxes[:, :old_k] = old_boxes
        self.k = k

    def add_image(self, image_index: int, scores, boxes, columns: Optional[PhraseColumns] = None) -> None:
        """Store the detections of one image (replacing any earlier ones of that image).

        Parameters
        ----------
        image_index : int
            Position of the image in the dataset.
        scores : array [P, K']
            Scores of the output rows; K' may be 0 (no detection), K' < K leaves the other
            columns "no detection" and K' > K widens the store (:meth:`widen`).
        boxes : array [P, K', 4]
            Boxes, xyxy in original image coordinates. Only the rows of phrases annotated in
            this image are read.
        columns : PhraseColumns, optional
            Maps output rows to vocabulary phrases; None means the rows are the vocabulary in
            order (P == V).
        """
        i = int(image_index)
        scores = np.asarray(scores, dtype=np.float32)
        if scores.ndim == 1:
            scores = scores[:, None]
        P, k = scores.shape
        self.widen(k)
        boxes = np.asarray(boxes).reshape(P, k, 4)  # stored as float32 below
        V = self.gt.num_phrases
        if columns is not None and columns.num_rows != P:
            raise ValueError(f"image {self.gt.image_ids[i]!r}: {P} score rows for {columns.num_rows} phrases")
        if columns is None or columns.identity:
            if P != V:
                raise ValueError(f"image {self.gt.image_ids[i]!r}: {P} score rows, "
                                 f"expected one per vocabulary phrase ({V})")
            self.scores[i, :, :k] = scores
            self.scores[i, :, k:] = np.nan  # columns k..K-1 (none when k == K)
        else:
            row = self.scores[i]
            row.fill(np.nan)
            row[columns.targets, :k] = scores[columns.rows]
        self.filled[i] = True

        pairs = self.gt.pairs_of_image(i)  # possibly empty: then nothing below changes
        self.pair_boxes[pairs] = np.nan
        phrase = self.gt.pair_phrase[pairs]
        pos = phrase if (columns is None or columns.identity) else columns.position[phrase]
        have = pos >= 0
        self.pair_boxes[np.arange(pairs.start, pairs.stop)[have], :k] = boxes[pos[have]]

    def add_records(self, image_index, phrase_index, k, score, box) -> None:
        """Store single detections (vectorized): detection ``k[r]`` of phrase ``phrase_index[r]``
        in image ``image_index[r]`` has ``score[r]`` and ``box[r]``. Rows of images seen for the
        first time start as "no detection".

        Args:
            image_index, phrase_index, k: integers [R] (arrays or lists).
            score: [R]; box: [R, 4] (stored as float32, like every score and box).
        """
        # int64 also for empty lists (numpy makes those float64, which cannot index)
        image_index, phrase_index, k = (np.asarray(x, dtype=np.int64) for x in (image_index, phrase_index, k))
        if len(k):
            self.widen(int(k.max()) + 1)
        new = np.unique(image_index)
        new = new[~self.filled[new]]
        self.scores[new] = np.nan
        self.filled[new] = True
        self.scores[image_index, phrase_index, k] = score
        pair = self.gt.find_pairs(image_index, phrase_index)
        sel = pair >= 0
        self.pair_boxes[pair[sel], k[sel]] = np.reshape(box, (-1, 4))[sel]

    def export_images(self, image_indices):
        """Scores and GT-pair boxes of some images, for sending to another process:
        ``(image_indices, scores [n, V, K], pair_indices, pair_boxes)``."""
        image_indices = np.asarray(image_indices, dtype=np.int64)
        starts, stops = self.gt.image_pair_start[image_indices], self.gt.image_pair_start[image_indices + 1]
        pair_indices = np.concatenate([np.arange(a, b) for a, b in zip(starts, stops)] + [np.zeros(0, np.int64)])
        return image_indices, self.scores[image_indices], pair_indices.astype(np.int64), self.pair_boxes[pair_indices]

    def import_images(self, image_indices, scores, pair_indices, pair_boxes) -> None:
        """Store what :meth:`export_images` of another process returned."""
        k = scores.shape[-1]
        self.widen(k)
        self.scores[image_indices, :, :k] = scores
        self.scores[image_indices, :, k:] = np.nan
        self.pair_boxes[pair_indices] = np.nan
        self.pair_boxes[pair_indices, :k] = pair_boxes
        self.filled[image_indices] = True

    def finalize(self) -> int:
        """Set the rows of images never added to "no detection"; return how many there were."""
        missing = np.flatnonzero(~self.filled)
        for i in missing:  # row by row: no temporary of the matrix' size
            self.scores[i] = np.nan
        self.filled[missing] = True
        return len(missing)
