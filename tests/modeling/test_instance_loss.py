"""Paper 001's instance loss (hand computations, the shared classifier's gradients) and its place
in ImageTextEmbedding: one class per training image, loss weights, flip averaging at test, the
word layer's learning-rate factor."""
import math
import os

import pytest
import torch
from detectron2.config import get_cfg
from detectron2.data import DatasetCatalog
from detectron2.modeling import build_model
from torch import nn

from phrasedet.config import add_phrasedet_config
from phrasedet.engine.optimizer import apply_lr_factors, build_optimizer
from phrasedet.modeling.losses import InstanceLoss
from phrasedet.modeling.meta_arch.image_text_embedding import image_key, training_image_classes

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "retrieval")
SMALL = ["INPUT.RETRIEVAL.CROP", 32, "MODEL.RETRIEVAL.EMBED_DIM", 16, "MODEL.RETRIEVAL.BRANCH.HIDDEN_DIM", 12,
         "MODEL.RETRIEVAL.TEXT_CNN.STAGE_WIDTHS", [8, 16, 16, 32], "MODEL.RETRIEVAL.TEXT_CNN.HEAD_HIDDEN_DIM", 16,
         "MODEL.RETRIEVAL.TEXT_CNN.WORD_DIM", 8, "PHRASEDET.TEXT.WORD2VEC_EPOCHS", 1, "PHRASEDET.TEXT.WORD2VEC_DIM", 8]


def _loss(weight, **weights):
    """InstanceLoss(E=2, N=3) with the classifier matrix ``weight`` [3, 2] (and the loss weights given)."""
    loss = InstanceLoss(2, 3, **weights)
    with torch.no_grad():
        loss.classifier.weight.copy_(torch.tensor(weight, dtype=torch.float32))
    return loss


