"""Every documented ``MODEL.WEIGHTS`` / ``MODEL.RETRIEVAL.BACKBONE_WEIGHTS`` source loads into the
parts it is meant for, or loading fails naming the part and the file.

The files carry the real key names (tests/checkpoint_fixtures.py: Detectron2's model-zoo models
built from its own configs, Detectron2-converted ImageNet ``.pkl`` files, raw torchvision
ResNets), with random values; the models are built from the real-data configs."""
import logging
import re

import pytest
import torch
from detectron2.engine.hooks import PeriodicCheckpointer
from detectron2.modeling import build_model
from detectron2.structures import Boxes, Instances
from detectron2.utils.events import EventStorage

from phrasedet.fileio import BadFileError
from phrasedet.modeling.checkpoint import PhrasedetCheckpointer, PretrainedPartError, load_backbone_weights, load_checkpoint_state
from tests.checkpoint_fixtures import (give_trained_statistics, phrasedet_config, torchvision_resnet, write_imagenet_pkl,
                                       write_model_zoo_checkpoint,
                                       write_torchvision_resnet)

C4 = "qa_rcnn_R101_flickr.yaml"
FPN = "qa_rcnn_R50_FPN_flickr.yaml"
R50_FPN_ZOO = "COCO-Detection/faster_rcnn_R_50_FPN_3x.yaml"
# the text side of the retrieval / pointing configs made small (the CNN is what is tested)
DSVE_R152 = ("pointing/dsve_loc_R152_coco.yaml", ["MODEL.POINTING.HEATMAP_TOPK", 8, "MODEL.RETRIEVAL.ADAPTATION_DIM", 64,
                                                  "MODEL.RETRIEVAL.RNN.NUM_LAYERS", 1, "MODEL.RETRIEVAL.EMBED_DIM", 64])
INSTANCE_R50 = ("retrieval/instance_loss_R50_flickr.yaml",
                ["MODEL.RETRIEVAL.EMBED_DIM", 64, "MODEL.RETRIEVAL.BRANCH.HIDDEN_DIM", 64, "MODEL.RETRIEVAL.TEXT_CNN.STAGE_WIDTHS",
                 "[8, 8, 8, 8]", "MODEL.RETRIEVAL.TEXT_CNN.HEAD_HIDDEN_DIM", 64, "MODEL.RETRIEVAL.TEXT_CNN.WORD_DIM", 4])
CAPTIONS = ["DATASETS.TRAIN", "('builtin_flickr30k_captions_train',)", "DATASETS.TEST", "()"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("weights")
    out = {"dir": d}
    out["c4"] = (str(d / "model_final_298dad.pkl"), write_model_zoo_checkpoint(d / "model_final_298dad.pkl"))
    out["fpn"] = (str(d / "model_final_280758.pkl"), write_model_zoo_checkpoint(d / "model_final_280758.pkl", R50_FPN_ZOO))
    out["r101_pkl"] = (str(d / "R-101.pkl"), write_imagenet_pkl(d / "R-101.pkl", 101))
    out["r50_pkl"] = (str(d / "R-50.pkl"), write_imagenet_pkl(d / "R-50.pkl", 50))
    out["r152_pth"] = (str(d / "resnet152-394f9c45.pth"), write_torchvision_resnet(d / "resnet152-394f9c45.pth", 152))
    return out


def _model(name, tmp_path, opts=()):
    cfg = phrasedet_config(name, tmp_path, opts)
    torch.manual_seed(1)
    return cfg, build_model(cfg)


def _load(cfg, model, path, caplog):
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="phrasedet.modeling.checkpoint"):
        PhrasedetCheckpointer.from_config(cfg, model).load(path)
    return [r.getMessage() for r in caplog.records if r.name.startswith("phrasedet.modeling.checkpoint")]


def _assert_loaded(model, source: dict, ours: str, theirs: str) -> int:
    """Every tensor of ``model`` under ``ours`` equals ``source``'s under ``theirs`` (same rest of name)."""
    keys = [k for k in model.state_dict() if k.startswith(ours) and not k.endswith("num_batches_tracked")]
    assert keys, ours
    state = model.state_dict()
    for k in keys:
        torch.testing.assert_close(state[k], source[theirs + k[len(ours):]], rtol=0, atol=0, msg=k)
    return len(keys)


def test_model_zoo_r101_c4_loads_backbone_rpn_and_res5_head(files, tmp_path, caplog):
    path, source = files["c4"]
    cfg, model = _model(C4, tmp_path)
    lines = _load(cfg, model, path, caplog)
    n_backbone = _assert_loaded(model, source, "backbone.", "backbone.")
    n_rpn = _assert_loaded(model, source, "proposal_generator.", "proposal_generator.")  # 15 anchors on both sides
    n_res5 = _assert_loaded(model, source, "roi_heads.region_features.head.", "roi_heads.res5.")
    assert (n_rpn, n_res5) == (6, 50)
    assert f"backbone: loaded from {path} ({n_backbone} tensors)" in lines
    assert f"proposal_generator: loaded from {path} (6 tensors)" in lines
    assert f"roi_heads.region_features: loaded from {path} (50 tensors)" in lines
    assert "roi_heads.classifier: not in the file, kept as built (3 tensors)" in lines
    assert "roi_heads.box_regressor: not in the file, kept as built (8 tensors)" in lines  # num_batches_tracked not counted
    assert f"{path}: 4 tensors not used by this model (e.g. roi_heads.box_predictor.bbox_pred.bias, " \
           "roi_heads.box_predictor.bbox_pred.weight, roi_heads.box_predictor.cls_score.bias)" in lines
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("phrasedet")]


def test_a_pretrained_part_missing_from_the_file_is_an_error_naming_part_and_file(files, tmp_path):
    import pickle

    path, source = files["c4"]
    cut = str(tmp_path / "no_res5.pkl")
    with open(cut, "wb") as f:
        pickle.dump({"model": {k: v.numpy() for k, v in source.items() if not k.startswith("roi_heads.res5.")},
                     "__author__": "Detectron2 Model Zoo"}, f)
    cfg, model = _model(C4, tmp_path)
    with pytest.raises(PretrainedPartError, match=re.escape(
            f"{cut}: roi_heads.region_features is listed in PHRASEDET.WEIGHTS.PRETRAINED_PARTS but 50 of its 50 tensors are "
            "not in this file (or have other shapes), e.g. roi_heads.region_features.head.0.shortcut.weight, ") + ".*" +
            re.escape("remove 'roi_heads.region_features' from PHRASEDET.WEIGHTS.PRETRAINED_PARTS to train it from scratch")):
        PhrasedetCheckpointer.from_config(cfg, model).load(cut)
    # not required: the same file loads, the head newly initialized
    cfg, model = _model(C4, tmp_path, ["PHRASEDET.WEIGHTS.PRETRAINED_PARTS", "['backbone', 'proposal_generator']"])
    PhrasedetCheckpointer.from_config(cfg, model).load(cut)


