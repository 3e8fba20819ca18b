#!/usr/bin/env python
"""Precompute pooled image features with an ImageTextEmbedding config's backbone:

    python tools/data/extract_image_features.py --config-file configs/retrieval/vsepp.yaml \
        --output-dir output/retrieval/features [--dataset NAME ...] [--maps] [KEY VALUE ...]

Writes ``<output-dir>/<dataset>.npy`` (one row per image, in the split's order) and
``<dataset>.txt`` (their image ids) for DATASETS.TRAIN and DATASETS.TEST (or each ``--dataset``), and
``<output-dir>/extractor.pth``, the checkpoint of the model that computed them (its backbone is
the one to fine-tune from). Train on them with
``MODEL.RETRIEVAL.IMAGE_INPUT features MODEL.RETRIEVAL.IMAGE_FEATURES_DIR <output-dir>``. With
``--maps`` the rows are the backbone's maps ``MODEL.RETRIEVAL.BACKBONE_FEATURE`` before pooling
([C, h, w]), for ``MODEL.RETRIEVAL.IMAGE_INPUT maps`` (DSVE-loc with a frozen CNN); pointing
splits may be named by ``--dataset``.
``MODEL.WEIGHTS`` loads a backbone (e.g. ImageNet or a trained model); without it the backbone is
the config's random initialization (``SEED``).
"""
import argparse
import os

from detectron2.config import get_cfg
from detectron2.modeling import build_model
from detectron2.utils.env import seed_all_rng
from detectron2.utils.logger import setup_logger

import phrasedet  # noqa: F401  (registers datasets and models)
from phrasedet.config import add_phrasedet_config
from phrasedet.engine.feature_extraction import extract_image_features
from phrasedet.modeling.checkpoint import PhrasedetCheckpointer


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config-file", required=True)
    p.add_argument("--output-dir", required=True)
    p.add_argument("--dataset", action="append", dest="datasets", help="a split to extract (repeat the flag for "
                   "several); default: DATASETS.TRAIN and DATASETS.TEST")
    p.add_argument("--maps", action="store_true", help="save the backbone's maps, not the pooled features")
    p.add_argument("opts", nargs=argparse.REMAINDER, help="KEY VALUE config overrides")
    args = p.parse_args(argv)
    setup_logger(name="phrasedet")
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(args.config_file)
    cfg.merge_from_list(args.opts + ["MODEL.RETRIEVAL.IMAGE_INPUT", "pixels"])
    cfg.freeze()
    if cfg.SEED >= 0:
        seed_all_rng(cfg.SEED)
    model = build_model(cfg)
    checkpointer = PhrasedetCheckpointer.from_config(cfg, model, args.output_dir)
    if cfg.MODEL.WEIGHTS:
        checkpointer.load(cfg.MODEL.WEIGHTS)
    names = args.datasets or list(dict.fromkeys(list(cfg.DATASETS.TRAIN) + list(cfg.DATASETS.TEST)))
    for name, path in extract_image_features(cfg, model, names, args.output_dir, maps=args.maps).items():
        print(f"{name}: {path}")
    os.makedirs(args.output_dir, exist_ok=True)
    checkpointer.save("extractor")


if __name__ == "__main__":
    main()
