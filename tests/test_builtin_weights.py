"""``phrasedet://<model>/<file>`` (phrasedet/builtin_weights.py): the kept copy in results/, else the
model trained once into the cache (trained on first use only for model_final.pth), else an error
naming both places; Detectron2's PathManager and the checkpoint loaders take such addresses."""
import os

import pytest
import torch
from detectron2.utils.file_io import PathManager

from phrasedet import builtin_weights
from phrasedet.engine import pretrained_models

KEPT_CNN = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "results", "builtin_cnn", "backbone.pth"))


@pytest.fixture
def places(tmp_path, monkeypatch):
    """(results folder, cache folder), both empty; training fails unless a test fakes it."""
    results, cache = tmp_path / "results", tmp_path / "cache"
    results.mkdir()
    monkeypatch.setattr(builtin_weights, "RESULTS_DIR", str(results))
    monkeypatch.setenv("PHRASEDET_CACHE", str(cache))

    def no_training(output_dir, config, opts=()):
        raise AssertionError("trained")

    monkeypatch.setattr(pretrained_models, "train_builtin_model", no_training)
    return results, cache


def test_the_kept_cnn_of_the_repository():
    assert builtin_weights.RESULTS_DIR == os.path.dirname(os.path.dirname(KEPT_CNN))
    assert PathManager.get_local_path("phrasedet://builtin_cnn/backbone.pth") == KEPT_CNN


def test_the_kept_copy_comes_first(places):
    results, _ = places
    (results / "builtin_detector").mkdir()
    (results / "builtin_detector" / "model_final.pth").write_bytes(b"kept")
    assert PathManager.get_local_path("phrasedet://builtin_detector/model_final.pth") == \
        str(results / "builtin_detector" / "model_final.pth")
    with PathManager.open("phrasedet://builtin_detector/model_final.pth", "rb") as f:
        assert f.read() == b"kept"


def test_else_the_cached_model_trained_once(places, monkeypatch):
    trainings = []

    def fake_training(output_dir, config, opts=()):
        trainings.append(config)
        torch.save({"model": {}}, os.path.join(output_dir, "model_final.pth"))
        return {"bbox": {"AP": 1.0, "AP-red circle": 1.0}}

    monkeypatch.setattr(pretrained_models, "train_builtin_model", fake_training)
    address = "phrasedet://builtin_detector/model_final.pth"
    path = PathManager.get_local_path(address)
    assert path == os.path.join(pretrained_models.builtin_model_dir("builtin_detector"), "model_final.pth")
    assert trainings == [pretrained_models.BUILTIN_MODELS["builtin_detector"].config] and os.path.isfile(path)
    assert PathManager.get_local_path(address) == path and len(trainings) == 1  # once
    with open(os.path.join(os.path.dirname(path), "metrics.json"), "w") as f:
        f.write("{}")
    assert PathManager.get_local_path("phrasedet://builtin_detector/metrics.json") == os.path.join(os.path.dirname(path), "metrics.json")


def test_nothing_there_is_an_error_naming_the_places(places):
    results, _ = places
    folder = pretrained_models.builtin_model_dir("builtin_detector")
    with pytest.raises(FileNotFoundError, match=r"^phrasedet://builtin_detector/metrics.json: not kept at "
                       + rf"{results}/builtin_detector/metrics.json and not in the cached model's folder {folder} "
                       + r"\(only model_final.pth is trained on demand"):
        PathManager.get_local_path("phrasedet://builtin_detector/metrics.json")
    with pytest.raises(FileNotFoundError, match=r"^phrasedet://nothing/model_final.pth: no built-in pretrained model "
                                                r"'nothing' \(there are builtin_cnn, builtin_detector\)$"):
        PathManager.get_local_path("phrasedet://nothing/model_final.pth")
    with pytest.raises(ValueError, match=r"'phrasedet://builtin_detector': a built-in weights address is "
                                         r"phrasedet://<model>/<file>"):
        PathManager.get_local_path("phrasedet://builtin_detector")


