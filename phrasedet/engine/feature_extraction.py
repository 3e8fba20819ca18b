"""Precompute the pooled image features of an ``ImageTextEmbedding`` model's backbone, to train
later models on them (``MODEL.RETRIEVAL.IMAGE_INPUT "features"``), as VSE++'s and paper 000's
users train on CNN features computed once.

Each image goes through the test-time mapper (no random crop) and the backbone in inference mode;
the saved row is the pooled feature, the input of the image projection, so a model trained on
the features and the same model on pixels with a frozen backbone compute the same embeddings.
With ``maps=True`` the saved row is the backbone's map before any adaptation or pooling
([C, h, w]), for ``MODEL.RETRIEVAL.IMAGE_INPUT "maps"``: DSVE-loc with a frozen CNN trains on them
and computes the same embeddings and heatmaps as on pixels. Pointing splits go through the
pointing mapper (the image resized whole, as DSVE-loc's test sees it).
"""
import logging

import numpy as np
import torch
from detectron2.data import DatasetCatalog, build_detection_test_loader

from phrasedet.data import CaptionDatasetMapper, PointingDatasetMapper, write_image_features
from phrasedet.data.datasets import POINTING_EVALUATOR_TYPE

__all__ = ["extract_image_features"]

logger = logging.getLogger("phrasedet.engine")


def _mapper(cfg, dataset_name):
    from detectron2.data import MetadataCatalog

    if MetadataCatalog.get(dataset_name).get("evaluator_type", None) == POINTING_EVALUATOR_TYPE:
        return PointingDatasetMapper(cfg)
    return CaptionDatasetMapper(cfg, is_train=False)


@torch.no_grad()
def extract_image_features(cfg, model, dataset_names, output_dir: str, batch_size: int = 16, maps: bool = False) -> dict:
    """Write ``<output_dir>/<name>.npy`` ([N, C] float32, or [N, C, h, w] with ``maps``; rows in
    record order) and ``<name>.txt`` (image ids) for every split of ``dataset_names``.

    Args:
        cfg: the model's config, with ``MODEL.RETRIEVAL.IMAGE_INPUT "pixels"``.
        model: an ``ImageTextEmbedding`` on pixels.
        maps: save the backbone's map ``MODEL.RETRIEVAL.BACKBONE_FEATURE`` instead of the pooled feature.

    Returns:
        {dataset name: path of the .npy}.
    """
    if not getattr(model, "uses_pixels", False):
        raise ValueError("feature extraction needs a model on pixels (MODEL.RETRIEVAL.IMAGE_INPUT 'pixels')")
    was_training = model.training
    model.eval()
    encoder, paths = model.image_encoder, {}
    for name in dataset_names:
        records = DatasetCatalog.get(name)
        loader = build_detection_test_loader(records, mapper=_mapper(cfg, name), batch_size=batch_size,
                                             num_workers=cfg.DATALOADER.NUM_WORKERS)
        read = (lambda x: encoder._backbone_map(x)) if maps else encoder.pooled
        rows = [read(model.image_inputs(batch)).cpu() for batch in loader]
        if rows:
            features = torch.cat(rows).numpy()
        elif maps:
            raise ValueError(f"{name} has no images: the shape of its maps is unknown")
        else:
            features = np.zeros((0, encoder.pooled_dim), np.float32)
        paths[name] = write_image_features(output_dir, name, features, [r["image_id"] for r in records])
        logger.info("Wrote the %s features of the %d images of %s to %s", features.shape[1:], len(records), name, paths[name])
    model.train(was_training)
    return paths
