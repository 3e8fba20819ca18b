"""The built-in CNN's pretraining: its backbone, the multi-label classifier and its loss, its
evaluator, and the cached CNN that the retrieval and pointing configs load
(phrasedet/modeling/backbone/builtin_resnet.py, meta_arch/image_classifier.py,
evaluation/image_labels.py, engine/pretrained_cnn.py)."""
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from detectron2.config import get_cfg
from detectron2.modeling import build_backbone, build_model

from phrasedet.config import add_phrasedet_config
from phrasedet.evaluation.image_labels import ImageLabelsEvaluator, label_aucs

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "configs")
CNN = os.path.join(CONFIGS, "pretraining", "builtin_cnn.yaml")


def _cfg(path=CNN, *opts):
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(path)
    cfg.merge_from_list(list(opts))
    return cfg


def test_the_builtin_resnet_has_stride_2_without_max_pooling_and_detectron2_names():
    backbone = build_backbone(_cfg(CNN, "MODEL.RESNETS.OUT_FEATURES", ["res2", "res3", "res4", "res5"]))
    out = backbone(torch.zeros(1, 3, 128, 96))
    assert {k: tuple(v.shape[1:]) for k, v in out.items()} == {"res2": (32, 64, 48), "res3": (64, 32, 24),
                                                               "res4": (128, 16, 12), "res5": (256, 8, 6)}
    assert {k: v.stride for k, v in backbone.output_shape().items()} == {"res2": 2, "res3": 4, "res4": 8, "res5": 16}
    names = set(backbone.state_dict())
    assert {"stem.conv1.weight", "res2.0.conv1.weight", "res2.1.conv2.norm.running_mean", "res5.0.shortcut.weight"} <= names
    only_res4 = build_backbone(_cfg())
    assert not any(k.startswith("res5.") for k in only_res4.state_dict())  # stages past the last output are not built
    with pytest.raises(ValueError, match=r"^build_builtin_resnet_backbone: MODEL.RESNETS.DEPTH must be one of \[10, 18\], got 50$"):
        build_backbone(_cfg(CNN, "MODEL.RESNETS.DEPTH", 50))
    assert len([k for k in build_backbone(_cfg(CNN, "MODEL.RESNETS.DEPTH", 10)).state_dict() if k.endswith("conv1.weight")]) == 4


def _inputs(labels):
    torch.manual_seed(1)
    return [{"image": torch.randint(0, 255, (3, 32, 32), dtype=torch.uint8), "labels": torch.tensor(y, dtype=torch.float32)}
            for y in labels]


def test_the_loss_weighs_each_label_by_its_group_by_hand(builtin_root):
    torch.manual_seed(0)
    model = build_model(_cfg(CNN, "MODEL.CLASSIFIER.GROUP_WEIGHTS.SHAPE", 10.0)).train()
    labels = np.zeros((2, 131))
    labels[0, [0, 5, 12]] = 1  # a background, a colour, a shape (columns: 4 backgrounds, 8 colours, 6 shapes, ...)
    inputs = _inputs(labels)
    loss = model(inputs)["loss_labels"]
    logits = model.head(model.pooled(inputs))  # training mode again: the same batch statistics
    per_label = F.binary_cross_entropy_with_logits(logits, torch.tensor(labels, dtype=torch.float32), reduction="none").mean(0)
    weights = torch.ones(131)
    weights[12:18] = 10.0  # the 6 shape labels
    assert loss.item() == pytest.approx(((per_label * weights).sum() / weights.sum()).item(), rel=1e-6)
    assert model.label_weights[12].item() == pytest.approx(10 / 185) and model.label_weights[0].item() == pytest.approx(1 / 185)
    plain = build_model(_cfg(CNN, "MODEL.CLASSIFIER.GROUP_WEIGHTS.SHAPE", 1.0))
    assert torch.allclose(plain.label_weights, torch.full((131,), 1 / 131))


