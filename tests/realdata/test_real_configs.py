"""Every real-data config (one whose DATASETS name a registered real split, found by reading the
configs, so a new one is covered without editing this file) trains for 2 iterations on the CPU on
the miniature tree (tests/realdata/miniature.py) with tiny inputs, evaluates, and the standalone
evaluator on what the run saved gives the training loop's numbers.

What is shrunk (``tiny_overrides``): image sizes, batch sizes, proposal and sampling counts, the
schedule (2 iterations; a frozen-CNN phase of 1 iteration so the unfreezing runs). What is kept:
the architecture the config says (depths, widths, heads, losses, pooling, text encoders).
``MODEL.WEIGHTS``: a local fake of the file the config names, with its real key names
(``weight_overrides``), so every part the config says is pretrained loads as on real data.
"""
import glob
import json
import os
import re

import numpy as np
import pytest
from detectron2.data import MetadataCatalog
from detectron2.engine import default_argument_parser

from phrasedet.data.datasets import EVALUATOR_TYPE, RETRIEVAL_EVALUATOR_TYPE
from tests.checkpoint_fixtures import write_model_zoo_checkpoint, write_torchvision_resnet
from tests.evaluation.retrieval_toy import load_tool
from tests.test_configs import CONFIG_DIR, CONFIGS, _load

from .miniature import is_real_split


def _datasets(cfg):
    return [*cfg.DATASETS.TRAIN, *cfg.DATASETS.TEST, *filter(None, [cfg.PHRASEDET.TEXT.WORD2VEC_DATASET])]


def real_data_configs():
    """Every config that names a real split, but the ``Base-*`` files: a base that does
    (``Base-PhraseDet.yaml``) is run through the configs built on it (``qa_rcnn_R101_flickr.yaml``)."""
    return [os.path.relpath(p, CONFIG_DIR) for p in CONFIGS
            if not os.path.basename(p).startswith("Base-") and any(map(is_real_split, _datasets(_load(p))))]


def documented_weights(config):
    """The ``MODEL.WEIGHTS`` address ``config`` names (a path under configs/), "" for none."""
    return _load(os.path.join(CONFIG_DIR, config)).MODEL.WEIGHTS


def write_fake_weights(address, folder):
    """A local file standing in for the documented weights ``address``, as a user without a
    network would give it: same file name, same format, the real key names and shapes, random
    values (tests/checkpoint_fixtures.py). Written once per folder; returns its path.

    - ``detectron2://<zoo config>/<id>/<file>.pkl``: that model-zoo config's Faster R-CNN;
    - ``https://download.pytorch.org/models/resnet<depth>-<hash>.pth``: torchvision's ResNet.
    """
    path = os.path.join(folder, os.path.basename(address))
    if os.path.exists(path):
        return path
    zoo = re.fullmatch(r"detectron2://(.+)/\d+/model_final_\w+\.pkl", address)
    resnet = re.fullmatch(r"https://download\.pytorch\.org/models/resnet(\d+)-\w+\.pth", address)
    if zoo:
        write_model_zoo_checkpoint(path, zoo.group(1) + ".yaml")
    elif resnet:
        write_torchvision_resnet(path, int(resnet.group(1)))
    else:
        raise AssertionError(f"no fake for the documented weights {address!r}: add one to write_fake_weights")
    return path


def weight_overrides(config, folder):
    """``MODEL.WEIGHTS`` of ``config``'s run: a local fake of the file its config names (none
    when it names none), so every part the config says is pretrained is loaded, as on real data."""
    address = documented_weights(config)
    return ["MODEL.WEIGHTS", write_fake_weights(address, folder) if address else ""]


@pytest.fixture(scope="session")
def fake_weights_dir(tmp_path_factory):
    """Where :func:`write_fake_weights` keeps its files, shared by the session's runs."""
    return str(tmp_path_factory.mktemp("fake_weights"))


