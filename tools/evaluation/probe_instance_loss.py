#!/usr/bin/env python
"""Why paper 001's instance loss fits one image representation and not another (issue 43): the
representations' scale and sparsity, and each trained model's fit on training and validation.

    python tools/evaluation/probe_instance_loss.py [--features NAME=DIR ...] [--run NAME=RUN_DIR ...]
        [--train-dataset builtin_flickr30k_captions_train] [--val-dataset builtin_flickr30k_captions_val]
        [--output FILE.json]

* ``--features NAME=DIR``: a pooled-features folder (``tools/data/extract_image_features.py``'s
  layout, or the oracle's ``features/global``): its training and validation arrays' profile
  (phrasedet/evaluation/retrieval/instance_fit.py: dims, nonzero share, mean norm, columns nonzero in
  no or few training images, the mass in them).
* ``--run NAME=RUN_DIR``: a finished ``tools/train_net.py`` run of ``configs/retrieval/`` (its
  ``config.yaml``; with ``PHRASEDET.RETRIEVAL_STAGES``, stage I and its selected model; otherwise
  the run's selected model, or its last without selection), evaluated in eval mode: the instance
  classifier's top-1 accuracy and cross-entropy on the training images and captions (a model
  without instance loss: '-'), the features' mean norm, and rsum on the training split in folds
  of the validation split's size (the built-in 600 training images: 10 folds of 60, averaged) beside rsum on
  the validation split. A model that fits its training images much better than unseen ones shows
  it in the gap. Relative paths in a run's config (an ``OUTPUT_DIR`` or features folder given
  relative) are read from the working directory, as the run read them.
"""
import argparse
import json
import os
import sys

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)

import phrasedet  # noqa: E402,F401  (registers the datasets)
from phrasedet.evaluation.retrieval.instance_fit import feature_profile, format_fits, format_profiles  # noqa: E402
from phrasedet.utils.named_paths import named_paths  # noqa: E402

TRAIN, VAL = "builtin_flickr30k_captions_train", "builtin_flickr30k_captions_val"


def _array(directory, dataset):
    path = os.path.join(directory, f"{dataset}.npy")
    if not os.path.isfile(path):
        raise SystemExit(f"--features: {path} does not exist (a features folder holds <dataset>.npy per split)")
    return np.load(path)


def run_model(run_dir):
    """(cfg, model in eval mode, weights path) of a finished run: stage I of a staged run."""
    from phrasedet.engine.comparison.protocol import config_of
    from phrasedet.engine.staged.model_surgery import load_weights
    from phrasedet.engine.staged.retrieval_stages import retrieval_stages
    from phrasedet.engine.staged.stages import Stage
    from phrasedet.engine.staged.selected_training import selection_of
    from phrasedet.engine.trainer import PhrasedetTrainer

    config = os.path.join(run_dir, "config.yaml")
    if not os.path.isfile(config):
        raise SystemExit(f"--run: {config} does not exist (is {run_dir} a finished tools/train_net.py run?)")
    cfg = config_of(config, ["OUTPUT_DIR", run_dir])
    if cfg.PHRASEDET.RETRIEVAL_STAGES.ENABLED:
        stage = retrieval_stages(cfg)[0]
    else:
        cfg.freeze()
        stage = Stage("", cfg, selection=selection_of(cfg))
    weights = stage.selected_weights
    if not os.path.isfile(weights):
        raise SystemExit(f"--run: {weights} does not exist (the run is not finished)")
    model = PhrasedetTrainer.build_model(stage.cfg)
    load_weights(model, weights)
    return stage.cfg, model.eval(), weights


def split_rsum(cfg, model, dataset, folds):
    """rsum of ``model`` on ``dataset``, averaged over ``folds`` folds of consecutive images."""
    from detectron2.evaluation import inference_on_dataset

    from phrasedet.engine.trainer import PhrasedetTrainer
    from phrasedet.evaluation.retrieval.evaluator import RetrievalEvaluator
    from phrasedet.evaluation.retrieval.protocols import result_key

    evaluator = RetrievalEvaluator(dataset, folds=(folds,), scorer=model.scorer, distributed=False, save_embeddings=False)
    results = inference_on_dataset(model, PhrasedetTrainer.build_test_loader(cfg, dataset), evaluator)
    return results[result_key(folds)]["rsum"]


def probe_run(run_dir, train, val):
    """The fit of one run: :func:`instance_fit`'s figures (None without instance loss), train_rsum,
    val_rsum, gap and the weights probed."""
    from detectron2.data import DatasetCatalog

    from phrasedet.engine.trainer import PhrasedetTrainer
    from phrasedet.evaluation.retrieval.instance_fit import instance_fit

    cfg, model, weights = run_model(run_dir)
    sizes = {name: len(DatasetCatalog.get(name)) for name in (train, val)}
    if sizes[train] % sizes[val]:
        raise SystemExit(f"{train} ({sizes[train]} images) does not split into folds of {val}'s {sizes[val]}")
    row = instance_fit(model, PhrasedetTrainer.build_test_loader(cfg, train)) if model.instance_loss is not None else {}
    row["train_rsum"] = split_rsum(cfg, model, train, sizes[train] // sizes[val])
    row["val_rsum"] = split_rsum(cfg, model, val, 1)
    row["gap"] = row["train_rsum"] - row["val_rsum"]
    return {**row, "weights": weights}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--features", action="append", help="NAME=DIR: a pooled-features folder")
    p.add_argument("--run", action="append", help="NAME=RUN_DIR: a finished retrieval run")
    p.add_argument("--train-dataset", default=TRAIN)
    p.add_argument("--val-dataset", default=VAL)
    p.add_argument("--output", default="", help="also write every figure to this json file")
    args = p.parse_args(argv)
    features, runs = named_paths(args.features, "--features"), named_paths(args.run, "--run")
    if not features and not runs:
        raise SystemExit("nothing to probe: give --features NAME=DIR or --run NAME=RUN_DIR")
    out = {}
    if features:
        out["features"] = {name: feature_profile(_array(d, args.train_dataset), _array(d, args.val_dataset)) for name, d in features}
        print(f"Pooled features, {args.train_dataset} (validation: {args.val_dataset})\n")
        print(format_profiles(out["features"]) + "\n")
    if runs:
        out["runs"] = {name: probe_run(d, args.train_dataset, args.val_dataset) for name, d in runs}
        print(f"Instance classifier on {args.train_dataset} (accuracy %, cross-entropy, feature norms), rsum on the "
              f"training split in folds of the validation split's size and on {args.val_dataset}\n")
        print(format_fits(out["runs"], ("train_rsum", "val_rsum", "gap")))
    if args.output:
        with open(args.output, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