def test_the_checkpoint_loaders_take_the_addresses(places):
    from detectron2.config import get_cfg
    from detectron2.modeling import build_model

    from phrasedet.config import add_phrasedet_config
    from phrasedet.modeling.checkpoint import PhrasedetCheckpointer, load_backbone_weights

    results, _ = places
    (results / "builtin_cnn").mkdir()
    os.symlink(KEPT_CNN, results / "builtin_cnn" / "backbone.pth")
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(os.path.join(os.path.dirname(__file__), "..", "configs", "pretraining", "builtin_detector.yaml"))
    model = build_model(cfg)
    load_backbone_weights(model.backbone, "phrasedet://builtin_cnn/backbone.pth")  # MODEL.RETRIEVAL.BACKBONE_WEIGHTS
    kept = torch.load(KEPT_CNN, weights_only=True)["model"]
    assert all(torch.equal(v, kept[f"backbone.{k}"]) for k, v in model.backbone.state_dict().items())
    checkpointer = PhrasedetCheckpointer(model)
    with pytest.raises(FileNotFoundError, match=r"^phrasedet://builtin_cnn/model_best.pth: not kept at "):
        checkpointer.load("phrasedet://builtin_cnn/model_best.pth")  # as it is: not a failed download


@pytest.mark.parametrize("name", ["builtin_cnn", "builtin_detector"])
def test_a_pretrained_model_is_trained_from_its_seed_even_the_default_seed_0(name, tmp_path, monkeypatch):
    import random

    import numpy as np

    from phrasedet.engine import trainer

    class Trainer:  # what every random stream gives the moment the trainer is built
        def __init__(self, cfg):
            draws.append((torch.rand(3).tolist(), float(np.random.rand()), random.random()))

        def resume_or_load(self, resume):
            pass

        def train(self):
            pass

    draws = []
    monkeypatch.setattr(trainer, "PhrasedetTrainer", Trainer)
    config = pretrained_models.builtin_model(name).config
    for state in (1, 2):  # whatever state the caller's streams are in
        torch.manual_seed(state), np.random.seed(state), random.seed(state)
        pretrained_models.train_builtin_model(str(tmp_path / f"seed0_{state}"), config, ["SEED", 0])
    pretrained_models.train_builtin_model(str(tmp_path / "seed5"), config, ["SEED", 5])
    torch.manual_seed(0), np.random.seed(0), random.seed(0)
    assert draws[0] == draws[1] == (torch.rand(3).tolist(), float(np.random.rand()), random.random())
    assert draws[2] != draws[0]


def test_an_unknown_model_is_a_key_error_naming_the_known_ones():
    with pytest.raises(KeyError) as error:
        pretrained_models.builtin_model("nothing")
    assert error.value.args == ("no built-in pretrained model 'nothing' (there are builtin_cnn, builtin_detector)",)


def test_the_folder_is_named_by_the_first_16_hex_digits_of_the_config_file_and_the_opts_as_strings(tmp_path):
    import hashlib

    from phrasedet.data.synthetic import GENERATOR_VERSION

    config = tmp_path / "cnn.yaml"
    config.write_bytes(b"_BASE_: x.yaml\n")
    digest = hashlib.sha256(b'_BASE_: x.yaml\n["SEED", "1"]').hexdigest()[:16]
    assert pretrained_models.builtin_model_dir("builtin_cnn", "/cache", str(config), ["SEED", 1]) == \
        f"/cache/builtin-cnn-v{GENERATOR_VERSION}-{digest}"


class _Trainer:
    """Detectron2's trainer as train_builtin_model drives it: what it was given, and its results."""

    calls = []

    def __init__(self, cfg):
        self.calls.append(("built", cfg.OUTPUT_DIR, cfg.SEED))

    def resume_or_load(self, resume):
        self.calls.append(("resume", resume))

    def train(self):
        self._last_eval_results = {"image_labels": {"auc": 0.5}}