def _phrase_detection_overrides():
    # SOLVER.BASE_LR: the fake weights' random values give losses of ~1e4; two steps at the configs'
    # 0.01 leave an FPN detector without a single finite proposal (nothing to evaluate)
    return ["SOLVER.BASE_LR", "0.0001", "INPUT.MIN_SIZE_TRAIN", "(64,)", "INPUT.MAX_SIZE_TRAIN", "96", "INPUT.MIN_SIZE_TEST", "64",
            "INPUT.MAX_SIZE_TEST", "96", "INPUT.PHRASES.MAX_PER_IMAGE", "2", "MODEL.RPN.PRE_NMS_TOPK_TRAIN", "200",
            "MODEL.RPN.POST_NMS_TOPK_TRAIN", "32", "MODEL.RPN.PRE_NMS_TOPK_TEST", "100", "MODEL.RPN.POST_NMS_TOPK_TEST", "8",
            "MODEL.RPN.BATCH_SIZE_PER_IMAGE", "32", "MODEL.PHRASE_ROI_HEADS.ROIS_PER_PHRASE", "8",
            "PHRASEDET.TEXT.WORD2VEC_DIM", "16", "TEST.PHRASE_DETECTION.SAVE_PREDICTIONS", "True"]


def _retrieval_overrides(cfg):
    r = cfg.MODEL.RETRIEVAL
    opts = ["INPUT.RETRIEVAL.RESIZE", "40", "INPUT.RETRIEVAL.CROP", "32", "TEST.RETRIEVAL.IMS_PER_BATCH", "8",
            "TEST.RETRIEVAL.SAVE_EMBEDDINGS", "True"]
    if r.FREEZE_BACKBONE_ITERS > 1:  # a frozen-CNN phase: 1 iteration, then the fine-tuning runs
        opts += ["MODEL.RETRIEVAL.FREEZE_BACKBONE_ITERS", "1"]
    if cfg.PHRASEDET.RETRIEVAL_STAGES.ENABLED:  # 1 iteration of stage I, 1 of stage II
        opts += ["PHRASEDET.RETRIEVAL_STAGES.STAGE1_ITERS", "1", "PHRASEDET.RETRIEVAL_STAGES.STAGE1_STEPS", "[]",
                 "SOLVER.MAX_ITER", "1"]
    if cfg.MODEL.META_ARCHITECTURE == "DSVELoc":
        opts += ["INPUT.POINTING.SIZE", "64", "TEST.POINTING.IMS_PER_BATCH", "4", "TEST.POINTING.SAVE_PREDICTIONS", "True",
                 "TEST.POINTING.NUM_VISUALIZE", "0"]  # pictures: tests/test_pointing_train_net.py
    return opts


def tiny_overrides(cfg, out):
    """KEY VALUE pairs that make ``cfg`` a 2-iteration CPU run writing to ``out``."""
    common = ["MODEL.DEVICE", "cpu", "OUTPUT_DIR", out, "DATALOADER.NUM_WORKERS", "0", "SOLVER.IMS_PER_BATCH", "2",
              "SOLVER.MAX_ITER", "2", "SOLVER.STEPS", "()", "SOLVER.WARMUP_ITERS", "0", "SOLVER.CHECKPOINT_PERIOD", "1000",
              "PHRASEDET.TEXT.WORD2VEC_EPOCHS", "1", "TEST.EVAL_PERIOD", "0"]
    if cfg.MODEL.META_ARCHITECTURE == "PhraseRCNN":
        return common + _phrase_detection_overrides()
    return common + _retrieval_overrides(cfg)


def _saved(out, dataset, file_name):
    """The one ``<out>/**/inference/<dataset>/<file_name>`` (staged runs save in their last stage's folder)."""
    (path,) = glob.glob(os.path.join(out, "**", "inference", dataset, file_name), recursive=True)
    return path


def _standalone(cfg, out, dataset, task):
    """The standalone evaluator's results on what the run saved for ``dataset``."""
    if task == EVALUATOR_TYPE:
        return load_tool("evaluate_predictions").main([
            "--predictions", _saved(out, dataset, "phrase_predictions.jsonl"), "--dataset", dataset,
            "--mode", cfg.TEST.PHRASE_DETECTION.MODE, "--train-dataset", cfg.DATASETS.TRAIN[0]])
    if task == RETRIEVAL_EVALUATOR_TYPE:
        return load_tool("evaluate_retrieval").main([
            "--embeddings", _saved(out, dataset, "retrieval_embeddings.npz"), "--dataset", dataset,
            "--folds", *map(str, cfg.TEST.RETRIEVAL.FOLDS)])
    return load_tool("evaluate_pointing").main([
        "--dataset", dataset, "--points", _saved(out, dataset, "pointing_predictions.npz"),
        "--hit-rule", cfg.TEST.POINTING.HIT_RULE, "--tolerance", str(cfg.TEST.POINTING.TOLERANCE)])