def test_inference_gives_one_probability_per_label_and_labels_must_fit(builtin_root):
    model = build_model(_cfg()).eval()
    out = model(_inputs(np.zeros((2, 131))))
    assert [tuple(o["scores"].shape) for o in out] == [(131,), (131,)]
    assert all(((o["scores"] >= 0) & (o["scores"] <= 1)).all() for o in out)
    model.train()
    with pytest.raises(ValueError, match=r"labels \[2, 5\] do not match the classifier's \[2, 131\]"):
        model(_inputs(np.zeros((2, 5))))
    with pytest.raises(ValueError, match=r"MODEL.CLASSIFIER.NUM_LABELS is 7 but PHRASEDET.PRETRAINING.LABEL_GROUPS "
                                         r"\['background', 'colour', 'shape', 'colour_shape', 'count'\] have 131 labels"):
        build_model(_cfg(CNN, "MODEL.CLASSIFIER.NUM_LABELS", 7))


def test_label_aucs_by_hand_and_the_evaluator_is_order_free():
    scores = np.array([[0.1, 0.5], [0.4, 0.5], [0.35, 0.5], [0.8, 0.5]])
    labels = np.array([[0, 1], [0, 1], [1, 1], [1, 1]])
    auc = label_aucs(scores, labels)
    assert auc[0] == 0.75 and np.isnan(auc[1])  # 3 of 4 pairs ranked right; an all-positive label has none

    def run(order):
        ev = ImageLabelsEvaluator("toy", ["shape", "colour"], distributed=False)
        for i in order:
            ev.process([{"image_id": str(i), "labels": torch.tensor(labels[i])}],
                       [{"scores": torch.tensor(scores[i])}])
        return ev.evaluate()["image_labels"]

    result, shuffled = run([0, 1, 2, 3]), run([3, 1, 0, 2])
    assert np.isnan(result.pop("auc_colour")) and np.isnan(shuffled.pop("auc_colour"))
    assert result == shuffled == {"auc": 0.75, "images": 4, "auc_shape": 0.75, "skipped_shape": 0, "skipped_colour": 1}
    ev = ImageLabelsEvaluator("toy", ["shape"], distributed=False)
    with pytest.raises(KeyError, match="image '7' of toy came without its 'labels'"):
        ev.process([{"image_id": "7"}], [{"scores": torch.zeros(1)}])
    with pytest.raises(ValueError, match=r"^image '7': 2 scores and 2 labels for the evaluator's 1 labels$"):
        ev.process([{"image_id": "7", "labels": torch.zeros(2)}], [{"scores": torch.zeros(2)}])


def test_the_cached_cnn_trains_once_and_loads_whole_into_the_retrieval_and_pointing_configs(builtin_root, tmp_path):
    from phrasedet.engine import pretrained_cnn
    from phrasedet.modeling.checkpoint import load_backbone_weights

    opts = ["SOLVER.MAX_ITER", 3, "SOLVER.WARMUP_ITERS", 1, "SOLVER.IMS_PER_BATCH", 2, "DATALOADER.NUM_WORKERS", 0,
            "DATASETS.TEST", "()"]
    weights = pretrained_cnn.ensure_builtin_cnn(str(tmp_path), opts=opts)
    assert os.path.dirname(weights) == pretrained_cnn.builtin_cnn_dir(str(tmp_path), opts=opts)
    assert os.path.basename(os.path.dirname(weights)).startswith("builtin-cnn-v3-")
    stamp = os.path.getmtime(weights)
    assert pretrained_cnn.ensure_builtin_cnn(str(tmp_path), opts=opts) == weights and os.path.getmtime(weights) == stamp
    assert [p for p in os.listdir(tmp_path) if ".tmp-" in p] == []  # trained in a temporary folder, renamed whole
    assert pretrained_cnn.builtin_cnn_dir(str(tmp_path), opts=opts + ["SEED", 1]) != os.path.dirname(weights)
    saved = torch.load(weights, map_location="cpu", weights_only=False)["model"]
    for config in ("retrieval/Base-Retrieval.yaml", "pointing/Base-DSVE-Loc.yaml"):
        backbone = build_backbone(_cfg(os.path.join(CONFIGS, config)))
        load_backbone_weights(backbone, weights)  # every backbone tensor, or an error
        for k, v in backbone.state_dict().items():
            assert torch.equal(v, saved[f"backbone.{k}"]), (config, k)