def test_empty_weights_with_pretrained_parts_is_an_error(tmp_path):
    cfg, model = _model(C4, tmp_path, ["MODEL.WEIGHTS", ""])
    with pytest.raises(ValueError, match=re.escape("MODEL.WEIGHTS is empty but PHRASEDET.WEIGHTS.PRETRAINED_PARTS is "
                                                   "['backbone', 'proposal_generator', 'roi_heads.region_features']: set MODEL.WEIGHTS")):
        PhrasedetCheckpointer.from_config(cfg, model).resume_or_load(cfg.MODEL.WEIGHTS, resume=False)
    cfg, model = _model(C4, tmp_path, ["PHRASEDET.WEIGHTS.PRETRAINED_PARTS", "['roi_heads.res5']"])  # Detectron2's name, not ours
    PhrasedetCheckpointer(model, str(tmp_path)).save("own")
    with pytest.raises(ValueError, match=re.escape("PHRASEDET.WEIGHTS.PRETRAINED_PARTS names 'roi_heads.res5', which has no "
                                                   "tensor in this model (its parts: backbone, proposal_generator, ")):
        PhrasedetCheckpointer.from_config(cfg, model).load(str(tmp_path / "own.pth"))


def test_an_address_that_cannot_be_downloaded_says_what_to_do_offline(tmp_path):
    """An offline machine given a config's documented address gets the address and the remedy,
    not a bare URLError (port 9 of this machine refuses at once, online or not)."""
    cfg, model = _model(C4, tmp_path)
    address = "http://127.0.0.1:9/model_final_298dad.pkl"
    with pytest.raises(OSError, match=re.escape(f"MODEL.WEIGHTS {address!r} could not be downloaded (URLError: ")) as e:
        PhrasedetCheckpointer.from_config(cfg, model).load(address)
    assert str(e.value).endswith("set MODEL.WEIGHTS to the local copy (docs/TRAINING.md, \"Initial weights\")")


def test_other_anchors_reinitialize_the_rpn_outputs_with_one_warning(files, tmp_path, caplog):
    path, source = files["c4"]
    cfg, model = _model(C4, tmp_path, ["MODEL.ANCHOR_GENERATOR.SIZES", "[[64, 128, 256, 512]]"])  # paper 003's code: 12
    before = {k: v.clone() for k, v in model.state_dict().items() if "objectness_logits" in k or "anchor_deltas" in k}
    lines = _load(cfg, model, path, caplog)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("phrasedet")]
    assert warnings == [f"{path}: its RPN output layers (proposal_generator.rpn_head.objectness_logits, "
                        "proposal_generator.rpn_head.anchor_deltas) have 15 anchors per position, MODEL.ANCHOR_GENERATOR "
                        "gives 12: they are re-initialized (the rest of the RPN is loaded)"]
    _assert_loaded(model, source, "proposal_generator.rpn_head.conv.", "proposal_generator.rpn_head.conv.")
    for k, v in before.items():
        torch.testing.assert_close(model.state_dict()[k], v, rtol=0, atol=0)  # left as initialized
    assert ("proposal_generator: partly loaded (2 of 6; new: rpn_head.objectness_logits.weight, "
            "rpn_head.objectness_logits.bias, rpn_head.anchor_deltas.weight, ...)") in lines


def test_model_zoo_fpn_loads_and_trains_a_step(files, tmp_path, caplog):
    path, source = files["fpn"]
    cfg, model = _model(FPN, tmp_path, ["INPUT.PHRASES.MAX_PER_IMAGE", 2])
    lines = _load(cfg, model, path, caplog)
    _assert_loaded(model, source, "backbone.", "backbone.")
    _assert_loaded(model, source, "proposal_generator.", "proposal_generator.")
    assert _assert_loaded(model, source, "roi_heads.region_features.head.", "roi_heads.box_head.") == 4
    assert f"roi_heads.region_features: loaded from {path} (4 tensors)" in lines
    # one training step on a tiny image: losses of the RPN and of the phrase heads, gradients in the FPN box head
    instances = Instances((64, 96))
    instances.gt_boxes = Boxes(torch.tensor([[4.0, 4.0, 40.0, 50.0], [50.0, 10.0, 90.0, 60.0]]))
    instances.gt_phrase_ids = torch.tensor([0, 1])
    instances.gt_classes = torch.zeros(2, dtype=torch.long)
    batch = [{"image": torch.randint(0, 255, (3, 64, 96)).float(), "instances": instances, "phrases": ["a red circle", "a circle"]}]
    model.train()
    with EventStorage():
        losses = model(batch)
    assert {"loss_rpn_cls", "loss_rpn_loc", "loss_phrase_cls", "loss_phrase_box_reg"} <= set(losses)
    total = sum(losses.values())
    assert torch.isfinite(total)
    total.backward()
    assert model.roi_heads.region_features.head.fc1.weight.grad.abs().sum() > 0


def test_imagenet_pkl_reaches_backbone_and_res5_head_of_a_c4_detector(files, tmp_path, caplog):
    path, source = files["r101_pkl"]
    cfg, model = _model(C4, tmp_path, ["PHRASEDET.WEIGHTS.PRETRAINED_PARTS", "['backbone', 'roi_heads.region_features']"])
    lines = _load(cfg, model, path, caplog)
    _assert_loaded(model, source, "backbone.", "")
    _assert_loaded(model, source, "roi_heads.region_features.head.", "res5.")
    assert "proposal_generator: not in the file, kept as built (6 tensors)" in lines
    assert f"roi_heads.region_features: loaded from {path} (50 tensors)" in lines


def test_imagenet_pkl_loads_the_cnn_of_a_retrieval_model(files, tmp_path, caplog, builtin_root):
    path, source = files["r50_pkl"]
    name, opts = INSTANCE_R50
    cfg, model = _model(name, tmp_path, CAPTIONS + opts + ["MODEL.WEIGHTS", path])
    lines = _load(cfg, model, path, caplog)
    n = _assert_loaded(model, source, "image_encoder.backbone.", "")
    assert f"image_encoder.backbone: loaded from {path} ({n} tensors)" in lines


def _torchvision_features(tv, x):
    x = tv.maxpool(tv.relu(tv.bn1(tv.conv1(x))))
    return tv.layer4(tv.layer3(tv.layer2(tv.layer1(x))))


def test_raw_torchvision_resnet_gives_torchvision_features(files, tmp_path, caplog, builtin_root):
    path, _ = files["r152_pth"]
    name, opts = DSVE_R152
    cfg, model = _model(name, tmp_path, CAPTIONS + opts + ["MODEL.WEIGHTS", path])
    lines = _load(cfg, model, path, caplog)
    assert re.fullmatch(rf"image_encoder\.backbone: loaded from {re.escape(path)} \(\d+ tensors\)", lines[0])
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        expected = _torchvision_features(torchvision_resnet(152), x)
        torch.testing.assert_close(model.image_encoder.backbone.eval()(x)["res5"], expected, rtol=1e-4, atol=1e-4)


