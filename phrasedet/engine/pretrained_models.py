"""The built-in pretrained models, trained once and cached like the built-in dataset: the stand-ins
for the papers' pretrained weights.

- ``builtin_cnn`` (``configs/pretraining/builtin_cnn.yaml``): a ``MultiLabelImageClassifier`` on the
  built-in pretraining split, the stand-in for ImageNet weights that the retrieval and pointing
  comparisons start from (about 20 minutes on 2 cores);
- ``builtin_detector`` (``configs/pretraining/builtin_detector.yaml``): Detectron2's Faster R-CNN
  on the same images' 48 colour-shape boxes, starting from the CNN, the stand-in for the COCO
  detector paper 003's phrase detector starts from (``configs/Base-Builtin-Pretrained.yaml``).

:func:`ensure_builtin_model` trains a model's config on first use into
``<cache>/<name>-v<GENERATOR_VERSION>-<key>/`` (``builtin-cnn-...``, ``builtin-detector-...``) and
returns its ``model_final.pth``. ``<key>`` is a hash of the config file and the overrides, so a
changed recipe trains a new model and never reuses an old one (the detector's key does not cover
the CNN file it starts from: that is the kept ``results/builtin_cnn/backbone.pth``, changed only by
a commit). Training goes to a temporary sibling folder renamed into place at the end, under an
exclusive lock (:func:`phrasedet.cache.build_once`), so a crash never leaves a half-trained model
and concurrent processes train it once. The folder keeps the training log, ``metrics.json`` (the
loss and validation curves) and ``results.json`` (the last validation).

The copies kept in the repository (``results/<name>/``) come first wherever a config names a
model by its ``phrasedet://<name>/<file>`` address (:mod:`phrasedet.builtin_weights`).
"""
import hashlib
import json
import logging
import os
from dataclasses import dataclass
from typing import Optional, Sequence

from phrasedet.cache import build_once, default_cache_dir

__all__ = ["BUILTIN_MODELS", "BuiltinModel", "builtin_model", "builtin_model_dir", "ensure_builtin_model",
           "train_builtin_model"]

logger = logging.getLogger("phrasedet.engine")

_CONFIGS = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "configs", "pretraining"))


@dataclass(frozen=True)
class BuiltinModel:
    """A built-in pretrained model: its ``name`` (``results/<name>/``, ``phrasedet://<name>/``), the
    ``config`` that trains it, about how many ``minutes`` that takes on 2 cores, and the ``metric``
    of its validation results that the log shows when it is ready."""

    name: str
    config: str
    minutes: int
    metric: str


BUILTIN_MODELS = {m.name: m for m in (
    BuiltinModel("builtin_cnn", os.path.join(_CONFIGS, "builtin_cnn.yaml"), 20, "image_labels"),
    BuiltinModel("builtin_detector", os.path.join(_CONFIGS, "builtin_detector.yaml"), 30, "bbox"),
)}


def builtin_model(name: str) -> BuiltinModel:
    """The built-in model ``name``; a ``KeyError`` naming the known ones otherwise."""
    if name not in BUILTIN_MODELS:
        raise KeyError(f"no built-in pretrained model {name!r} (there are {', '.join(BUILTIN_MODELS)})")
    return BUILTIN_MODELS[name]


def _config(config: str, opts: Sequence[str], output_dir: str):
    from detectron2.config import get_cfg

    from phrasedet.config import add_phrasedet_config

    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(config)
    cfg.merge_from_list([*map(str, opts), "OUTPUT_DIR", output_dir])
    cfg.freeze()
    return cfg


def builtin_model_dir(name: str, cache_dir: Optional[str] = None, config: Optional[str] = None, opts: Sequence[str] = ()) -> str:
    """``<cache>/<name with dashes>-v<GENERATOR_VERSION>-<16 hex digits>``: the folder of the model
    that ``config`` (default: the model's) with ``opts`` trains."""
    from phrasedet.data.synthetic import GENERATOR_VERSION

    with open(config or builtin_model(name).config, "rb") as f:
        digest = hashlib.sha256(f.read() + json.dumps([str(o) for o in opts]).encode()).hexdigest()[:16]
    return os.path.join(cache_dir or default_cache_dir(), f"{name.replace('_', '-')}-v{GENERATOR_VERSION}-{digest}")


def train_builtin_model(output_dir: str, config: str, opts: Sequence[str] = ()) -> dict:
    """Train ``config`` (+ ``opts``) into ``output_dir`` and evaluate it on its test split, as
    ``tools/train_net.py`` does. Returns the evaluation results (also written to ``results.json``)."""
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


def ensure_builtin_model(name: str, cache_dir: Optional[str] = None, config: Optional[str] = None,
                         opts: Sequence[str] = ()) -> str:
    """The cached model's ``model_final.pth``, trained on first use (see the module docstring)."""
    model = builtin_model(name)
    config = config or model.config
    root = builtin_model_dir(name, cache_dir, config, opts)
    weights = os.path.join(root, "model_final.pth")

    def train(tmp):
        logger.info("training the built-in pretrained model %s (%s) into %s: about %d minutes on 2 cores, once", name,
                    config, root, model.minutes)
        results = train_builtin_model(tmp, config, opts)
        with open(os.path.join(tmp, "results.json"), "w") as f:  # the path it will have
            json.dump({"final_model": weights, "results": results}, f, indent=1)
        shown = {k: v for k, v in (results.get(model.metric) or {}).items() if not k.startswith("AP-")}  # no per-class AP
        logger.info("built-in pretrained model %s ready: %s (validation: %s)", name, weights, shown)

    build_once(root, train, done=lambda r: os.path.isfile(os.path.join(r, "model_final.pth")))
    return weights
