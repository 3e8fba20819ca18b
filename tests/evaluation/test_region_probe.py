"""The region probe of a phrase detector (phrasedet/evaluation/region_probe.py and
tools/evaluation/probe_representation.py --detector): on hand-made region features whose answer is known,
and the region features of a tiny random PhraseRCNN against its heads run on the boxes directly."""
import json
import os
import re

import numpy as np
import pytest
import torch
from detectron2.data import DatasetCatalog
from detectron2.modeling import build_model
from detectron2.structures import Boxes

from phrasedet.data.synthetic.scene import COLOURS, HELD_OUT_COMBOS, SHAPES
from phrasedet.engine.staged.model_surgery import load_weights
from phrasedet.evaluation.region_probe import (REGION_PARTS, REGION_TRAIN_SPLIT, _same_size_batches, object_region_features,
                                               probe_region_features)
from phrasedet.fileio import BadFileError
from tests.checkpoint_fixtures import phrasedet_config
from tests.evaluation.retrieval_toy import load_tool

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
COLOUR_NAMES = list(COLOURS)


def _objects(rng, n, without=None):
    """``n`` objects, every (colour, shape) pair in turn but ``without``, of random size."""
    pairs = [(c, s) for c in COLOUR_NAMES for s in SHAPES if (c, s) != without]
    return [{"colour": pairs[i % len(pairs)][0], "shape": pairs[i % len(pairs)][1], "size": ("small", "large")[rng.integers(2)],
             "box": [0.0, 0.0, 10.0, 10.0]} for i in range(n)]


def _colour_features(rng, objects):
    """[N, 12]: the colour one-hot plus a little noise, then 4 noise columns: nothing of shape or size."""
    one_hot = np.eye(8)[[COLOUR_NAMES.index(o["colour"]) for o in objects]]
    return np.hstack([one_hot + 0.1 * rng.normal(size=one_hot.shape), rng.normal(size=(len(objects), 4))])


def test_features_of_colour_alone_read_colour_perfectly_and_shape_and_size_at_chance():
    rng = np.random.default_rng(0)
    train, test = _objects(rng, 1800, without=("red", "circle")), _objects(rng, 440)
    probe = probe_region_features(_colour_features(rng, train), train, _colour_features(rng, test), test)
    groups = probe["groups"]
    assert groups["colour"] == {"auc": 1.0, "labels": 8, "skipped": 0}
    assert abs(groups["shape"]["auc"] - 0.5) < 0.05 and groups["shape"]["labels"] == 6
    assert abs(groups["size"]["auc"] - 0.5) < 0.1 and groups["size"]["labels"] == 1
    # a pair is told from the objects of its colour only by chance: between the two
    pairs = groups["colour_shape"]
    assert 0.8 < pairs["auc"] < 0.97 and (pairs["labels"], pairs["skipped"]) == (47, 1)
    assert probe["labels"]["red circle"] is None and probe["labels"]["red"] == 1.0
    assert list(groups) == ["colour", "shape", "size", "colour_shape"]


def test_images_go_in_batches_of_one_size_in_order():
    """No image is padded to another's size: a new batch at each change of size, and at ``batch_size``."""
    inputs = [{"image": torch.zeros(3, h, 8), "i": i} for i, h in enumerate([8, 8, 8, 16, 8])]
    assert [[x["i"] for x in b] for b in _same_size_batches(iter(inputs), 2)] == [[0, 1], [2], [3], [4]]


@pytest.fixture(scope="module")
def tiny_detector(tmp_path_factory):
    """A randomly initialized PhraseRCNN of configs/qa_rcnn.yaml (the built-in ResNet, res4) at 96 px, in training mode,
    its config and a checkpoint file of it."""
    tmp = tmp_path_factory.mktemp("tiny_detector")
    cfg = phrasedet_config("qa_rcnn.yaml", tmp, ["INPUT.MIN_SIZE_TEST", 96, "INPUT.MAX_SIZE_TEST", 120])
    torch.manual_seed(0)
    model = build_model(cfg)
    path = str(tmp / "model_final.pth")
    torch.save({"model": model.state_dict(), "iteration": 0}, path)
    return cfg, model, path