def test_backbone_weights_accept_the_same_sources(files, tmp_path, builtin_root):
    name, opts = DSVE_R152
    cfg = phrasedet_config(name, tmp_path, CAPTIONS + opts + ["MODEL.WEIGHTS", ""])
    backbone = build_model(cfg).image_encoder.backbone.eval()
    load_backbone_weights(backbone, files["r152_pth"][0])
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        torch.testing.assert_close(backbone(x)["res5"], _torchvision_features(torchvision_resnet(152), x), rtol=1e-4, atol=1e-4)
    name, opts = INSTANCE_R50
    backbone = build_model(phrasedet_config(name, tmp_path, CAPTIONS + opts + ["MODEL.WEIGHTS", ""])).image_encoder.backbone
    path, source = files["fpn"]  # a model-zoo FPN detector's bottom-up ResNet-50
    load_backbone_weights(backbone, path)
    holder = torch.nn.Module()
    holder.backbone = backbone
    _assert_loaded(holder, source, "backbone.", "backbone.bottom_up.")
    path, _ = files["c4"]  # a C4 detector has no res5 in its backbone
    with pytest.raises(ValueError, match=re.escape(f"{path}: its backbone does not fit the configured one: missing ['res5.0.")):
        load_backbone_weights(backbone, path)


def test_own_checkpoint_round_trip_and_a_plain_detectron2_checkpoint(tmp_path, caplog, builtin_root):
    from detectron2.checkpoint import DetectionCheckpointer

    cfg = phrasedet_config("qa_rcnn.yaml", tmp_path)
    torch.manual_seed(3)
    saved = build_model(cfg)
    DetectionCheckpointer(saved, str(tmp_path)).save("model_final")  # as every output/ folder was written
    path = str(tmp_path / "model_final.pth")
    torch.manual_seed(4)
    model = build_model(cfg)
    lines = _load(cfg, model, path, caplog)
    for k, v in saved.state_dict().items():
        torch.testing.assert_close(model.state_dict()[k], v, rtol=0, atol=0)
    parts = ["backbone", "proposal_generator", "roi_heads.region_features", "roi_heads.classifier", "roi_heads.box_regressor"]
    assert [line.split(":")[0] for line in lines] == parts
    assert all(f": loaded from {path} (" in line for line in lines)


def test_the_trainer_checkpoints_with_phrasedet_checkpointer(tmp_path, builtin_root):
    from phrasedet.engine import PhrasedetTrainer

    cfg = phrasedet_config("qa_rcnn.yaml", tmp_path, ["OUTPUT_DIR", str(tmp_path / "out"), "DATALOADER.NUM_WORKERS", 0])
    trainer = PhrasedetTrainer(cfg)
    assert isinstance(trainer.checkpointer, PhrasedetCheckpointer)
    periodic = [h for h in trainer._hooks if isinstance(h, PeriodicCheckpointer)]
    assert len(periodic) == 1 and periodic[0].checkpointer is trainer.checkpointer
    assert "trainer" in trainer.checkpointer.checkpointables


def _chain(path):
    """The config files ``path`` inherits from, itself first."""
    import os

    import yaml

    chain = [os.path.basename(path)]
    while True:
        with open(path) as f:
            base = (yaml.safe_load(f) or {}).get("_BASE_")
        if base is None:
            return chain
        path = os.path.join(os.path.dirname(path), base)
        chain.append(os.path.basename(path))


def test_anchors_built_in_configs_unchanged_real_data_configs_as_their_checkpoint(tmp_path):
    import glob
    import os

    from detectron2 import model_zoo

    from tests.checkpoint_fixtures import CONFIG_DIR

    zoo_c4 = model_zoo.get_config("COCO-Detection/faster_rcnn_R_101_C4_3x.yaml").MODEL.ANCHOR_GENERATOR
    checked = {"builtin": 0, "real": 0}
    for path in glob.glob(os.path.join(CONFIG_DIR, "*.yaml")):
        cfg = phrasedet_config(os.path.basename(path), tmp_path)
        a = cfg.MODEL.ANCHOR_GENERATOR
        if "Base-Builtin-Pretrained.yaml" in _chain(path):  # the CPU configs from the built-in pretrained detector
            assert (a.SIZES, a.ASPECT_RATIOS, cfg.MODEL.WEIGHTS, cfg.PHRASEDET.WEIGHTS.PRETRAINED_PARTS) == \
                ([[16, 32, 64, 128]], [[0.5, 1.0, 2.0]], "phrasedet://builtin_detector/model_final.pth",
                 ["backbone", "proposal_generator", "roi_heads.region_features"]), path
            checked["builtin"] += 1
        elif "Base-Builtin.yaml" in _chain(path):  # the CPU configs and their published numbers
            assert (a.SIZES, a.ASPECT_RATIOS, cfg.MODEL.WEIGHTS, cfg.PHRASEDET.WEIGHTS.PRETRAINED_PARTS) == \
                ([[16, 32, 64, 128]], [[0.5, 1.0, 2.0]], "", []), path
            checked["builtin"] += 1
        elif cfg.MODEL.BACKBONE.NAME == "build_resnet_backbone":  # C4: Detectron2's COCO R101-C4
            assert (a.SIZES, a.ASPECT_RATIOS) == (zoo_c4.SIZES, zoo_c4.ASPECT_RATIOS), path
            assert cfg.MODEL.WEIGHTS == "detectron2://" + model_zoo.get_checkpoint_url(
                "COCO-Detection/faster_rcnn_R_101_C4_3x.yaml").split("/detectron2/")[1], path
            checked["real"] += 1
    assert checked["builtin"] >= 10 and checked["real"] >= 3


def test_staged_training_gives_weights_and_parts_to_its_first_stage_only(tmp_path):
    from phrasedet.engine.staged.recipe import detector_stage
    from phrasedet.engine.staged.retrieval_stages import retrieval_stages
    from phrasedet.engine.staged.stages import stage_config

    required = ["MODEL.WEIGHTS", "x.pkl", "PHRASEDET.WEIGHTS.PRETRAINED_PARTS", "['backbone']"]
    cfg = phrasedet_config("cite_cca.yaml", tmp_path, required)
    first, later = detector_stage(cfg).cfg, stage_config(cfg, "stage3_classifier", evaluate=False)
    assert (first.MODEL.WEIGHTS, first.PHRASEDET.WEIGHTS.PRETRAINED_PARTS) == ("x.pkl", ["backbone"])
    assert (later.MODEL.WEIGHTS, later.PHRASEDET.WEIGHTS.PRETRAINED_PARTS) == ("", [])
    parts = ["PHRASEDET.WEIGHTS.PRETRAINED_PARTS", "['image_encoder.backbone']"]
    pixels = retrieval_stages(phrasedet_config("retrieval/instance_loss.yaml", tmp_path, parts))
    assert [s.cfg.PHRASEDET.WEIGHTS.PRETRAINED_PARTS for s in pixels] == [["image_encoder.backbone"], []]
    features = retrieval_stages(phrasedet_config("retrieval/instance_loss.yaml", tmp_path, parts + [
        "PHRASEDET.RETRIEVAL_STAGES.STAGE1_IMAGE_FEATURES_DIR", str(tmp_path), "MODEL.RETRIEVAL.BACKBONE_WEIGHTS", "b.pth"]))
    assert [s.cfg.PHRASEDET.WEIGHTS.PRETRAINED_PARTS for s in features] == [[], []]  # a features model has no CNN


