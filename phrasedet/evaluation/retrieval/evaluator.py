"""Detectron2 ``DatasetEvaluator`` for image-sentence retrieval (papers 000-002)."""
import logging
import os
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch
from detectron2.evaluation import DatasetEvaluator
from detectron2.utils import comm

from .dataset import caption_to_image_of, load_retrieval_split
from .files import EMBEDDINGS_FILE, SCORES_FILE, ScoresWriter, save_embeddings
from .protocols import check_folds, evaluate_retrieval
from .report import format_retrieval_table
from .scorers import DotProductScorer, paired_scores
from ..distributed import DistributedEvaluatorMixin
from ..output_checks import check_output_rows

__all__ = ["RetrievalEvaluator"]


def _float32(x, image_id: str, key: str) -> np.ndarray:
    if x is None:
        raise ValueError(f"image_id {image_id!r}: the model output has no {key!r}")
    if isinstance(x, torch.Tensor):
        x = x.detach().to("cpu", torch.float32).numpy()
    return np.asarray(x, dtype=np.float32)


class RetrievalEvaluator(DistributedEvaluatorMixin, DatasetEvaluator):
    """Recall@K, median and mean rank of image -> text and text -> image retrieval on a test split
    registered with ``evaluator_type == "retrieval"`` (records with ``image_id`` and ``captions``).

    Each model output is ``{"image_embedding": [D], "caption_embeddings": [n_i, D]}`` for one input
    image (``image_id`` in the input), where row k embeds ``record["captions"][k]`` (n_i may be 0).
    Embeddings must be finite (ValueError naming the image, the key and the row).
    Images are ordered as in the dataset, so the result does not depend on the order in which they
    arrive nor on the number of processes. Metric definitions: docs/EVALUATION.md.

    Parameters
    ----------
    dataset_name : str
        Registered test split.
    folds : int or sequence of int
        Protocols: 1 = the whole split (key ``"retrieval"``); F > 1 = F folds of consecutive
        images, metrics averaged (key ``"retrieval_<F>fold"``). N must be a multiple of each F.
    scorer : object with ``pairwise`` and ``paired``, optional
        Image-caption similarity (default :class:`DotProductScorer`, the cosine for L2-normalized
        embeddings).
    chunk_size : int
        Images scored at a time (memory: ``chunk_size x M`` scores).
    output_dir : str, optional
        Where the embeddings (or scores) file is written, by the main process only.
    distributed : bool
        Gather the embeddings of all processes to the main one (others return {}). If False, each
        process evaluates what it saw, which must then be the whole split.
    save_embeddings : bool
        With ``output_dir``: write ``retrieval_embeddings.npz`` for the dot-product scorer, else
        ``retrieval_scores.npz`` with the full score matrix (``files.py``), for
        ``tools/evaluation/evaluate_retrieval.py``.
    """

    def __init__(self, dataset_name: str, folds: Sequence[int] = (1,), scorer=None, chunk_size: int = 1024,
                 output_dir: Optional[str] = None, distributed: bool = True, save_embeddings: bool = True):
        self._logger = logging.getLogger(__name__)
        self._dataset_name = dataset_name
        self._image_ids, self._caption_counts = load_retrieval_split(dataset_name)
        self._index = {image_id: n for n, image_id in enumerate(self._image_ids)}
        self._folds = check_folds(folds, len(self._image_ids))  # fails before inference
        self._scorer = scorer or DotProductScorer()
        self._chunk_size = int(chunk_size)
        self._output_dir = output_dir
        self._distributed = distributed
        self._save = bool(save_embeddings and output_dir)
        self._seen: List[Tuple[int, np.ndarray, np.ndarray]] = []

    def reset(self):
        self._seen = []

    def process(self, inputs, outputs):
        for inp, out in zip(inputs, outputs):
            image_id = str(inp["image_id"])
            n = self._index.get(image_id)
            if n is None:
                raise ValueError(f"image_id {image_id!r} is not in dataset {self._dataset_name!r}")
            image = _float32(out.get("image_embedding"), image_id, "image_embedding")
            captions = _float32(out.get("caption_embeddings"), image_id, "caption_embeddings")
            expected = int(self._caption_counts[n])
            if image.ndim != 1:
                raise ValueError(f"image_id {image_id!r}: 'image_embedding' must have shape [D], got {image.shape}")
            if captions.size == 0 and expected == 0:
                captions = captions.reshape(0, image.shape[0])
            if captions.ndim != 2 or captions.shape[1] != image.shape[0]:
                raise ValueError(f"image_id {image_id!r}: 'caption_embeddings' must have shape [n_captions, "
                                 f"{image.shape[0]}], got {captions.shape}")
            if captions.shape[0] != expected:
                raise ValueError(f"image_id {image_id!r}: {captions.shape[0]} caption embeddings, but its record in "
                                 f"{self._dataset_name!r} has {expected} captions")
            check_output_rows(image_id, "image_embedding", ~np.isfinite(image[None]), image[None])
            check_output_rows(image_id, "caption_embeddings", ~np.isfinite(captions), captions)
            self._seen.append((n, image, captions))

    # ------------------------------------------------------------------ gathering and assembly
    def _assemble(self, seen) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(images [N, D], captions [M, D], caption_to_image [M])`` in dataset order; ValueError
        when a test image was seen twice or never, or embedding sizes differ."""
        num_images = len(self._image_ids)
        times = np.bincount([n for n, _, _ in seen], minlength=num_images)
        if (times > 1).any():
            twice = [self._image_ids[n] for n in np.flatnonzero(times > 1)[:5]]
            raise ValueError(f"{int((times > 1).sum())} test images of {self._dataset_name!r} were evaluated more "
                             f"than once, e.g. image_id {twice}")
        if (times == 0).any():
            missing = [self._image_ids[n] for n in np.flatnonzero(times == 0)[:5]]
            raise ValueError(f"{int((times == 0).sum())} of {num_images} test images of {self._dataset_name!r} "
                             f"were not evaluated, e.g. image_id {missing}")
        by_index = sorted(seen, key=lambda item: item[0])
        sizes = {image.shape[0] for _, image, _ in by_index}
        if len(sizes) > 1:
            raise ValueError(f"images have embeddings of different sizes {sorted(sizes)}")
        images = np.stack([image for _, image, _ in by_index])
        captions = np.concatenate([caps for _, _, caps in by_index]).reshape(-1, images.shape[1])
        return images, captions, caption_to_image_of(self._caption_counts)

    # ------------------------------------------------------------------ evaluation
    def _evaluate(self, images: torch.Tensor, captions: torch.Tensor, c2i: np.ndarray) -> dict:
        """Metrics of every protocol, saving the embeddings or the score matrix on the way."""
        def run(score_sink=None):
            return evaluate_retrieval(images, captions, c2i, self._folds, self._scorer, self._chunk_size, score_sink)

        if not (self._save and comm.is_main_process()):
            return run()
        os.makedirs(self._output_dir, exist_ok=True)
        if isinstance(self._scorer, DotProductScorer):
            save_embeddings(os.path.join(self._output_dir, EMBEDDINGS_FILE), self._image_ids, images.numpy(),
                            captions.numpy(), c2i)
            return run()
        with ScoresWriter(os.path.join(self._output_dir, SCORES_FILE), self._image_ids, c2i,
                          paired_scores(images, captions, c2i, self._scorer)) as writer:
            return run(writer.write)

    def evaluate(self):
        seen = self._gather_seen(self._seen)
        if seen is None:
            return {}
        if not seen:
            self._logger.warning("[RetrievalEvaluator] Did not receive valid predictions.")
            return {}
        images, captions, c2i = self._assemble(seen)
        results = self._evaluate(torch.from_numpy(images), torch.from_numpy(captions), c2i)
        self._logger.info("Retrieval on %s (%d images, %d captions, %s), in %%:\n%s", self._dataset_name,
                          images.shape[0], captions.shape[0], type(self._scorer).__name__,
                          format_retrieval_table(results))
        return results
