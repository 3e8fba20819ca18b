"""What a phrase detector's region features see of the built-in objects: the linear probe of
:mod:`.representation_probe` on regions instead of whole images.

Every object of the built-in ground truth (:func:`phrasedet.data.synthetic.ground_truth.load_ground_truth`)
is one example:

* its **region feature** is exactly what the detector's region classifiers see for a region on
  the object's box: the detector in eval mode, the test mapper's resized image
  (``PhraseDatasetMapper(cfg, is_train=False)``), ``model.preprocess_image``, ``model.backbone``,
  then ``model.roi_heads.region_features`` on the object's box scaled to the resized image: the
  pooled ROI feature (+) the 5-d box geometry, [C + 5];
* its **labels** are the object's facts (:func:`phrasedet.data.synthetic.labels.object_label_matrix`):
  one-vs-rest per colour (8) and per shape (6), size (one label: large or small) and one-vs-rest
  per colour + shape combination (48).

A logistic regression per label is fitted on the objects of the training split (600 images,
about 1,800 objects) and scores those of the test split (150 images, about 440 objects), with the
rules of :func:`~.representation_probe.probe_labels`: a label with fewer than ``MIN_EXAMPLES``
training positives or negatives, or one class only in test, is skipped and counted (the held-out
colour-shape combinations have no training positive). The box geometry alone tells the size.
"""
from typing import Dict, Iterator, List, Sequence, Tuple

import numpy as np
import torch
from detectron2.structures import Boxes

from .representation_probe import probe_groups, probe_labels

__all__ = ["REGION_TRAIN_SPLIT", "REGION_TEST_SPLIT", "REGION_PARTS", "object_boxes", "boxes_region_features",
           "object_region_features", "probe_region_features", "probe_detector_regions"]

#: The built-in phrase-grounding splits whose objects are probed (the captions splits' images).
REGION_TRAIN_SPLIT, REGION_TEST_SPLIT = "builtin_flickr30k_entities_train", "builtin_flickr30k_entities_test"
#: The parts of a :class:`PhraseRCNN` its region features are computed with (state-dict prefixes).
REGION_PARTS = ("backbone.", "roi_heads.region_features.")


def object_boxes(objects: Sequence[dict], original_size: Tuple[int, int], resized_size: Tuple[int, int]) -> torch.Tensor:
    """[N, 4] float32 xyxy boxes of ``objects`` (their ``box``, in the original image of (H, W)
    ``original_size``) in the resized image of (H', W') ``resized_size``: x scaled by W'/W, y by
    H'/H, as Detectron2's resize moves boxes."""
    (h, w), (rh, rw) = original_size, resized_size
    boxes = torch.tensor([o["box"] for o in objects], dtype=torch.float32).reshape(-1, 4)
    return boxes * torch.tensor([rw / w, rh / h, rw / w, rh / h])


@torch.no_grad()
def boxes_region_features(model, inputs: List[dict], boxes: List[torch.Tensor]) -> List[torch.Tensor]:
    """The region features a :class:`PhraseRCNN` computes for given boxes, without gradient.

    Args:
        model: the detector (its mode is left as it is: put it in eval mode first).
        inputs: mapped images (``image`` [3, H'_i, W'_i], the test mapper's output).
        boxes: per image, [N_i, 4] xyxy boxes in the resized image.

    Returns:
        per image, [N_i, C + 5]: ``model.roi_heads.region_features`` (pooled ROI feature, box geometry).
    """
    images = model.preprocess_image(inputs)
    features = model.backbone(images.tensor)
    regions = model.roi_heads.region_features(features, [Boxes(b.to(model.device)) for b in boxes], images.image_sizes)
    return list(regions.split([len(b) for b in boxes]))


def _same_size_batches(inputs: Iterator[dict], batch_size: int) -> Iterator[List[dict]]:
    """Consecutive mapped images in batches of at most ``batch_size`` of one size, so no image is
    padded beyond what it would be alone."""
    batch = []
    for x in inputs:
        if batch and (len(batch) == batch_size or batch[0]["image"].shape != x["image"].shape):
            yield batch
            batch = []
        batch.append(x)
    if batch:
        yield batch


def object_region_features(model, mapper, records: Sequence[dict], images: dict, batch_size: int = 8) -> Tuple[np.ndarray, list]:
    """The region feature of every ground-truth object of ``records``' images (see the module docstring).

    Args:
        model: a :class:`PhraseRCNN`; put in eval mode here.
        mapper: the test mapper (``PhraseDatasetMapper(cfg, is_train=False)``).
        records: dataset records of built-in images (``image_id``).
        images: the ground truth's ``{image id: record}`` (its ``objects``).
        batch_size: images per forward pass.

    Returns:
        ([N, C + 5] float32, the N objects in the same order: each image's objects in turn).

    Raises:
        KeyError: naming an image the ground truth lacks.
    """
    model.eval()
    missing = [str(r["image_id"]) for r in records if str(r["image_id"]) not in images]
    if missing:
        raise KeyError(f"image {missing[0]!r} is not in the built-in ground truth ({len(missing)} missing)")
    rows, objects = [], []
    mapped = ({**mapper(r), "objects": images[str(r["image_id"])]["objects"]} for r in records)
    for batch in _same_size_batches(mapped, batch_size):
        boxes = [object_boxes(x["objects"], (x["height"], x["width"]), tuple(x["image"].shape[-2:])) for x in batch]
        rows += [f.cpu().numpy() for f in boxes_region_features(model, batch, boxes)]
        objects += [o for x in batch for o in x["objects"]]
    dim = model.roi_heads.region_features.output_dim
    return np.concatenate(rows).astype(np.float32) if rows else np.zeros((0, dim), np.float32), objects


def probe_region_features(train_x: np.ndarray, train_objects: Sequence[dict], test_x: np.ndarray,
                          test_objects: Sequence[dict], c: float = 1.0) -> Dict[str, dict]:
    """The probe of region features [N, F] / [M, F] of the objects ``train_objects`` / ``test_objects``,
    every object label: ``{"groups": probe_groups(...), "labels": {label name: test AUC or None where skipped}}``."""
    from phrasedet.data.synthetic.labels import object_label_groups, object_label_matrix, object_label_names

    aucs = probe_labels(train_x, object_label_matrix(train_objects), test_x, object_label_matrix(test_objects), c)
    return {"groups": probe_groups(aucs, object_label_groups()),
            "labels": {n: None if np.isnan(a) else float(a) for n, a in zip(object_label_names(), aucs)}}


def probe_detector_regions(model, mapper, images: dict, train: str = REGION_TRAIN_SPLIT, test: str = REGION_TEST_SPLIT,
                           batch_size: int = 8, c: float = 1.0) -> dict:
    """The region probe of a detector on the objects of the registered built-in splits ``train`` and
    ``test``: :func:`probe_region_features`'s result plus ``"objects"``: ``{"train": N, "test": M}``."""
    from detectron2.data import DatasetCatalog

    train_x, train_objects = object_region_features(model, mapper, DatasetCatalog.get(train), images, batch_size)
    test_x, test_objects = object_region_features(model, mapper, DatasetCatalog.get(test), images, batch_size)
    return {**probe_region_features(train_x, train_objects, test_x, test_objects, c),
            "objects": {"train": len(train_objects), "test": len(test_objects)}}
