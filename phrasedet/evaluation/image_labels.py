"""Detectron2 ``DatasetEvaluator`` of a multi-label image classifier on an image-labels split (the
built-in pretraining split's validation images): the ROC AUC of every label, their mean per label
group (background, colour, shape, ...) and the mean over the groups.

The model's outputs are ``{"scores": [L]}`` per image; the true labels come with the inputs
(``labels``, from :class:`phrasedet.data.ImageLabelsMapper`). Images are put in ``image_id``
order before scoring, so the result depends neither on the arrival order nor on the number of
processes. A label that is all positive or all negative on the split has no AUC and is counted as
skipped (``skipped_<group>``).
"""
import logging
from typing import Sequence

import numpy as np
from detectron2.evaluation import DatasetEvaluator
from sklearn.metrics import roc_auc_score

from .distributed import DistributedEvaluatorMixin
from .representation_probe import probe_groups

__all__ = ["ImageLabelsEvaluator", "label_aucs"]

logger = logging.getLogger("phrasedet.evaluation")


def label_aucs(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """[L] AUC of each column of ``scores`` [N, L] against ``labels`` [N, L] (0/1), NaN where a
    column's labels are all equal."""
    out = np.full(labels.shape[1], np.nan)
    for j in range(labels.shape[1]):
        if 0 < labels[:, j].sum() < len(labels):
            out[j] = roc_auc_score(labels[:, j], scores[:, j])
    return out


class ImageLabelsEvaluator(DistributedEvaluatorMixin, DatasetEvaluator):
    """See the module docstring.

    Args:
        dataset_name: the split (for the log).
        groups: the group of each label column (L names).
        distributed: gather every process's images.
    """

    def __init__(self, dataset_name: str, groups: Sequence[str], distributed: bool = True):
        self._dataset, self._groups, self._distributed = dataset_name, list(groups), distributed
        self._output_dir = None
        self.reset()

    def reset(self):
        self._seen = []

    def process(self, inputs, outputs):
        for x, out in zip(inputs, outputs):
            if "labels" not in x:
                raise KeyError(f"image {x.get('image_id')!r} of {self._dataset} came without its 'labels'")
            scores, labels = out["scores"].detach().cpu().numpy(), x["labels"].cpu().numpy()
            if scores.shape != labels.shape or labels.shape != (len(self._groups),):
                raise ValueError(f"image {x.get('image_id')!r}: {scores.shape[0]} scores and {labels.shape[0]} labels "
                                 f"for the evaluator's {len(self._groups)} labels")
            self._seen.append((str(x["image_id"]), scores, labels))

    def evaluate(self):
        seen = self._gather_seen(self._seen)
        if seen is None:
            return {}
        seen = sorted(seen, key=lambda item: item[0])
        if not seen:
            logger.warning("No images of %s were evaluated", self._dataset)
            return {}
        scores = np.stack([s for _, s, _ in seen])
        labels = np.stack([y for _, _, y in seen])
        groups = probe_groups(label_aucs(scores, labels), self._groups)
        result = {"auc": float(np.nanmean([g["auc"] for g in groups.values()])), "images": len(seen)}
        for name, g in groups.items():
            result[f"auc_{name}"] = g["auc"]
            result[f"skipped_{name}"] = g["skipped"]
        logger.info("Image labels on %s (%d images): mean AUC %.4f; %s", self._dataset, len(seen), result["auc"],
                    ", ".join(f"{name} {g['auc']:.4f}" for name, g in groups.items()))
        return {"image_labels": result}