def test_instance_loss_equals_a_hand_computed_cross_entropy_through_one_bias_free_classifier():
    loss = _loss([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # default weights: both terms, weight 1
    assert loss.classifier.bias is None
    image, caption = torch.tensor([[2.0, 0.0]]), torch.tensor([[0.0, 1.0], [1.0, 1.0]])
    out = loss(image, caption, torch.tensor([0]), torch.tensor([1, 2]))
    # image logits (2, 0, 2), class 0: -log(e^2 / (e^2 + 1 + e^2))
    assert out["loss_instance_image"].item() == pytest.approx(-math.log(math.exp(2) / (2 * math.exp(2) + 1)), abs=1e-6)
    # caption 1 logits (0, 1, 1), class 1; caption 2 logits (1, 1, 2), class 2; the mean of both
    c1 = -math.log(math.e / (1 + 2 * math.e))
    c2 = -math.log(math.exp(2) / (2 * math.e + math.exp(2)))
    assert out["loss_instance_text"].item() == pytest.approx((c1 + c2) / 2, abs=1e-6)


def test_the_shared_classifier_gets_gradients_from_both_modalities_and_weights_scale_or_drop_terms():
    weight = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    image, caption = torch.tensor([[2.0, 0.0]]), torch.tensor([[0.0, 1.0]])
    grads = {}
    for name, (wi, wt) in {"image": (1.0, 0.0), "text": (0.0, 1.0), "both": (1.0, 1.0)}.items():
        loss = _loss(weight, image_weight=wi, text_weight=wt)
        out = loss(image, caption, torch.tensor([0]), torch.tensor([1]))
        assert set(out) == {"image": {"loss_instance_image"}, "text": {"loss_instance_text"},
                            "both": {"loss_instance_image", "loss_instance_text"}}[name]
        sum(out.values()).backward()
        grads[name] = loss.classifier.weight.grad.clone()
    assert grads["image"].abs().sum() > 0 and grads["text"].abs().sum() > 0
    assert not torch.allclose(grads["image"], grads["text"])
    assert torch.allclose(grads["both"], grads["image"] + grads["text"], atol=1e-6)
    image_term = lambda wi: _loss(weight, image_weight=wi, text_weight=0.0)(  # noqa: E731
        image, caption, torch.tensor([0]), torch.tensor([1]))["loss_instance_image"]
    doubled, single = image_term(2.0), image_term(1.0)
    assert doubled.item() == pytest.approx(2 * single.item(), rel=1e-6)


def test_the_instance_loss_needs_a_class():
    with pytest.raises(ValueError) as e:
        InstanceLoss(4, 0)
    assert str(e.value) == "the instance loss needs at least one class (training image), got 0"


def test_a_single_class_is_allowed_and_costs_nothing():
    loss = InstanceLoss(2, 1)
    out = loss(torch.tensor([[1.0, 2.0]]), torch.tensor([[3.0, 4.0]]), torch.tensor([0]), torch.tensor([0]))
    assert loss.num_classes == 1
    assert {k: v.item() for k, v in out.items()} == {"loss_instance_image": 0.0, "loss_instance_text": 0.0}


def test_the_classifier_starts_from_a_normal_of_std_0_001():
    """Paper 001's initialisation: W_share ~ N(0, 0.001^2) (estimated over 32,000 entries)."""
    torch.manual_seed(0)
    weight = InstanceLoss(64, 500).classifier.weight
    assert weight.std().item() == pytest.approx(0.001, rel=0.02)
    assert abs(weight.mean().item()) < 2e-5


def _cfg(*opts):
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(os.path.join(CONFIGS, "instance_loss.yaml"))
    cfg.merge_from_list(SMALL + list(opts))
    return cfg


def _batch(cfg, n=4, split=None):
    records = DatasetCatalog.get(split or cfg.DATASETS.TRAIN[0])[:n]
    torch.manual_seed(0)
    return [{"image_id": r["image_id"], "dataset": r.get("dataset", ""), "captions": r["captions"][:2],
             "image": torch.randint(0, 255, (3, 32, 32), dtype=torch.uint8)} for r in records]


@pytest.mark.usefixtures("builtin_root")
def test_one_class_per_training_image_in_dataset_order():
    cfg = _cfg()
    classes = training_image_classes(cfg)
    records = DatasetCatalog.get("builtin_flickr30k_captions_train")
    assert len(classes) == len(records) == 600
    assert classes[image_key(records[0].get("dataset", ""), records[0]["image_id"])] == 0
    assert classes[image_key(records[-1].get("dataset", ""), records[-1]["image_id"])] == 599
    twice = _cfg("DATASETS.TRAIN", ("builtin_flickr30k_captions_train", "builtin_flickr30k_captions_train"))
    assert training_image_classes(twice) == classes  # an image listed twice is one class


@pytest.mark.usefixtures("builtin_root")
def test_training_gives_both_instance_terms_and_the_weighted_ranking_loss():
    cfg = _cfg()
    torch.manual_seed(0)
    model = build_model(cfg).train()
    assert model.instance_loss.num_classes == 600
    batch = _batch(cfg)
    torch.manual_seed(1)
    once = model(batch)
    assert set(once) == {"loss_image_anchored", "loss_caption_anchored", "loss_instance_image", "loss_instance_text"}
    model.loss_weight = 2.0
    torch.manual_seed(1)
    twice = model(batch)
    for key in ("loss_image_anchored", "loss_caption_anchored"):
        assert twice[key].item() == pytest.approx(2 * once[key].item(), rel=1e-5)
    assert twice["loss_instance_text"].item() == pytest.approx(once["loss_instance_text"].item(), rel=1e-5)
    model.loss_weight = 0.0
    assert set(model(batch)) == {"loss_instance_image", "loss_instance_text"}  # stage I: no ranking loss computed


@pytest.mark.usefixtures("builtin_root")
def test_a_test_image_has_no_instance_class_and_the_error_names_it():
    cfg = _cfg()
    model = build_model(cfg).train()
    batch = _batch(cfg, 2, split="builtin_flickr30k_captions_test")
    with pytest.raises(ValueError, match=f"image {batch[0]['image_id']!r} .* is not a training image"):
        model(batch)


@pytest.mark.usefixtures("builtin_root")
def test_a_checkpoint_trained_on_other_images_does_not_load(tmp_path):
    model = build_model(_cfg())
    state = model.state_dict()
    other = build_model(_cfg("DATASETS.TRAIN", ("builtin_flickr30k_captions_val",), "MODEL.RETRIEVAL.TEXT_CNN.MIN_WORD_COUNT", 1))
    state = {k: v for k, v in state.items() if not k.startswith(("instance_loss.", "sentence_encoder."))}
    state["classes_fingerprint"] = model.classes_fingerprint
    with pytest.raises(ValueError, match="classes_fingerprint: the checkpoint was trained with other training images than those of DATASETS.TRAIN"):
        other.load_state_dict(state, strict=False)


@pytest.mark.usefixtures("builtin_root")
def test_configs_with_nothing_to_train_on_or_a_flip_without_pixels_are_refused():
    with pytest.raises(ValueError, match="are all 0: nothing to train on"):
        build_model(_cfg("MODEL.RETRIEVAL.LOSS.WEIGHT", 0.0, "MODEL.RETRIEVAL.INSTANCE_LOSS.IMAGE_WEIGHT", 0.0,
                         "MODEL.RETRIEVAL.INSTANCE_LOSS.TEXT_WEIGHT", 0.0))
    with pytest.raises(ValueError, match="FLIP_AVERAGE flips the image: it needs MODEL.RETRIEVAL.IMAGE_INPUT 'pixels'"):
        build_model(_cfg("TEST.RETRIEVAL.FLIP_AVERAGE", True, "MODEL.RETRIEVAL.IMAGE_INPUT", "features"))


@pytest.mark.usefixtures("builtin_root")
def test_flip_average_embeds_the_mean_of_the_image_and_its_mirror():
    plain = build_model(_cfg()).eval()
    flipped = build_model(_cfg("TEST.RETRIEVAL.FLIP_AVERAGE", True)).eval()
    flipped.load_state_dict(plain.state_dict())
    batch = _batch(_cfg(), 3, split="builtin_flickr30k_captions_test")
    mirrored = [{**x, "image": x["image"].flip(-1)} for x in batch]
    with torch.no_grad():
        expected = torch.nn.functional.normalize((plain.image_features(batch) + plain.image_features(mirrored)) / 2, dim=-1)
        got = flipped.embed_images(batch)
        assert torch.allclose(got, expected, atol=1e-5)
        assert not torch.allclose(got, plain.embed_images(batch), atol=1e-3)


def test_lr_factor_modules_get_their_own_param_group_at_the_scaled_rate():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 3))
    model[0].lr_factor = 0.1
    optimizer = apply_lr_factors(torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9), model)
    groups = sorted(((g["lr"], sum(p.numel() for p in g["params"]), g["momentum"]) for g in optimizer.param_groups))
    assert groups == [(pytest.approx(0.05), 6, 0.9), (0.5, 9, 0.9)]


@pytest.mark.usefixtures("builtin_root")
def test_the_text_cnn_word_layer_trains_at_its_factor_with_adam():
    cfg = _cfg("MODEL.RETRIEVAL.TEXT_CNN.WORD_LR_FACTOR", 0.01, "SOLVER.BASE_LR", 0.5)
    model = build_model(cfg)
    optimizer = build_optimizer(cfg, model)
    word = {id(p) for p in model.sentence_encoder.embedding.parameters()}
    rates = sorted(g["lr"] for g in optimizer.param_groups if any(id(p) in word for p in g["params"]))
    others = {g["lr"] for g in optimizer.param_groups if not any(id(p) in word for p in g["params"])}
    assert rates == [pytest.approx(0.005)] and others == {0.5}
