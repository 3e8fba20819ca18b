#!/usr/bin/env python
"""Fit stacked CCA on positive (region, phrase) pairs of the training set, collected with a
trained phrase detector (paper 003's stage 2), and save it:

    python tools/fit_cca.py --config-file configs/qa_rcnn.yaml MODEL.WEIGHTS output/qa_rcnn/model_final.pth

Writes ``<OUTPUT_DIR>/cca.npz`` (per layer: mean_x, mean_y, A, B, correlations, scale).
"""
import argparse
import os
import time

import numpy as np
from detectron2.checkpoint import DetectionCheckpointer
from detectron2.config import get_cfg
from detectron2.data import build_detection_test_loader
from detectron2.modeling import build_model
from detectron2.utils.logger import setup_logger

import phrasedet  # noqa: F401
from phrasedet.config import add_phrasedet_config
from phrasedet.data import PhraseDatasetMapper, training_vocabulary
from phrasedet.modeling.cca_fitting import collect_positive_pairs, fit_stacked_cca, replayable


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config-file", required=True)
    parser.add_argument("opts", nargs=argparse.REMAINDER, help="KEY VALUE config overrides")
    args = parser.parse_args()
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(args.config_file)
    cfg.merge_from_list(args.opts)
    cfg.freeze()
    setup_logger(name="phrasedet")
    c = cfg.PHRASEDET.CCA
    model = build_model(cfg)
    DetectionCheckpointer(model).load(cfg.MODEL.WEIGHTS)
    phrases = training_vocabulary(cfg.DATASETS.TRAIN).phrases()
    table = model.phrase_bank(phrases).cpu().numpy()
    index = {p: i for i, p in enumerate(phrases)}
    mapper = PhraseDatasetMapper(cfg, is_train=False)

    def batches():
        for name in cfg.DATASETS.TRAIN:
            yield from collect_positive_pairs(model, build_detection_test_loader(cfg, name, mapper=mapper), index,
                                              c.PAIR_IOU, c.MAX_PAIRS_PER_IMAGE)

    start = time.perf_counter()
    region_dim = model.roi_heads.region_features.output_dim
    dims, size = [], min(region_dim, table.shape[1])
    for d in c.DIMS:
        size = d or size
        dims.append(size)
    layers = fit_stacked_cca(replayable(batches), table, dims, c.RIDGE, c.POWER)  # one detector pass if pairs fit in 2 GB
    os.makedirs(cfg.OUTPUT_DIR, exist_ok=True)
    path = os.path.join(cfg.OUTPUT_DIR, "cca.npz")
    np.savez(path, **{f"layer{i}_{k}": v for i, layer in enumerate(layers) for k, v in vars(layer).items()})
    print(f"{len(layers)} CCA layers ({' -> '.join(str(l.A.shape[1]) for l in layers)}) fitted in "
          f"{time.perf_counter() - start:.1f} s; top correlations of layer 1: {np.round(layers[0].correlations[:5], 3).tolist()}; saved {path}")


if __name__ == "__main__":
    main()