@pytest.mark.usefixtures("builtin_root")
def test_the_region_features_of_objects_are_the_heads_run_on_their_boxes(tiny_detector):
    """Three 128-px built-in images, mapped to 96 px: each object's row is ``region_features`` of the
    detector in eval mode on the object's box x 0.75, one image at a time."""
    import phrasedet  # noqa: F401
    from phrasedet.data import PhraseDatasetMapper
    from phrasedet.data.datasets.builtin import builtin_dataset_root
    from phrasedet.data.synthetic.ground_truth import load_ground_truth

    cfg, model, _ = tiny_detector
    model.train()  # the probe puts it in eval mode
    images = load_ground_truth(builtin_dataset_root())
    records = DatasetCatalog.get(REGION_TRAIN_SPLIT)[:3]
    mapper = PhraseDatasetMapper(cfg, is_train=False)
    got, objects = object_region_features(model, mapper, records, images, batch_size=2)
    assert not model.training
    assert objects == [o for r in records for o in images[r["image_id"]]["objects"]]
    expected = []
    with torch.no_grad():
        for r in records:
            x = mapper(r)
            assert (r["height"], r["width"], *x["image"].shape[-2:]) == (128, 128, 96, 96)
            boxes = torch.tensor([o["box"] for o in images[r["image_id"]]["objects"]]) * 0.75
            im = model.preprocess_image([x])
            expected.append(model.roi_heads.region_features(model.backbone(im.tensor), [Boxes(boxes)], [(96, 96)]))
    expected = torch.cat(expected).numpy()
    assert got.shape == expected.shape == (len(objects), 256 + 5) and got.dtype == np.float32
    # two images a pass against one: the same up to float rounding of the convolutions
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5 * np.abs(expected).max())
    np.testing.assert_allclose(got[:, -5:-1], np.array([o["box"] for o in objects]) / 128, atol=1e-6)  # the geometry


def test_a_detector_checkpoint_lends_only_its_region_parts_and_must_hold_them(tiny_detector, tmp_path):
    """Into a model of another classifier (CITE): the backbone and region-feature head are loaded,
    the rest of either is left alone; a file lacking one of their tensors, or with one of another
    shape, is an error naming it."""
    cfg, source, path = tiny_detector
    torch.manual_seed(1)
    model = build_model(phrasedet_config("cite.yaml", tmp_path))
    classifier = {k: v.clone() for k, v in model.roi_heads.classifier.state_dict().items()}
    load_weights(model, path, keep=REGION_PARTS)
    want = source.state_dict()
    for k, v in model.state_dict().items():
        if k.startswith(REGION_PARTS):
            assert torch.equal(v, want[k]), k
    assert all(torch.equal(v, classifier[k]) for k, v in model.roi_heads.classifier.state_dict().items())
    state = torch.load(path, weights_only=True)["model"]
    for change, message in [(lambda s: s.pop("roi_heads.region_features.head.fc1.weight"), "missing"),
                            (lambda s: s.update({"backbone.res4.0.conv1.weight": torch.zeros(3)}), "size mismatch")]:
        bad = dict(state)
        change(bad)
        bad_path = str(tmp_path / "bad.pth")
        torch.save({"model": bad}, bad_path)
        with pytest.raises(BadFileError, match=rf"(?s)^{re.escape(bad_path)} does not fit the model: .*{message}"):
            load_weights(model, bad_path, keep=REGION_PARTS)