def test_a_caffe2_msra_pkl_loads_its_blobs_without_momenta_into_a_c4_detector(tmp_path, caplog):
    """Issue 29: the MSRA ImageNet files (``{"blobs": ...}``, Caffe2 names, ``_momentum`` blobs,
    affine BatchNorm) that the docs name as a source."""
    from tests.checkpoint_fixtures import write_caffe2_pkl

    from phrasedet.modeling.checkpoint.files import read_checkpoint
    from tests.checkpoint_fixtures import _caffe2_name

    path = str(tmp_path / "R-101.pkl")
    source = write_caffe2_pkl(path, 101)
    read = read_checkpoint(path)  # the blobs without their momenta, matched by suffix with Caffe2 names
    assert set(read["model"]) == {_caffe2_name(k) for k in source} and read["__author__"] == "Caffe2"
    assert read["matching_heuristics"] is True
    cfg, model = _model(C4, tmp_path, ["PHRASEDET.WEIGHTS.PRETRAINED_PARTS", "['backbone', 'roi_heads.region_features']"])
    lines = _load(cfg, model, path, caplog)
    state = model.state_dict()
    weights = [k for k in state if k.startswith("backbone.") and k.endswith((".weight", ".bias"))]
    assert len(weights) > 100
    for k in weights:  # every weight and affine BatchNorm term of the file, none of its momenta (123)
        torch.testing.assert_close(state[k], source[k[len("backbone."):]], rtol=0, atol=0, msg=k)
    for k in (k for k in state if k.startswith("roi_heads.region_features.head.") and k.endswith((".weight", ".bias"))):
        torch.testing.assert_close(state[k], source["res5." + k[len("roi_heads.region_features.head."):]], rtol=0, atol=0, msg=k)
    assert not any(torch.equal(v, torch.full_like(v, 123.0)) for v in state.values() if v.is_floating_point() and v.numel())
    assert f"roi_heads.region_features: loaded from {path} (50 tensors)" in lines
    # the file's BatchNorm is affine: its layers get the statistics of exactly that map, said once
    norm = model.backbone.stem.conv1.norm
    assert torch.equal(norm.running_mean, torch.zeros_like(norm.running_mean))
    assert torch.equal(norm.running_var, torch.ones_like(norm.running_var) - norm.eps)
    n_norms = sum(1 for k in state if k.endswith("norm.running_mean") and k.startswith(("backbone.", "roi_heads.region_features.")))
    assert f"{path}: affine BatchNorm (a Caffe2 file): {2 * n_norms} running statistics set to mean 0, variance 1 - eps" in lines


def test_a_pretrained_part_partly_missing_from_the_file_is_an_error_too(files, tmp_path):
    """Issue 29: a part that stays partly random, not only wholly, is refused."""
    import pickle

    path, source = files["c4"]
    dropped = ["roi_heads.res5.2.conv3.weight", "roi_heads.res5.0.shortcut.norm.bias"]
    cut = str(tmp_path / "some_res5.pkl")
    with open(cut, "wb") as f:
        pickle.dump({"model": {k: v.numpy() for k, v in source.items() if k not in dropped},
                     "__author__": "Detectron2 Model Zoo"}, f)
    cfg, model = _model(C4, tmp_path)
    with pytest.raises(PretrainedPartError) as e:
        PhrasedetCheckpointer.from_config(cfg, model).load(cut)
    assert str(e.value) == (
        f"{cut}: roi_heads.region_features is listed in PHRASEDET.WEIGHTS.PRETRAINED_PARTS but 2 of its 50 tensors are not "
        "in this file (or have other shapes), e.g. roi_heads.region_features.head.0.shortcut.norm.bias, "
        "roi_heads.region_features.head.2.conv3.weight: set MODEL.WEIGHTS to a checkpoint that has them, or remove "
        "'roi_heads.region_features' from PHRASEDET.WEIGHTS.PRETRAINED_PARTS to train it from scratch")


@pytest.mark.parametrize("own_first", [True, False])
def test_of_two_file_tensors_for_one_model_tensor_the_one_under_our_name_is_kept(own_first, builtin_root, tmp_path):
    """Issue 29: a file with a tensor both under our name and under its Detectron2 alias (e.g. an
    edited checkpoint) loads the one named as ours, in either order."""
    from phrasedet.modeling.checkpoint.names import name_aliases, rename_to_model

    cfg, model = _model("retrieval/vse0.yaml", tmp_path, CAPTIONS)
    ours = "image_encoder.backbone.stem.conv1.weight"
    alias = "backbone.stem.conv1.weight"
    value = model.state_dict()[ours]
    pairs = [(ours, torch.full_like(value, 1.0)), (alias, torch.full_like(value, 2.0))]
    state = dict(pairs if own_first else pairs[::-1])
    after = "image_encoder.backbone.stem.conv1.norm.weight"  # a tensor after the pair is read too
    renamed = rename_to_model({**state, after: torch.ones(64)}, model.state_dict(), name_aliases(model))
    assert list(renamed) == [ours, after] and torch.equal(renamed[ours], torch.full_like(value, 1.0))
    path = tmp_path / "both.pth"
    torch.save({"model": {**{k: v for k, v in model.state_dict().items() if k != ours}, **state}}, path)
    PhrasedetCheckpointer.from_config(cfg, model).load(str(path))
    assert torch.equal(model.state_dict()[ours], torch.full_like(value, 1.0))


def test_affine_norm_statistics_are_set_only_for_layers_with_scale_and_bias_and_no_statistics():
    from torch import nn

    from phrasedet.modeling.checkpoint.detection_checkpoint import affine_norm_statistics

    model = nn.Sequential(nn.BatchNorm2d(2), nn.BatchNorm2d(3), nn.BatchNorm2d(1), nn.Conv2d(1, 1, 1))
    kept = torch.tensor([5.0])
    state = {"0.weight": torch.ones(2), "1.weight": torch.ones(3), "1.bias": torch.zeros(3),
             "2.weight": torch.ones(1), "2.bias": torch.zeros(1), "2.running_mean": kept, "3.weight": torch.ones(1, 1, 1, 1)}
    out = affine_norm_statistics(model, state, "f.pkl")
    assert sorted(set(out) - set(state)) == ["1.running_mean", "1.running_var", "2.running_var"]
    assert torch.equal(out["1.running_mean"], torch.zeros(3)) and torch.equal(out["1.running_var"], torch.full((3,), 1 - 1e-5))
    assert out["2.running_mean"] is kept and torch.equal(out["2.running_var"], torch.full((1,), 1 - 1e-5))
    whole = {**out, "0.bias": torch.zeros(2), "0.running_mean": torch.zeros(2), "0.running_var": torch.ones(2)}
    assert affine_norm_statistics(model, whole, "f.pkl") == whole  # every statistic in the file: none implied