def test_the_cnn_kept_beside_the_records_loads_into_both_configs_and_has_the_recorded_digest():
    """results/builtin_cnn/backbone.pth: the CNN every run in results/ was recorded on (its
    backbone digest is the key of the cnn records)."""
    import glob
    import json

    from phrasedet.engine.comparison.run_records import RECORD_FILE, backbone_digest
    from phrasedet.modeling.checkpoint import load_backbone_weights

    kept = os.path.join(CONFIGS, "..", "results", "builtin_cnn", "backbone.pth")
    saved = torch.load(kept, map_location="cpu", weights_only=True)["model"]
    for config in ("retrieval/Base-Retrieval.yaml", "pointing/Base-DSVE-Loc.yaml"):
        backbone = build_backbone(_cfg(os.path.join(CONFIGS, config)))
        load_backbone_weights(backbone, kept)
        assert all(torch.equal(v, saved[f"backbone.{k}"]) for k, v in backbone.state_dict().items())
    records = glob.glob(os.path.join(CONFIGS, "..", "results", "*", "cnn", "**", RECORD_FILE), recursive=True)
    digests = {json.load(open(r))["representation"] for r in records}
    assert digests <= {backbone_digest(kept)}


@pytest.mark.parametrize("norm, kind", [("BN", torch.nn.BatchNorm2d), ("FrozenBN", "FrozenBatchNorm2d")])
def test_the_stem_is_a_convolution_without_bias_then_its_norm(norm, kind):
    backbone = build_backbone(_cfg(CNN, "MODEL.RESNETS.NORM", norm))
    conv = backbone.stem.conv1
    assert conv.bias is None and (conv.kernel_size, conv.stride, conv.padding) == ((7, 7), (2, 2), (3, 3))
    assert (type(conv.norm).__name__ == kind) if isinstance(kind, str) else type(conv.norm) is kind
    assert conv.norm.num_features == conv.out_channels == 32


def test_pooling_normalizes_the_pixels_by_the_configs_mean_and_std(builtin_root):
    model = build_model(_cfg(CNN, "MODEL.PIXEL_MEAN", [10.0, 20.0, 30.0], "MODEL.PIXEL_STD", [2.0, 4.0, 8.0])).eval()
    inputs = _inputs(np.zeros((2, 131)))
    images = torch.stack([x["image"] for x in inputs]).float()
    normalized = (images - torch.tensor([10.0, 20.0, 30.0]).view(3, 1, 1)) / torch.tensor([2.0, 4.0, 8.0]).view(3, 1, 1)
    with torch.no_grad():
        expected = model.backbone(normalized)["res4"].mean(dim=(2, 3))
        assert torch.allclose(model.pooled(inputs), expected, atol=1e-6)
        as_double = [dict(x, image=x["image"].double()) for x in inputs]  # any pixel type is read as float32
        assert torch.equal(model.pooled(as_double), model.pooled(inputs))


def test_labels_of_any_numeric_type_give_the_float_loss_and_a_mismatch_names_the_key(builtin_root):
    model = build_model(_cfg()).train()
    labels = np.zeros((2, 131))
    labels[1, [3, 7]] = 1
    as_float, as_bytes = _inputs(labels), _inputs(labels)
    for x in as_bytes:
        x["labels"] = x["labels"].to(torch.uint8)
    torch.manual_seed(0)
    expected = model(as_float)["loss_labels"]
    torch.manual_seed(0)
    assert model(as_bytes)["loss_labels"].item() == pytest.approx(expected.item(), rel=1e-6)
    with pytest.raises(ValueError) as error:
        model(_inputs(np.zeros((2, 5))))
    assert str(error.value) == ("labels [2, 5] do not match the classifier's [2, 131]: "
                                "check MODEL.CLASSIFIER.NUM_LABELS against the dataset's label groups")
