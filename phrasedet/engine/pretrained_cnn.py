"""The built-in pretrained CNN, trained once and cached like the built-in dataset: the stand-in
for ImageNet weights that the retrieval and pointing comparisons start from.

:func:`ensure_builtin_cnn` trains ``configs/pretraining/builtin_cnn.yaml`` (a
``MultiLabelImageClassifier`` on the built-in pretraining split, about 20 minutes on 2 cores)
into ``<cache>/builtin-cnn-<key>/`` on first use and returns its ``model_final.pth``, whose
``backbone.*`` tensors any config with the same backbone loads with
``MODEL.RETRIEVAL.BACKBONE_WEIGHTS``. ``<key>`` is a hash of the config file, the overrides and the
generator's version, so a changed recipe trains a new CNN and never reuses an old one. Training
goes to a temporary sibling folder renamed into place at the end, under an exclusive lock, so a
crash never leaves a half-trained CNN and concurrent processes train it once. The folder keeps
the training log, ``metrics.json`` (the loss curve) and ``results.json`` (the label AUCs on the
pretraining split's validation images).
"""
import hashlib
import json
import logging
import os
from typing import Optional, Sequence

from phrasedet.cache import build_once, default_cache_dir

__all__ = ["BUILTIN_CNN_CONFIG", "builtin_cnn_dir", "ensure_builtin_cnn", "train_builtin_cnn"]

logger = logging.getLogger("phrasedet.engine")

BUILTIN_CNN_CONFIG = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "configs", "pretraining",
                                                  "builtin_cnn.yaml"))


def _config(config: str, opts: Sequence[str], output_dir: str):
    from detectron2.config import get_cfg

    from phrasedet.config import add_phrasedet_config

    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(config)
    cfg.merge_from_list([*map(str, opts), "OUTPUT_DIR", output_dir])
    cfg.freeze()
    return cfg


def builtin_cnn_dir(cache_dir: Optional[str] = None, config: str = BUILTIN_CNN_CONFIG, opts: Sequence[str] = ()) -> str:
    """``<cache>/builtin-cnn-v<GENERATOR_VERSION>-<16 hex digits>``: the folder of the CNN that
    ``config`` with ``opts`` trains."""
    from phrasedet.data.synthetic import GENERATOR_VERSION

    with open(config, "rb") as f:
        digest = hashlib.sha256(f.read() + json.dumps([str(o) for o in opts]).encode()).hexdigest()[:16]
    return os.path.join(cache_dir or default_cache_dir(), f"builtin-cnn-v{GENERATOR_VERSION}-{digest}")


def train_builtin_cnn(output_dir: str, config: str = BUILTIN_CNN_CONFIG, opts: Sequence[str] = ()) -> dict:
    """Train the CNN of ``config`` (+ ``opts``) into ``output_dir`` and evaluate it on its test
    split. Returns the evaluation results (also written to ``results.json``)."""
    from detectron2.utils.env import seed_all_rng

    from .trainer import PhrasedetTrainer

    cfg = _config(config, opts, output_dir)
    os.makedirs(output_dir, exist_ok=True)
    with open(os.path.join(output_dir, "config.yaml"), "w") as f:
        f.write(cfg.dump())
    if cfg.SEED >= 0:
        seed_all_rng(cfg.SEED)
    trainer = PhrasedetTrainer(cfg)
    trainer.resume_or_load(resume=False)
    trainer.train()
    results = getattr(trainer, "_last_eval_results", None) or {}
    with open(os.path.join(output_dir, "results.json"), "w") as f:
        json.dump({"final_model": os.path.join(output_dir, "model_final.pth"), "results": results}, f, indent=1)
    return results


def ensure_builtin_cnn(cache_dir: Optional[str] = None, config: str = BUILTIN_CNN_CONFIG, opts: Sequence[str] = ()) -> str:
    """The cached CNN's ``model_final.pth``, trained on first use (see the module docstring)."""
    root = builtin_cnn_dir(cache_dir, config, opts)
    weights = os.path.join(root, "model_final.pth")

    def train(tmp):
        logger.info("training the built-in pretrained CNN (%s) into %s: about 20 minutes on 2 cores, once", config, root)
        results = train_builtin_cnn(tmp, config, opts)
        with open(os.path.join(tmp, "results.json"), "w") as f:  # the path it will have
            json.dump({"final_model": weights, "results": results}, f, indent=1)
        logger.info("built-in pretrained CNN ready: %s (validation: %s)", weights, results.get("image_labels"))

    build_once(root, train, done=lambda r: os.path.isfile(os.path.join(r, "model_final.pth")))
    return weights
