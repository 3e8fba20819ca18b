"""Paper 001's instance-loss diagnosis (phrasedet/evaluation/retrieval/instance_fit.py and
tools/evaluation/probe_instance_loss.py): the features' profile by hand and against a slow count on
the oracle's features, the classifier's fit by hand and against a per-image loop on a trained
model, and the tool's validation rsum equal to the run's own validation."""
import json
import math
import os

import numpy as np
import pytest
import torch
from torch import nn

from phrasedet.evaluation.retrieval.instance_fit import common_columns, feature_profile, format_fits, format_profiles, instance_fit

from ..tool_runs import ROOT, load_tool


def test_the_profile_of_a_hand_made_representation():
    train = np.array([[1, 0, 2, 0], [1, 0, 0, 0], [1, 3, 0, 0]], dtype=np.float32)
    val = np.array([[0, 0, 0, 5], [1, 0, 0, -1], [0, 0, 0, 0]], dtype=np.float32)
    p = feature_profile(train, val, rare=1)  # support per column: 3, 1, 1, 0
    assert p["dims"] == 4 and p["unused_dims"] == 1 and p["rare_dims"] == 2
    assert p["nonzero"] == pytest.approx(100 * 5 / 12)
    assert p["mean_norm"] == pytest.approx((math.sqrt(5) + 1 + math.sqrt(10)) / 3)
    assert p["images_with_rare"] == pytest.approx(200 / 3)  # rows 0 and 2
    assert p["rare_mass"] == pytest.approx(100 * (2 / 3 + 0 + 3 / 4) / 3)
    assert p["val_unused_mass"] == pytest.approx(100 * (1 + 0.5 + 0) / 3)  # |-1| counts; a row of zeros counts 0
    assert feature_profile(train, val, rare=3)["rare_dims"] == 3
    assert common_columns(train, rare=1).tolist() == [True, False, False, False]
    assert common_columns(train, rare=0).tolist() == [True, True, True, False]
    with pytest.raises(ValueError) as error:
        feature_profile(train, val[:, :3])
    assert str(error.value) == "features must be [N, F] and [M, F] with one F, got (3, 4) and (3, 3)"
    with pytest.raises(ValueError) as error:
        feature_profile(train[0], val)
    assert str(error.value) == "features must be [N, F] and [M, F] with one F, got (4,) and (3, 4)"
    small = feature_profile(train, np.array([[0, 0, 0, 0.25], [0.25, 0, 0, 0.5], [0, 0, 0, 0]]), rare=1)
    assert small["val_unused_mass"] == pytest.approx(100 * (1 + 2 / 3 + 0) / 3)  # shares of rows of mass below 1
    table = format_profiles({"toy": p}, rare=1)
    assert table.splitlines() == [
        "| representation | dims | nonzero (%) | mean norm | unused dims | rare dims (1-1 images) | training images with a "
        "rare dim (%) | mass in rare dims (%) | val. mass in unused dims (%) |", "|---|---|---|---|---|---|---|---|---|",
        "| toy | 4 | 41.7 | 2.13 | 1 | 2 | 66.7 | 47.2 | 50.0 |"]


@pytest.fixture(scope="module")
def oracle(oracle_global):
    return oracle_global


def test_the_profile_agrees_with_a_slow_count_on_the_oracle(oracle):
    train = np.load(os.path.join(oracle, "builtin_flickr30k_captions_train.npy"))
    val = np.load(os.path.join(oracle, "builtin_flickr30k_captions_val.npy"))
    p = feature_profile(train, val)
    support = [sum(1 for row in train if row[j] != 0) for j in range(train.shape[1])]
    rare = [j for j, s in enumerate(support) if 1 <= s <= 5]
    unused = [j for j, s in enumerate(support) if s == 0]
    assert (p["rare_dims"], p["unused_dims"]) == (len(rare), len(unused)) and 0 < len(rare) < train.shape[1]
    with_rare = sum(1 for row in train if any(row[j] != 0 for j in rare))
    assert p["images_with_rare"] == pytest.approx(100 * with_rare / len(train))
    shares = [sum(abs(row[j]) for j in rare) / sum(abs(row)) for row in train]
    assert p["rare_mass"] == pytest.approx(100 * sum(shares) / len(shares), rel=1e-5)
    val_shares = [sum(abs(row[j]) for j in unused) / sum(abs(row)) for row in val]
    assert p["val_unused_mass"] == pytest.approx(100 * sum(val_shares) / len(val_shares), rel=1e-5)