def test_training_writes_its_config_and_results_into_its_folder_and_starts_afresh(tmp_path, monkeypatch):
    import json

    import yaml

    from phrasedet.engine import trainer

    monkeypatch.setattr(trainer, "PhrasedetTrainer", _Trainer)
    monkeypatch.setattr(_Trainer, "calls", [])
    monkeypatch.chdir(tmp_path)  # a file written outside the model's folder would land here
    out = tmp_path / "model"
    results = pretrained_models.train_builtin_model(str(out), pretrained_models.builtin_model("builtin_cnn").config,
                                                    ["SEED", 7])
    assert results == {"image_labels": {"auc": 0.5}}
    assert _Trainer.calls == [("built", str(out), 7), ("resume", False)] and _Trainer.calls[1][1] is False
    assert sorted(os.listdir(tmp_path)) == ["model"] and sorted(os.listdir(out)) == ["config.yaml", "results.json"]
    written = yaml.safe_load((out / "config.yaml").read_text())
    assert written["OUTPUT_DIR"] == str(out) and written["SEED"] == 7
    assert (out / "results.json").read_text() == json.dumps(
        {"final_model": str(out / "model_final.pth"), "results": {"image_labels": {"auc": 0.5}}}, indent=1)


def _fake_training(trainings):
    def train(output_dir, config, opts=()):
        trainings.append((config, list(opts)))
        torch.save({"model": {}}, os.path.join(output_dir, "model_final.pth"))
        return {"bbox": {"AP": 1.0, "AP-red circle": 0.5}, "other": {"AP": 2.0}}
    return train


def test_a_given_config_keys_the_cache_and_the_metric_is_logged_without_per_class_ap(places, tmp_path, monkeypatch, caplog):
    import json
    import logging

    from phrasedet.engine import pretrained_cnn

    trainings = []
    monkeypatch.setattr(pretrained_models, "train_builtin_model", _fake_training(trainings))
    config = tmp_path / "my_detector.yaml"
    config.write_text(open(pretrained_models.builtin_model("builtin_detector").config).read() + "# changed\n")
    cache = str(tmp_path / "mine")
    with caplog.at_level(logging.INFO, logger="phrasedet.engine"):
        weights = pretrained_models.ensure_builtin_model("builtin_detector", cache, str(config), ["SEED", 3])
    root = pretrained_models.builtin_model_dir("builtin_detector", cache, str(config), ["SEED", 3])
    assert root != pretrained_models.builtin_model_dir("builtin_detector", cache, opts=["SEED", 3])
    assert weights == os.path.join(root, "model_final.pth") and trainings == [(str(config), ["SEED", 3])]
    assert open(os.path.join(root, "results.json")).read() == json.dumps(
        {"final_model": weights, "results": {"bbox": {"AP": 1.0, "AP-red circle": 0.5}, "other": {"AP": 2.0}}}, indent=1)
    assert f"built-in pretrained model builtin_detector ready: {weights} (validation: {{'AP': 1.0}})" in caplog.messages
    # the CNN's names for the same machinery, with a config of its own
    cnn_config = tmp_path / "my_cnn.yaml"
    cnn_config.write_text(open(pretrained_cnn.BUILTIN_CNN_CONFIG).read() + "# changed\n")
    cnn_root = pretrained_models.builtin_model_dir("builtin_cnn", cache, str(cnn_config))
    assert pretrained_cnn.builtin_cnn_dir(cache, str(cnn_config)) == cnn_root != pretrained_cnn.builtin_cnn_dir(cache)
    assert pretrained_cnn.ensure_builtin_cnn(cache, str(cnn_config)) == os.path.join(cnn_root, "model_final.pth")
    assert trainings[1] == (str(cnn_config), [])


def test_a_folder_without_model_final_is_trained_into(places, tmp_path, monkeypatch):
    trainings = []
    monkeypatch.setattr(pretrained_models, "train_builtin_model", _fake_training(trainings))
    cache = str(tmp_path / "mine")
    root = pretrained_models.builtin_model_dir("builtin_cnn", cache)
    os.makedirs(root)  # empty: made by hand, or by a tool that failed before training
    weights = pretrained_models.ensure_builtin_model("builtin_cnn", cache)
    assert os.path.isfile(weights) and len(trainings) == 1