def _numbers(results):
    """The finite numbers of a results dict, flattened to {dotted key: value}."""
    flat = {}
    for key, value in results.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in _numbers(value).items()})
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value):
            flat[key] = float(value)
    return flat


@pytest.mark.parametrize("config", sorted(c for c in real_data_configs() if documented_weights(c)))
def test_real_data_configs_name_the_weights_they_start_from(config):
    """A config that says parts are pretrained names the file they come from (a user who
    follows the docs gets it downloaded, or gives a local copy), and the file has a fake here."""
    cfg = _load(os.path.join(CONFIG_DIR, config))
    assert cfg.PHRASEDET.WEIGHTS.PRETRAINED_PARTS, config
    assert documented_weights(config).startswith(("detectron2://", "https://download.pytorch.org/")), config


@pytest.fixture
def restored_loggers():
    """train_net's logger set-up (Detectron2's ``setup_logger``: handlers added, ``propagate``
    off) undone after the test, so that later tests of the session still capture log records."""
    import logging

    names = ("phrasedet", "detectron2", "d2", "fvcore")
    saved = {n: (list(logging.getLogger(n).handlers), logging.getLogger(n).propagate, logging.getLogger(n).level) for n in names}
    yield
    for name, (handlers, propagate, level) in saved.items():
        logger = logging.getLogger(name)
        for handler in set(logger.handlers) - set(handlers):
            handler.close()
        logger.handlers[:], logger.propagate = handlers, propagate
        logger.setLevel(level)


@pytest.mark.usefixtures("restored_loggers")
@pytest.mark.parametrize("config", real_data_configs())
def test_real_data_config_trains_and_the_standalone_evaluator_agrees(config, miniature_datasets, fake_weights_dir, tmp_path):
    path = os.path.join(CONFIG_DIR, config)
    out = str(tmp_path / "run")
    opts = tiny_overrides(_load(path), out) + weight_overrides(config, fake_weights_dir)
    cfg = _load(path, opts)
    args = default_argument_parser().parse_args(["--config-file", path, *opts])
    results = load_tool("train_net").main(args)

    assert _iterations_trained(out) == 2
    if len(cfg.DATASETS.TEST) == 1:  # Detectron2 returns one test split's results unnested
        results = {cfg.DATASETS.TEST[0]: results}
    assert set(results) == set(cfg.DATASETS.TEST)
    for dataset in cfg.DATASETS.TEST:
        task = MetadataCatalog.get(dataset).evaluator_type
        in_loop = _numbers(results[dataset])
        standalone = _numbers(_standalone(cfg, out, dataset, task))
        assert any(k.startswith(task) for k in results[dataset]) and in_loop and in_loop.keys() <= standalone.keys(), dataset
        assert {k: standalone[k] for k in in_loop} == pytest.approx(in_loop, abs=1e-6), dataset
    for checkpoint in glob.glob(os.path.join(out, "**", "*.pth"), recursive=True):
        os.remove(checkpoint)  # up to 1.5 GB each (R152, a 2,400-d SRU and Adam's state), kept by pytest's tmp dirs


def _iterations_trained(out):
    """Iterations trained, by the last training record (one with ``total_loss``) of every
    ``metrics.json`` under ``out`` (a staged run has one per stage)."""
    total = 0
    for path in glob.glob(os.path.join(out, "**", "metrics.json"), recursive=True):
        with open(path) as f:
            total += 1 + max(r["iteration"] for r in map(json.loads, f) if "total_loss" in r)
    return total


def test_every_real_data_config_is_found():
    """The rule that picks the configs above: the shipped real-data configs, and no built-in one."""
    assert set(real_data_configs()) == {
        "qa_rcnn_R101_flickr.yaml", "qa_rcnn_R50_FPN_flickr.yaml", "referit.yaml",
        "pointing/dsve_loc_R152_coco.yaml",
        "retrieval/instance_loss_R50_flickr.yaml", "retrieval/two_branch_flickr.yaml",
        "retrieval/vsepp_gru_R152_coco.yaml", "retrieval/vsepp_gru_R152_flickr.yaml",
        "retrieval/vsepp_gru_R152_ft_coco.yaml", "retrieval/vsepp_gru_precomp_coco.yaml",
    }
