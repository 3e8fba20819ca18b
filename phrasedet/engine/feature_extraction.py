"""Precompute the pooled image features of an ``ImageTextEmbedding`` model's backbone, to train
later models on them (``MODEL.RETRIEVAL.IMAGE_INPUT "features"``), as VSE++'s and paper 000's
users train on CNN features computed once.

Each image goes through the test-time mapper (no random crop) and the backbone in inference mode;
the saved row is the pooled feature, the input of the image projection, so a model trained on
the features and the same model on pixels with a frozen backbone compute the same embeddings.
"""
import logging

import numpy as np
import torch
from detectron2.data import DatasetCatalog, build_detection_test_loader

from phrasedet.data import CaptionDatasetMapper, write_image_features

__all__ = ["extract_image_features"]

logger = logging.getLogger("phrasedet.engine")


@torch.no_grad()
def extract_image_features(cfg, model, dataset_names, output_dir: str, batch_size: int = 16) -> dict:
    """Write ``<output_dir>/<name>.npy`` ([N, C] float32, rows in record order) and
    ``<name>.txt`` (image ids) for every split of ``dataset_names``.

    Args:
        cfg: the model's config, with ``MODEL.RETRIEVAL.IMAGE_INPUT "pixels"``.
        model: an ``ImageTextEmbedding`` on pixels.

    Returns:
        {dataset name: path of the .npy}.
    """
    if not getattr(model, "uses_pixels", False):
        raise ValueError("feature extraction needs a model on pixels (MODEL.RETRIEVAL.IMAGE_INPUT 'pixels')")
    was_training = model.training
    model.eval()
    mapper = CaptionDatasetMapper(cfg, is_train=False)
    paths = {}
    for name in dataset_names:
        records = DatasetCatalog.get(name)
        loader = build_detection_test_loader(records, mapper=mapper, batch_size=batch_size, num_workers=cfg.DATALOADER.NUM_WORKERS)
        rows = [model.image_encoder.pooled(model.image_inputs(batch)).cpu() for batch in loader]
        features = torch.cat(rows).numpy() if rows else np.zeros((0, model.image_encoder.pooled_dim), np.float32)
        paths[name] = write_image_features(output_dir, name, features, [r["image_id"] for r in records])
        logger.info("Wrote the %s features of the %d images of %s to %s", features.shape[1:], len(records), name, paths[name])
    model.train(was_training)
    return paths