@pytest.mark.usefixtures("builtin_root")
def test_the_tool_probes_a_detector_and_names_a_checkpoint_that_does_not_fit(tiny_detector, tmp_path, capsys):
    """The tiny detector's checkpoint at 32 px: one column, every object group, the JSON; a
    checkpoint of another backbone (width 32 read by a width-64 config) and a missing one are errors naming the file."""
    _, _, path = tiny_detector
    tool = load_tool("probe_representation")
    vectors = phrasedet_config("qa_rcnn.yaml", tmp_path).PHRASEDET.TEXT.WORD_VECTORS_PATH
    common = ["--config-file", os.path.join(ROOT, "configs", "qa_rcnn.yaml"), "--output-dir", str(tmp_path / "out"),
              "PHRASEDET.TEXT.WORD_VECTORS", "file", "PHRASEDET.TEXT.WORD_VECTORS_PATH", vectors,
              "PHRASEDET.TEXT.WORD_VECTORS_FORMAT", "word2vec_text"]
    tool.main(["--detector", f"tiny={path}", *common, "INPUT.MIN_SIZE_TEST", "32", "INPUT.MAX_SIZE_TEST", "40"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Linear probe of region features, built-in training objects (")
    assert lines[2:4] == ["| fact group (labels probed / skipped) | tiny |", "|---|---|"]
    assert [line.split(" (")[0] for line in lines[4:]] == ["| colour", "| shape", "| size", "| colour_shape"]
    saved = json.loads((tmp_path / "out" / "probe_regions.json").read_text())
    assert saved["detectors"] == {"tiny": path} and saved["probes"]["tiny"]["objects"]["test"] > 300
    labels = saved["probes"]["tiny"]["labels"]
    assert len(labels) == 63 and [labels[f"{c} {s}"] for c, s in HELD_OUT_COMBOS] == [None] * len(HELD_OUT_COMBOS)
    with pytest.raises(SystemExit, match=rf"^--detector tiny: {re.escape(path)} does not fit the model: "):
        tool.main(["--detector", f"tiny={path}", *common, "MODEL.RESNETS.RES2_OUT_CHANNELS", "64", "MODEL.RESNETS.STEM_OUT_CHANNELS", "64"])
    gone = str(tmp_path / "none.pth")
    with pytest.raises(SystemExit, match=rf"^--detector gone: checkpoint '{re.escape(gone)}' does not exist$"):
        tool.main(["--detector", f"gone={gone}", *common])
    with pytest.raises(SystemExit, match="^--detector probes regions, --features, --weights and --oracle probe images"):
        tool.main(["--detector", f"tiny={path}", "--oracle", *common])


@pytest.mark.usefixtures("builtin_root")
def test_probing_a_detector_is_the_probe_of_its_region_features_on_both_splits(tiny_detector):
    """probe_detector_regions on two small registered splits (40 and 12 images) against its steps
    run one by one, with a regularization of its own (which changes the answer)."""
    import phrasedet  # noqa: F401
    from detectron2.data import MetadataCatalog

    from phrasedet.data import PhraseDatasetMapper
    from phrasedet.data.datasets.builtin import builtin_dataset_root
    from phrasedet.data.synthetic.ground_truth import load_ground_truth
    from phrasedet.evaluation.region_probe import REGION_TEST_SPLIT, probe_detector_regions

    cfg, model, _ = tiny_detector
    images = load_ground_truth(builtin_dataset_root())
    mapper = PhraseDatasetMapper(cfg, is_train=False)
    splits = {}
    for name, source, n in (("tiny_region_train", REGION_TRAIN_SPLIT, 40), ("tiny_region_test", REGION_TEST_SPLIT, 12)):
        if name in DatasetCatalog.list():
            DatasetCatalog.remove(name)
            MetadataCatalog.remove(name)
        splits[name] = DatasetCatalog.get(source)[:n]
        DatasetCatalog.register(name, lambda records=splits[name]: records)
    got = probe_detector_regions(model, mapper, images, "tiny_region_train", "tiny_region_test", batch_size=3, c=0.05)
    train_x, train_objects = object_region_features(model, mapper, splits["tiny_region_train"], images, 3)
    test_x, test_objects = object_region_features(model, mapper, splits["tiny_region_test"], images, 3)
    expected = probe_region_features(train_x, train_objects, test_x, test_objects, 0.05)
    assert got == {**expected, "objects": {"train": len(train_objects), "test": len(test_objects)}}
    assert len(train_objects) > 100 and len(test_objects) > 30
    default = probe_region_features(train_x, train_objects, test_x, test_objects)
    assert default == probe_region_features(train_x, train_objects, test_x, test_objects, 1.0)
    assert default["labels"] != got["labels"]  # the regularization given reaches the probe


def test_probing_a_detector_hands_its_batch_size_and_regularization_to_both_splits_8_and_1_by_default(monkeypatch):
    """probe_detector_regions with stand-ins for its steps: each split's records go through
    object_region_features with the batch size (8 unless given), and the probe gets the
    regularization (1 unless given); the object counts are the two splits'."""
    import phrasedet.evaluation.region_probe as module

    calls = []

    def features(model, mapper, records, images, *rest):
        calls.append((records, rest))
        return np.zeros((len(records), 2)), [{}] * len(records)

    monkeypatch.setattr(DatasetCatalog, "get", lambda name: [name] * {"tr": 3, "te": 2, REGION_TRAIN_SPLIT: 5}.get(name, 1))
    monkeypatch.setattr(module, "object_region_features", features)
    monkeypatch.setattr(module, "probe_region_features", lambda tx, to, sx, so, *rest: {"probe": (len(tx), len(sx), rest)})
    got = module.probe_detector_regions("model", "mapper", {}, "tr", "te", batch_size=3, c=0.05)
    assert got == {"probe": (3, 2, (0.05,)), "objects": {"train": 3, "test": 2}}
    assert calls == [(["tr"] * 3, (3,)), (["te"] * 2, (3,))]
    calls.clear()
    got = module.probe_detector_regions("model", "mapper", {})
    assert got == {"probe": (5, 1, (1.0,)), "objects": {"train": 5, "test": 1}}
    assert [rest for _, rest in calls] == [(8,), (8,)]


def test_an_image_the_ground_truth_lacks_is_named_with_the_count_of_missing_ones():
    class Model:
        def eval(self):
            return self

    records = [{"image_id": "a"}, {"image_id": 7}, {"image_id": "b"}]
    with pytest.raises(KeyError) as error:
        object_region_features(Model(), lambda r: pytest.fail("mapped"), records, {"a": {"objects": []}})
    assert error.value.args == ("image '7' is not in the built-in ground truth (2 missing)",)


def test_images_go_through_the_detector_eight_at_a_time_by_default_and_none_give_an_empty_float32_matrix(monkeypatch):
    """``object_region_features`` with a stand-in detector: ten same-size images, the default batch
    size; and no records at all, rows of the region features' width."""
    from types import SimpleNamespace

    import phrasedet.evaluation.region_probe as module

    passes = []

    def features(model, batch, boxes):
        passes.append(len(batch))
        return [torch.ones(len(b), 3) for b in boxes]

    monkeypatch.setattr(module, "boxes_region_features", features)
    model = SimpleNamespace(eval=lambda: None, roi_heads=SimpleNamespace(region_features=SimpleNamespace(output_dim=7)))
    records = [{"image_id": str(i), "height": 20, "width": 20} for i in range(10)]
    images = {str(i): {"objects": [{"box": [1, 2, 3, 4]}]} for i in range(10)}
    got, objects = object_region_features(model, lambda r: {**r, "image": torch.zeros(3, 10, 10)}, records, images)
    assert passes == [8, 2] and got.shape == (10, 3) and len(objects) == 10
    empty, none = object_region_features(model, pytest.fail, [], images)
    assert empty.shape == (0, 7) and empty.dtype == np.float32 and none == []