def test_a_file_without_backbone_tensors_and_a_missing_file_are_named(tmp_path):
    path = str(tmp_path / "heads.pth")
    torch.save({"model": {name: torch.zeros(1) for name in ("z", "head.weight", "a.b", "c")}}, path)
    with pytest.raises(BadFileError) as error:
        load_backbone_weights(torch.nn.Linear(1, 1), path)
    assert str(error.value) == (f"{path}: no tensor under image_encoder.backbone. or backbone.bottom_up. or backbone. "
                                "(e.g. ['a.b', 'c', 'head.weight'])")
    with pytest.raises(FileNotFoundError) as error:
        load_backbone_weights(torch.nn.Linear(1, 1), str(tmp_path / "none.pth"))
    assert str(error.value) == f"MODEL.RETRIEVAL.BACKBONE_WEIGHTS: no file {str(tmp_path / 'none.pth')!r}"
    with pytest.raises(FileNotFoundError) as error:
        load_checkpoint_state(str(tmp_path / "none.pth"), "saved layers file")
    assert str(error.value) == f"saved layers file {str(tmp_path / 'none.pth')!r} does not exist"


@pytest.mark.parametrize("num_tensors, new", [(4, "b, c, d"), (5, "b, c, d, ..."), (3, "b, c")])
def test_a_partly_loaded_part_shows_at_most_three_new_tensors(num_tensors, new):
    from phrasedet.modeling.checkpoint.load_report import LoadReport

    tensors = [f"p.{c}" for c in "abcde"[:num_tensors]]
    report = LoadReport("w.pth", ["p"], tensors, loaded={"p.a"})
    assert report.part_line("p") == f"p: partly loaded (1 of {num_tensors}; new: {new})"


def test_a_backbone_that_does_not_fit_is_named_and_batchnorm_counters_may_be_absent(tmp_path):
    from torch import nn

    backbone = nn.Sequential(*[nn.Linear(1, 1) for _ in range(6)])  # 0.weight, 0.bias, ..., 5.bias
    path = str(tmp_path / "w.pth")
    torch.save({"model": {f"backbone.{i}.{p}": torch.zeros(2, 2) if p == "weight" else torch.zeros(2)
                          for i in range(4) for p in ("weight", "bias")}}, path)
    with pytest.raises(BadFileError) as error:
        load_backbone_weights(backbone, path)
    assert str(error.value) == (
        f"{path}: its backbone does not fit the configured one: missing ['4.weight', '4.bias', '5.weight', '5.bias'], "
        "other shapes [('0.weight', (2, 2), (1, 1)), ('0.bias', (2,), (1,)), ('1.weight', (2, 2), (1, 1))]")
    torch.save({"model": {f"backbone.{i}.{p}": torch.zeros(2) for i in range(7) for p in ("weight", "bias")}}, path)
    with pytest.raises(BadFileError) as error:
        load_backbone_weights(nn.Sequential(*[nn.Linear(2, 2) for _ in range(7)]), path)
    assert str(error.value) == (f"{path}: its backbone does not fit the configured one: missing [], other shapes "
                                "[('0.weight', (2,), (2, 2)), ('1.weight', (2,), (2, 2)), ('2.weight', (2,), (2, 2))]")
    many = nn.Sequential(*[nn.Linear(1, 1) for _ in range(4)])
    torch.save({"model": {"backbone.x": torch.zeros(1)}}, path)
    with pytest.raises(BadFileError) as error:
        load_backbone_weights(many, path)
    assert str(error.value) == (f"{path}: its backbone does not fit the configured one: missing ['0.weight', '0.bias', "
                                "'1.weight', '1.bias', '2.weight'], other shapes []")
    # BatchNorm's num_batches_tracked may be missing from the file: the rest loads
    with_bn = nn.Sequential(nn.Conv2d(1, 1, 1), nn.BatchNorm2d(1))
    state = {f"backbone.{k}": torch.full_like(v, 0.5) for k, v in with_bn.state_dict().items()
             if not k.endswith("num_batches_tracked")}
    torch.save({"model": state}, path)
    load_backbone_weights(with_bn, path)
    assert with_bn[1].running_mean.item() == 0.5 and with_bn[0].weight.item() == 0.5


def _snapshot(module) -> dict:
    """A copy of ``module``'s state, for :func:`_unchanged`."""
    return {k: v.clone() for k, v in module.state_dict().items()}


def _unchanged(module, snapshot: dict) -> bool:
    """Whether every tensor of ``module`` still equals its :func:`_snapshot`."""
    return all(torch.equal(module.state_dict()[k], v) for k, v in snapshot.items())


