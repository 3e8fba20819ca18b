#!/usr/bin/env python
"""Fit stacked CCA on positive (region, phrase) pairs of the training set, collected with a
trained phrase detector (paper 003's stage 2), and save it:

    python tools/phrase_detection/fit_cca.py --config-file configs/qa_rcnn.yaml MODEL.WEIGHTS output/cite_cca/stage1_detector/model_final.pth

Writes ``<OUTPUT_DIR>/cca.npz`` (per layer: mean_x, mean_y, A, B, correlations, scale).
"""
import argparse
import os
import time

import numpy as np
from detectron2.config import get_cfg
from detectron2.modeling import build_model
from detectron2.utils.logger import setup_logger

import phrasedet  # noqa: F401
from phrasedet.config import add_phrasedet_config
from phrasedet.modeling.cca import fit_cca_from_detector, save_cca_layers
from phrasedet.modeling.checkpoint import PhrasedetCheckpointer


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
    model = build_model(cfg)
    PhrasedetCheckpointer.from_config(cfg, model).load(cfg.MODEL.WEIGHTS)
    start = time.perf_counter()
    layers = fit_cca_from_detector(cfg, model)
    path = os.path.join(cfg.OUTPUT_DIR, "cca.npz")
    save_cca_layers(path, layers)
    print(f"{len(layers)} CCA layers ({' -> '.join(str(l.A.shape[1]) for l in layers)}) fitted in "
          f"{time.perf_counter() - start:.1f} s; top correlations of layer 1: {np.round(layers[0].correlations[:5], 3).tolist()}; saved {path}")


if __name__ == "__main__":
    main()