class _Toy(nn.Module):
    """Images are their planted features; a caption's feature is the one-hot of the class named by
    its text; the classifier is the identity over 3 classes (image ids 'a', 'b', 'c')."""

    def __init__(self, images):
        super().__init__()
        self.images = images
        self.instance_loss = nn.Module()
        self.instance_loss.classifier = nn.Linear(3, 3, bias=False)
        self.instance_loss.classifier.weight.data = torch.eye(3)

    def instance_classes(self, batch, keys):
        return torch.tensor(["abc".index(x["image_id"]) for x in batch])

    def image_features(self, batch):
        return torch.stack([self.images[x["image_id"]] for x in batch])

    def sentence_encoder(self, captions):
        return torch.stack([torch.eye(3)["abc".index(c)] * 2 for c in captions])


def test_the_fit_of_a_hand_made_classifier():
    model = _Toy({"a": torch.tensor([3.0, 0, 0]), "b": torch.tensor([0, 0, 4.0]), "c": torch.tensor([0, 0, 1.0])})
    batches = [[{"image_id": "a", "captions": ["a", "b"]}], [{"image_id": "b", "captions": ["b"]}, {"image_id": "c", "captions": []}]]
    fit = instance_fit(model, batches)
    assert fit["images"] == 3 and fit["captions"] == 3
    assert fit["image_accuracy"] == pytest.approx(200 / 3)  # b's image is scored as c
    assert fit["text_accuracy"] == pytest.approx(200 / 3)  # a's caption "b" is scored as b
    ce = lambda logits, c: -torch.log_softmax(torch.tensor(logits, dtype=torch.float32), 0)[c].item()  # noqa: E731
    assert fit["image_loss"] == pytest.approx((ce([3, 0, 0], 0) + ce([0, 0, 4], 1) + ce([0, 0, 1], 2)) / 3, rel=1e-6)
    assert fit["text_loss"] == pytest.approx((ce([2, 0, 0], 0) + ce([0, 2, 0], 0) + ce([0, 2, 0], 1)) / 3, rel=1e-6)
    assert fit["image_norm"] == pytest.approx(8 / 3) and fit["text_norm"] == pytest.approx(2)
    with pytest.raises(ValueError) as error:
        instance_fit(model, [])
    assert str(error.value) == "instance_fit: no images in the batches"
    table = format_fits({"toy": {**fit, "gap": None}}, ("gap",))
    assert table.splitlines() == [
        "| run | image_accuracy | text_accuracy | image_loss | text_loss | image_norm | text_norm | gap |",
        "|---|---|---|---|---|---|---|---|",
        f"| toy | 66.67 | 66.67 | {fit['image_loss']:.2f} | {fit['text_loss']:.2f} | 2.67 | 2.00 | - |"]


def _tool():
    return load_tool("probe_instance_loss.py")


@pytest.fixture(scope="module")
def trained_run(oracle, tmp_path_factory):
    """A 100-iteration instance-loss model on the oracle (stage I's losses), validated every 50, as a
    finished run folder with its config.yaml (well above chance: the slow check below needs a model)."""
    from phrasedet.engine.comparison.protocol import config_of
    from phrasedet.engine.staged.selected_training import run_selected

    out = tmp_path_factory.mktemp("run")
    cfg = config_of(os.path.join(ROOT, "configs", "retrieval", "instance_loss.yaml"), [
        "PHRASEDET.RETRIEVAL_STAGES.ENABLED", False, "MODEL.RETRIEVAL.LOSS.WEIGHT", 0.0, "MODEL.RETRIEVAL.IMAGE_INPUT", "features",
        "MODEL.RETRIEVAL.IMAGE_FEATURES_DIR", oracle, "PHRASEDET.TEXT.WORD2VEC_EPOCHS", 1, "DATALOADER.NUM_WORKERS", 0,
        "SOLVER.MAX_ITER", 100, "SOLVER.STEPS", "()", "SOLVER.BASE_LR", 0.001, "PHRASEDET.SELECTION.DATASET",
        "builtin_flickr30k_captions_val", "PHRASEDET.SELECTION.PERIOD", 50, "OUTPUT_DIR", str(out)])
    run_selected(cfg)
    (out / "config.yaml").write_text(cfg.dump())
    return out