class _Tiny(torch.nn.Module):
    """A model of one part, ``backbone`` (two tensors)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.backbone = torch.nn.Linear(2, 2)


class _Downloads:
    """A path manager whose every address was "downloaded" to ``local``; records what it was asked."""

    def __init__(self, local):
        self.local, self.asked = local, []

    def get_local_path(self, path):
        self.asked.append(path)
        return self.local


def test_an_address_query_asks_for_suffix_matching_and_any_other_query_is_refused(tmp_path):
    """``?matching_heuristics=True`` (Detectron2's documented query) matches the file's names by
    suffix; the query is not part of the address downloaded; another query is an error naming it."""
    path = str(tmp_path / "w.pth")
    weight, bias = torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([5.0, 6.0])
    torch.save({"model": {"weight": weight, "bias": bias}}, path)  # ImageNet-style names, no "backbone."
    model = _Tiny()
    checkpointer = PhrasedetCheckpointer(model)
    checkpointer.path_manager = _Downloads(path)
    checkpointer.load("https://example.org/w.pth?matching_heuristics=True")
    assert checkpointer.path_manager.asked == ["https://example.org/w.pth"]
    assert torch.equal(model.backbone.weight, weight) and torch.equal(model.backbone.bias, bias)
    model = _Tiny()  # without the query the names are not matched: nothing loads
    before = _snapshot(model)
    checkpointer = PhrasedetCheckpointer(model)
    checkpointer.path_manager = _Downloads(path)
    checkpointer.load("https://example.org/w.pth")
    assert _unchanged(model, before)
    for query, left in (("x=1", "{'x': ['1']}"), ("matching_heuristics=True&x=1&y=2", "{'x': ['1'], 'y': ['2']}")):
        checkpointer = PhrasedetCheckpointer(_Tiny())
        checkpointer.path_manager = _Downloads(path)
        with pytest.raises(ValueError) as error:
            checkpointer.load(f"https://example.org/w.pth?{query}")
        assert str(error.value) == f"{path}: unsupported query {left} in the checkpoint's address"


def test_a_file_is_read_outside_load_as_detectron2_users_read_one(tmp_path):
    """``DetectionCheckpointer(model)._load_file(path)`` is how Detectron2 users read a checkpoint
    without loading it (there is no address, so no query): it returns the file as read."""
    path = str(tmp_path / "w.pth")
    weight = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    torch.save({"model": {"backbone.weight": weight}, "iteration": 7}, path)
    read = PhrasedetCheckpointer(_Tiny())._load_file(path)
    assert (sorted(read), read["iteration"], list(read["model"])) == (["iteration", "model"], 7, ["backbone.weight"])
    assert torch.equal(read["model"]["backbone.weight"], weight)


def test_the_checkpointables_argument_reaches_detectron2_by_keyword_or_position(tmp_path):
    """``resume_or_load(path, resume=False)`` loads with ``checkpointables=[]``: the model only,
    the file's other states (an optimizer's) returned, not loaded; by default (None) they load."""
    path = str(tmp_path / "w.pth")
    extra_state = {"weight": torch.full((1, 1), 3.0), "bias": torch.full((1,), 4.0)}
    torch.save({"model": _Tiny().state_dict(), "extra": extra_state}, path)
    for args, kwargs in (((), {"checkpointables": []}), (([],), {})):
        extra = torch.nn.Linear(1, 1)
        before = _snapshot(extra)
        left = PhrasedetCheckpointer(_Tiny(), extra=extra).load(path, *args, **kwargs)
        assert sorted(left) == ["extra"] and torch.equal(left["extra"]["weight"], extra_state["weight"]), (args, kwargs)
        assert _unchanged(extra, before), (args, kwargs)
    extra = torch.nn.Linear(1, 1)
    assert PhrasedetCheckpointer(_Tiny(), extra=extra).load(path) == {}
    assert (extra.weight.item(), extra.bias.item()) == (3.0, 4.0)


def test_a_checkpointer_saves_only_into_its_folder_and_only_when_asked_to(tmp_path, monkeypatch):
    """As Detectron2's: without a folder (the default) or with ``save_to_disk=False`` (a process
    other than the main one) ``save`` writes nothing; with a folder it writes there."""
    from detectron2.config import CfgNode

    monkeypatch.chdir(tmp_path)
    cfg = CfgNode({"PHRASEDET": {"WEIGHTS": {"PRETRAINED_PARTS": []}}})
    PhrasedetCheckpointer(_Tiny()).save("model_a")
    PhrasedetCheckpointer.from_config(cfg, _Tiny()).save("model_b")
    (tmp_path / "run").mkdir()
    PhrasedetCheckpointer(_Tiny(), str(tmp_path / "run"), save_to_disk=False).save("model_c")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["run"]
    PhrasedetCheckpointer.from_config(cfg, _Tiny(), str(tmp_path / "run")).save("model_d")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["last_checkpoint", "model_d.pth"]


def test_a_missing_local_file_is_named_and_an_empty_path_loads_nothing(tmp_path):
    model = _Tiny()
    before = _snapshot(model)
    with pytest.raises(FileNotFoundError) as error:
        PhrasedetCheckpointer(model).load(str(tmp_path / "none.pth"))
    assert str(error.value) == f"checkpoint {str(tmp_path / 'none.pth')!r} does not exist"
    assert PhrasedetCheckpointer(model).load("") == {}  # no pretrained parts: the model stays as built
    assert _unchanged(model, before)
    with pytest.raises(ValueError) as error:
        PhrasedetCheckpointer(model, pretrained_parts=["backbone"]).load("")
    assert str(error.value) == ("MODEL.WEIGHTS is empty but PHRASEDET.WEIGHTS.PRETRAINED_PARTS is ['backbone']: set "
                                "MODEL.WEIGHTS to the checkpoint they come from (see the config's comment), or set "
                                "PHRASEDET.WEIGHTS.PRETRAINED_PARTS [] to train them from scratch")


def test_rpn_outputs_of_other_shapes_without_an_objectness_weight_are_reinitialized(caplog):
    """The warning says "other shapes" when the file has no objectness weight to count anchors
    from; tensors of the same shape, and other tensors, are kept."""
    from phrasedet.modeling.checkpoint.detection_checkpoint import without_other_anchor_outputs

    logits, deltas = "proposal_generator.rpn_head.objectness_logits.", "proposal_generator.rpn_head.anchor_deltas."
    model_state = {logits + "weight": torch.zeros(3, 8, 1, 1), logits + "bias": torch.zeros(3),
                   deltas + "weight": torch.zeros(12, 8, 1, 1), deltas + "bias": torch.zeros(12),
                   "proposal_generator.rpn_head.conv.weight": torch.zeros(8, 8, 3, 3)}
    same = {k: torch.ones_like(v) for k, v in model_state.items()}
    assert without_other_anchor_outputs(same, model_state, "f.pth") == (same, set())
    state = {logits + "bias": torch.ones(3), deltas + "weight": torch.ones(20, 8, 1, 1), deltas + "bias": torch.ones(20),
             "proposal_generator.rpn_head.conv.weight": torch.ones(8, 8, 3, 3), "unused.x": torch.ones(1)}
    with caplog.at_level(logging.WARNING, logger="phrasedet.modeling.checkpoint"):
        kept, reinitialized = without_other_anchor_outputs(state, model_state, "f.pth")
    assert sorted(kept) == sorted([logits + "bias", "proposal_generator.rpn_head.conv.weight", "unused.x"])
    assert reinitialized == {logits + "weight", logits + "bias", deltas + "weight", deltas + "bias"}
    assert [r.getMessage() for r in caplog.records] == [
        "f.pth: its RPN output layers (proposal_generator.rpn_head.objectness_logits, proposal_generator.rpn_head."
        "anchor_deltas) have other shapes, MODEL.ANCHOR_GENERATOR gives 3: they are re-initialized (the rest of the RPN "
        "is loaded)"]


def test_tensors_outside_every_part_get_one_line(caplog):
    from phrasedet.modeling.checkpoint.load_report import LoadReport

    report = LoadReport("w.pth", ["p", "q"], ["p.a", "x", "pq.b", "y", "z", "w", "q.c"], loaded={"p.a", "y", "w"})
    with caplog.at_level(logging.INFO, logger="phrasedet.modeling.checkpoint"):
        report.log()
    assert [r.getMessage() for r in caplog.records] == [
        "p: loaded from w.pth (1 tensors)", "q: not in the file, kept as built (1 tensors)",
        "other tensors: 2 of 5 loaded from w.pth (x, pq.b, y)"]


def test_the_trainer_checkpointer_saves_to_the_output_folder(tmp_path):
    """``from_config`` passes the folder and the checkpointables on (the trainer's own and Detectron2's)."""
    (tmp_path / "out").mkdir()
    checkpointer = PhrasedetCheckpointer.from_config(phrasedet_config("qa_rcnn.yaml", tmp_path), _Tiny(), str(tmp_path / "out"),
                                                     extra=torch.nn.Linear(1, 1))
    assert set(checkpointer.checkpointables) == {"extra"}
    checkpointer.save("model_0000001")
    assert (tmp_path / "out" / "model_0000001.pth").is_file()


def test_torchvision_names_become_detectron2_names_and_only_a_resnet_is_renamed(tmp_path):
    from phrasedet.modeling.checkpoint.files import is_torchvision_resnet, read_checkpoint, torchvision_resnet_to_detectron2

    names = {"conv1.weight": "stem.conv1.weight", "bn1.bias": "stem.conv1.norm.bias",
             "layer1.0.conv1.weight": "res2.0.conv1.weight", "layer2.0.bn1.weight": "res3.0.conv1.norm.weight",
             "layer3.5.bn3.running_var": "res4.5.conv3.norm.running_var",
             "layer4.0.downsample.0.weight": "res5.0.shortcut.weight",
             "layer4.0.downsample.1.running_mean": "res5.0.shortcut.norm.running_mean", "fc.weight": "stem.fc.weight"}
    state = {k: torch.full((1,), float(i)) for i, k in enumerate(names)}
    renamed = torchvision_resnet_to_detectron2(state)
    assert renamed == {names[k]: v for k, v in state.items()}
    assert is_torchvision_resnet(state)
    assert not is_torchvision_resnet({"conv1.weight": torch.zeros(1), "layer2.0.conv1.weight": torch.zeros(1)})
    assert not is_torchvision_resnet({"stem.conv1.weight": torch.zeros(1), "layer1.0.conv1.weight": torch.zeros(1)})
    path = str(tmp_path / "resnet.pth")
    torch.save(state, path)
    read = read_checkpoint(path)
    assert (set(read), read["__author__"], read["matching_heuristics"]) == ({"model", "__author__", "matching_heuristics"},
                                                                          "torchvision", True)
    assert list(read["model"]) == list(names.values())
    torch.save({"conv1.weight": torch.zeros(1), "fc.weight": torch.zeros(1)}, path)  # a small CNN, not a ResNet
    assert read_checkpoint(path) == {"model": {"conv1.weight": torch.zeros(1), "fc.weight": torch.zeros(1)}}


def _pkl(path, data):
    import pickle

    with open(path, "wb") as f:
        pickle.dump(data, f)
    return str(path)


def test_pkl_files_of_every_layout_and_their_refusals(tmp_path):
    """A model-zoo ``.pkl`` is read as is, Caffe2 blobs with or without a ``blobs`` wrapper lose
    their momenta; anything else is an error naming the file and what it holds."""
    import numpy as np

    from phrasedet.modeling.checkpoint.files import read_checkpoint

    w = np.arange(3, dtype=np.float32)
    zoo = read_checkpoint(_pkl(tmp_path / "zoo.pkl", {"model": {"a.weight": w}, "__author__": "Detectron2 Model Zoo"}))
    assert set(zoo) == {"model", "__author__"} and zoo["__author__"] == "Detectron2 Model Zoo"
    assert list(zoo["model"]) == ["a.weight"] and torch.equal(zoo["model"]["a.weight"], torch.tensor([0.0, 1.0, 2.0]))
    for name, data in (("blobs.pkl", {"blobs": {"conv1_w": w, "conv1_w_momentum": w}}),
                       ("plain.pkl", {"conv1_w": w, "conv1_w_momentum": w})):  # MSRA ImageNet files have no "blobs"
        read = read_checkpoint(_pkl(tmp_path / name, data))
        assert (list(read["model"]), read["__author__"], read["matching_heuristics"]) == (["conv1_w"], "Caffe2", True), name
    for name, data, held in (("list.pkl", [w], "list"), ("blobs_list.pkl", {"blobs": [w]}, "list"),
                             ("strings.pkl", {"model": {"a": "b"}, "__author__": "x"}, "dict"),
                             ("int_keys.pkl", {"model": {0: w}, "__author__": "x"}, "dict")):
        path = str(tmp_path / name)
        _pkl(path, data)
        with pytest.raises(BadFileError) as error:
            read_checkpoint(path, "weights file")
        assert str(error.value) == (f"{path}: a weights file must hold a state dict {{name: tensor}} (or one under 'model'), "
                                    f"got {held}")


def test_pth_refusals_name_the_file_and_a_gpu_checkpoint_reads_on_the_cpu(tmp_path, monkeypatch):
    import io
    import zipfile

    from phrasedet.modeling.checkpoint.files import read_checkpoint

    path = str(tmp_path / "w.pth")
    with pytest.raises(FileNotFoundError) as error:
        read_checkpoint(path)
    assert str(error.value) == f"checkpoint {path!r} does not exist"
    torch.save({"model": {0: torch.zeros(1)}}, path)
    with pytest.raises(BadFileError) as error:
        read_checkpoint(path)
    assert str(error.value) == f"{path}: a checkpoint must hold a state dict {{name: tensor}} (or one under 'model'), got dict"
    torch.save({"model": {"a": torch.zeros(1)}, "config": _Downloads("x")}, path)  # an object: no code may run
    for unsafe_default in (None, "1"):  # even where the user turned torch.load's safe default off
        with monkeypatch.context() as env:
            if unsafe_default:
                env.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", unsafe_default)
            with pytest.raises(BadFileError, match=re.escape(f"{path}: not a readable checkpoint (UnpicklingError: Weights "
                                                             "only load failed")):
                read_checkpoint(path)
    # saved on a GPU (the tensors' storage location is cuda:0), read where there is none or where it is busy
    buffer = io.BytesIO()
    torch.save({"model": {"a.weight": torch.arange(3.0)}, "iteration": 7}, buffer)
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as src, zipfile.ZipFile(path, "w") as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename.endswith("/data.pkl"):
                assert data.count(b"X\x03\x00\x00\x00cpu") == 1
                data = data.replace(b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:0")
            dst.writestr(info.filename, data)
    read = read_checkpoint(path)
    assert set(read) == {"model", "iteration"} and read["iteration"] == 7
    assert read["model"]["a.weight"].device == torch.device("cpu") and torch.equal(read["model"]["a.weight"], torch.arange(3.0))
    # running out of memory is not a damaged file
    monkeypatch.setattr(torch, "load", lambda *args, **kwargs: (_ for _ in ()).throw(MemoryError("no room")))
    with pytest.raises(MemoryError, match="^no room$"):
        read_checkpoint(path)


def test_detectron2_prefixes_are_renamed_to_ours_only_where_the_model_has_them():
    from torch import nn

    from phrasedet.modeling.checkpoint.names import name_aliases, rename_to_model

    backbone = [("backbone.", "image_encoder.backbone."), ("backbone.bottom_up.", "backbone."),
                ("backbone.bottom_up.", "image_encoder.backbone.")]
    assert name_aliases(nn.Linear(1, 1)) == backbone

    class Head(nn.Module):
        detectron2_head_name = "res5"

    model = nn.Module()
    model.top = Head()
    model.a = nn.Module()
    model.a.b = nn.Module()
    model.a.b.c = Head()
    assert name_aliases(model) == [("res5.", "top.head."), ("a.b.res5.", "a.b.c.head.")] + backbone
    t = torch.zeros(1)
    fpn = {"backbone.bottom_up.res2.0.conv1.weight": t, "backbone.fpn_lateral2.weight": t}
    assert list(rename_to_model(fpn, ["backbone.res2.0.conv1.weight"], backbone)) == [
        "backbone.res2.0.conv1.weight", "backbone.fpn_lateral2.weight"]
    assert list(rename_to_model(fpn, ["image_encoder.backbone.res2.0.conv1.weight"], backbone)) == [
        "image_encoder.backbone.res2.0.conv1.weight", "backbone.fpn_lateral2.weight"]


def test_a_tensor_of_another_shape_is_not_loaded_and_said_so(tmp_path, caplog):
    path = str(tmp_path / "w.pth")
    torch.save({"model": {"backbone.weight": torch.ones(3, 3), "backbone.bias": torch.full((2,), 7.0)}}, path)
    model = _Tiny()
    weight = model.backbone.weight.detach().clone()
    with caplog.at_level(logging.INFO, logger="phrasedet.modeling.checkpoint"):
        PhrasedetCheckpointer(model).load(path)
    assert torch.equal(model.backbone.weight, weight) and torch.equal(model.backbone.bias, torch.full((2,), 7.0))
    assert [r.getMessage() for r in caplog.records if r.name.startswith("phrasedet")] == [
        "backbone: partly loaded (1 of 2; new: weight)",
        f"{path}: 1 tensors have other shapes than the model's and are not loaded: backbone.weight (3, 3) vs (2, 2)"]
    with pytest.raises(PretrainedPartError) as error:
        PhrasedetCheckpointer(_Tiny(), pretrained_parts=["backbone"]).load(path)
    assert str(error.value) == (f"{path}: backbone is listed in PHRASEDET.WEIGHTS.PRETRAINED_PARTS but 1 of its 2 tensors are "
                                "not in this file (or have other shapes), e.g. backbone.weight: set MODEL.WEIGHTS to a "
                                "checkpoint that has them, or remove 'backbone' from PHRASEDET.WEIGHTS.PRETRAINED_PARTS to "
                                "train it from scratch")


def test_a_model_trained_on_features_continues_on_pixels_with_the_features_it_was_trained_on(tmp_path, caplog,
                                                                                             builtin_root):
    """vse0_ft's start: the frozen model's checkpoint holds no backbone; the backbone comes from
    MODEL.RETRIEVAL.BACKBONE_WEIGHTS, its frozen stages as FrozenBatchNorm. Loading the checkpoint
    must leave their running statistics alone (Detectron2's FrozenBatchNorm2d sets absent ones to
    mean 0, variance 1: the pooled features then came out some 10^5 times too large and the
    frozen VSE0 model, 518.5 rsum on its features, scored chance on pixels)."""
    from phrasedet.modeling.checkpoint.detection_checkpoint import kept_statistics

    extractor_cfg = phrasedet_config("retrieval/vsepp.yaml", tmp_path, CAPTIONS + ["MODEL.WEIGHTS", ""])
    torch.manual_seed(5)
    extractor = build_model(extractor_cfg)
    backbone = extractor.image_encoder.backbone
    give_trained_statistics(backbone)
    cnn = tmp_path / "backbone.pth"
    torch.save({"model": {f"backbone.{k}": v for k, v in backbone.state_dict().items()}}, cnn)
    head = tmp_path / "vse0_features.pth"  # a model trained on the CNN's features: no backbone tensors
    torch.save({"model": {k: v for k, v in extractor.state_dict().items() if not k.startswith("image_encoder.backbone.")}},
               head)
    x = torch.randn(2, 3, 96, 96) * 50
    with torch.no_grad():
        features = extractor.eval().image_encoder.pooled(x)  # what extract_image_features.py writes

    cfg = phrasedet_config("retrieval/vse0_ft.yaml", tmp_path,
                           CAPTIONS + ["MODEL.WEIGHTS", "", "MODEL.RETRIEVAL.BACKBONE_WEIGHTS", str(cnn)])
    torch.manual_seed(6)
    model = build_model(cfg)
    assert any(type(m).__name__ == "FrozenBatchNorm2d" for m in model.image_encoder.backbone.modules())
    lines = _load(cfg, model, str(head), caplog)
    assert "image_encoder.backbone: not in the file, kept as built (75 tensors)" in lines
    with torch.no_grad():
        torch.testing.assert_close(model.eval().image_encoder.pooled(x), features, rtol=1e-5, atol=1e-5)
    # the helper: a layer the file holds anything of is the file's business (a Caffe2 layer's are set apart)
    stem = "image_encoder.backbone.stem.conv1.norm"
    for held in ("weight", "bias", "running_mean", "running_var"):  # any one of its tensors
        state = kept_statistics(model, {f"{stem}.{held}": torch.ones(64)})
        assert sorted(k for k in state if k.startswith(f"{stem}.")) == [f"{stem}.{held}"], held
        assert "image_encoder.backbone.res2.0.conv1.norm.running_var" in state


def _python2_pkl(path, name, values):
    """A ``.pkl`` as Python 2 wrote Detectron1's and the MSRA ImageNet files: ``{"blobs": {name:
    float32 array}}`` with the keys and the array's bytes as Python 2 ``str`` (``SHORT_BINSTRING``),
    which Python 3 reads only with ``encoding="latin1"``. Assembled from pickle opcodes."""
    import struct

    import numpy as np

    def string(s):
        b = s if isinstance(s, bytes) else s.encode("ascii")
        return b"U" + bytes([len(b)]) + b

    raw = np.asarray(values, dtype="<f4").tobytes()
    assert len(raw) < 256 and any(b >= 0x80 for b in raw)  # not ASCII: the default encoding fails
    dtype = (b"cnumpy\ndtype\n" + string("f4") + b"K\x00K\x01\x87R"  # dtype('f4', 0, 1)
             + b"(K\x03" + string("<") + b"NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb")  # its state
    array = (b"cnumpy.core.multiarray\n_reconstruct\n" + b"cnumpy\nndarray\n" + b"K\x00\x85" + string("b") + b"\x87R"
             + b"(K\x01" + b"K" + struct.pack("B", len(values)) + b"\x85" + dtype + b"\x89" + string(raw) + b"tb")
    data = b"\x80\x02}" + string("blobs") + b"}" + string(name) + array + b"ss."
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def test_a_python_2_pkl_reads_its_arrays_as_detectron2_does(tmp_path):
    """Detectron1's and the MSRA ImageNet .pkl files are Python 2 pickles: an array's bytes are a
    Python 2 str, read as Latin-1 (Detectron2 does the same); another encoding fails on them."""
    import pickle

    from phrasedet.modeling.checkpoint.files import read_checkpoint

    path = _python2_pkl(tmp_path / "R-50.pkl", "conv1_w", [-1.0, 0.5, 3.25])
    with open(path, "rb") as f, pytest.raises(UnicodeDecodeError):
        pickle.load(f)  # Python 3's default: ASCII
    read = read_checkpoint(path)
    assert (list(read["model"]), read["__author__"]) == (["conv1_w"], "Caffe2")
    assert torch.equal(read["model"]["conv1_w"], torch.tensor([-1.0, 0.5, 3.25]))


def test_a_pkl_with_model_but_no_author_is_read_as_blobs_as_detectron2_reads_it(tmp_path):
    """Detectron2 takes a .pkl as its model zoo's only with both "model" and "__author__"; else as
    Caffe2 blobs. Here that makes {"model": {...}} a file of one blob that is not an array: refused."""
    import numpy as np

    from phrasedet.modeling.checkpoint.files import read_checkpoint

    path = _pkl(tmp_path / "no_author.pkl", {"model": {"a.weight": np.zeros(2, np.float32)}})
    with pytest.raises(BadFileError, match="a checkpoint must hold a state dict"):
        read_checkpoint(path)
