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