def test_the_tool_agrees_with_the_run_and_with_image_by_image_loops(oracle, trained_run, tmp_path, capsys):
    from detectron2.data import DatasetCatalog

    from phrasedet.engine.trainer import PhrasedetTrainer
    from phrasedet.evaluation.retrieval.protocols import evaluate_retrieval
    from phrasedet.modeling.meta_arch.image_text_embedding import image_key

    tool = _tool()
    tool.main(["--features", f"oracle={oracle}", "--run", f"il={trained_run}", "--output", str(tmp_path / "fit.json")])
    printed = capsys.readouterr().out
    assert "| oracle | 1138 |" in printed and "| il | " in printed
    fit = json.loads((tmp_path / "fit.json").read_text())
    run = fit["runs"]["il"]
    selection = json.loads((trained_run / "selection.json").read_text())
    assert run["weights"] == selection["weights"]
    assert run["val_rsum"] == pytest.approx(selection["value"], abs=1e-6)  # the run's own validation of that model
    # the slow way: every training image alone through the model
    cfg, model, _ = tool.run_model(str(trained_run))
    inputs = [x for batch in PhrasedetTrainer.build_test_loader(cfg, "builtin_flickr30k_captions_train") for x in batch]
    assert len(inputs) == 600
    correct = {"image": 0, "text": 0}
    images, captions, owner = [], [], []
    with torch.no_grad():
        for n, x in enumerate(inputs):
            target = model.image_classes[image_key(x.get("dataset", ""), x["image_id"])]
            image = model.image_features([x])
            correct["image"] += int(model.instance_loss.classifier(image)[0].argmax() == target)
            texts = model.sentence_encoder(x["captions"])  # an image's captions together (no batch statistics in eval mode)
            correct["text"] += int((model.instance_loss.classifier(texts).argmax(1) == target).sum())
            out = model.inference([x])[0]
            images.append(out["image_embedding"])
            captions.extend(out["caption_embeddings"])
            owner.extend([n] * len(x["captions"]))
    assert run["image_accuracy"] == pytest.approx(100 * correct["image"] / 600)
    assert run["text_accuracy"] == pytest.approx(100 * correct["text"] / len(captions))
    size = len(DatasetCatalog.get("builtin_flickr30k_captions_val"))  # 60 images: 10 training folds of 60
    folds = [evaluate_retrieval(torch.stack(images[k * size:(k + 1) * size]),
                                torch.stack([c for c, o in zip(captions, owner) if k * size <= o < (k + 1) * size]),
                                np.array([o - k * size for o in owner if k * size <= o < (k + 1) * size]))["retrieval"]["rsum"]
             for k in range(600 // size)]
    assert size == 60 and run["train_rsum"] > 90  # chance: about 53 for 60 images
    # image by image, the embeddings differ from the batched ones by about 1e-7: a tie may flip a rank
    assert run["train_rsum"] == pytest.approx(sum(folds) / len(folds), abs=0.2)
    assert run["gap"] == pytest.approx(run["train_rsum"] - run["val_rsum"])


def test_the_tool_names_what_is_wrong(tmp_path):
    tool = _tool()
    for argv, message in (([], "nothing to probe: give --features NAME=DIR or --run NAME=RUN_DIR"),
                          (["--run", "x"], "--run takes NAME=PATH, got 'x'"),
                          (["--features", f"a={tmp_path}", "--features", f"a={tmp_path}"], "--features: each NAME once, got ['a', 'a']"),
                          (["--features", f"a={tmp_path}"], f"--features: {tmp_path}/builtin_flickr30k_captions_train.npy does not exist "
                                                            "(a features folder holds <dataset>.npy per split)"),
                          (["--run", f"a={tmp_path}"], f"--run: {tmp_path}/config.yaml does not exist (is {tmp_path} a finished "
                                                       "tools/train_net.py run?)")):
        with pytest.raises(SystemExit) as exit_:
            tool.main(argv)
        assert str(exit_.value) == message
