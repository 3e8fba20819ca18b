"""The region cache of a frozen detector (phrasedet/modeling/roi_heads/region_cache.py): training
steps, a few optimizer steps and inference on cached region features equal those of the detector
run every time, on the built-in dataset; the cache refuses a detector that trains or changed."""
import copy
import os

import numpy as np
import pytest
import torch
from detectron2.config import get_cfg
from detectron2.data import DatasetCatalog
from detectron2.modeling import build_model
from detectron2.utils.events import EventStorage

from phrasedet.config import add_phrasedet_config
from phrasedet.data import PhraseDatasetMapper
from phrasedet.engine.staged.stages import freeze_all_but
from phrasedet.modeling.roi_heads.region_cache import RegionCache, image_key

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "configs")
TRAIN, VAL = "builtin_flickr30k_entities_train", "builtin_flickr30k_entities_val"


def _cfg(config="cite.yaml"):
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(os.path.join(CONFIGS, config))
    cfg.merge_from_list(["PHRASEDET.TEXT.WORD2VEC_EPOCHS", 1, "PHRASEDET.TEXT.WORD2VEC_DIM", 16])
    return cfg


def _frozen_model(cfg, seed=0):
    torch.manual_seed(seed)
    model = build_model(cfg)
    freeze_all_but(model, model.roi_heads.classifier)
    return model


def _inputs(cfg, split, n, is_train=True):
    mapper = PhraseDatasetMapper(cfg, is_train=is_train)
    torch.manual_seed(0)
    np.random.seed(0)
    return [mapper(d) for d in DatasetCatalog.get(split)[:n]]


def _losses(model, batch, seed):
    torch.manual_seed(seed)
    with EventStorage():
        return model(batch)


@pytest.mark.usefixtures("builtin_root")
@pytest.mark.parametrize("config", ["cite.yaml", "embedding_net.yaml", "qa_rcnn_staged.yaml"])
def test_a_cached_training_step_equals_the_detector_run_loss_by_loss_and_gradient_by_gradient(config):
    cfg = _cfg(config)
    model = _frozen_model(cfg)
    model.train()
    inputs = _inputs(cfg, TRAIN, 3)
    slow, slow_grads = [], []
    for k, x in enumerate(inputs):
        model.zero_grad()
        losses = _losses(model, [x], k)
        sum(losses.values()).backward()
        slow.append({n: v.detach() for n, v in losses.items()})
        slow_grads.append([p.grad.clone() for p in model.roi_heads.classifier.parameters() if p.grad is not None])
    assert not any(n.startswith("loss_rpn") for n in slow[0])  # a frozen RPN has no loss (and draws nothing)
    model.region_cache = RegionCache(model)
    for k, x in enumerate(inputs):
        model.zero_grad()
        losses = _losses(model, [x], k)
        sum(losses.values()).backward()
        assert losses.keys() == slow[k].keys()
        for n in losses:
            torch.testing.assert_close(losses[n].detach(), slow[k][n], rtol=1e-5, atol=1e-6)
        grads = [p.grad for p in model.roi_heads.classifier.parameters() if p.grad is not None]
        assert len(grads) == len(slow_grads[k]) > 0
        for g, s in zip(grads, slow_grads[k]):
            torch.testing.assert_close(g, s, rtol=1e-4, atol=1e-6)
    assert model.region_cache.computed == len(model.region_cache) == 3


@pytest.mark.usefixtures("builtin_root")
def test_adam_steps_on_the_cache_follow_the_detector_run_and_inference_matches():
    cfg = _cfg()
    inputs = _inputs(cfg, TRAIN, 4)
    trained = []
    for cached in (False, True):
        model = _frozen_model(cfg)
        model.train()
        if cached:
            model.region_cache = RegionCache(model)
        opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
        for step in range(8):  # two epochs over four images: the second reads every entry back
            opt.zero_grad()
            sum(_losses(model, [inputs[step % 4]], step).values()).backward()
            opt.step()
        trained.append(model)
    assert trained[1].region_cache.computed == 4
    for (name, a), b in zip(trained[0].roi_heads.classifier.state_dict().items(), trained[1].roi_heads.classifier.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)
    # inference of the trained classifier on validation images (the test mapper): both ways, the same detections
    slow, fast = trained
    slow.eval()
    fast.eval()
    val = _inputs(cfg, VAL, 3, is_train=False)
    for x in val:
        a, b = slow([x])[0], fast([x])[0]
        assert a["phrases"] == b["phrases"]
        torch.testing.assert_close(b["scores"], a["scores"], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(b["boxes"], a["boxes"], rtol=1e-4, atol=1e-3)
    assert image_key(val[0]) in fast.region_cache and len(fast.region_cache) == 7


@pytest.mark.usefixtures("builtin_root")
def test_an_entry_is_computed_once_and_again_only_for_a_new_ground_truth_box():
    cfg = _cfg()
    model = _frozen_model(cfg)
    cache = RegionCache(model)
    x, = _inputs(cfg, TRAIN, 1)
    first = cache.lookup([x])[0]
    assert cache.lookup([x])[0] is first and cache.computed == 1
    assert len(first.gt_boxes) == len(torch.unique(x["instances"].gt_boxes.tensor, dim=0))
    assert first.proposal_features.shape == (len(first.proposal_boxes), model.roi_heads.region_features.output_dim)
    grown = copy.deepcopy(x)
    extra = torch.tensor([[1.0, 2.0, 30.0, 40.0]])
    grown["instances"].gt_boxes.tensor = torch.cat([grown["instances"].gt_boxes.tensor, extra])
    again = cache.lookup([grown])[0]
    assert cache.computed == 2 and len(again.gt_boxes) == len(first.gt_boxes) + 1
    rows = again.region_rows(grown["instances"].gt_boxes.tensor, "cpu")
    direct = model.roi_heads.region_features(
        model.backbone(model.preprocess_image([x]).tensor), [grown["instances"].gt_boxes[-1:]], [first.image_size])
    torch.testing.assert_close(rows[-1:], direct, rtol=1e-4, atol=1e-4)  # the new box's features, where it belongs


@pytest.mark.usefixtures("builtin_root")
def test_the_cache_refuses_a_detector_that_trains_or_changed_and_binds_only_the_same_weights():
    cfg = _cfg()
    model = _frozen_model(cfg)
    cache = RegionCache(model)
    x, = _inputs(cfg, TRAIN, 1)
    cache.lookup([x])
    same = _frozen_model(cfg)  # built again with the same seed: the same detector weights
    assert cache.bind(same).lookup([x]) and cache.computed == 0  # its entries serve the new model
    with pytest.raises(ValueError, match="differs from the one the cache was computed with"):
        cache.bind(_frozen_model(cfg, seed=1))
    same.backbone.stem.conv1.weight.requires_grad_(True)
    with pytest.raises(RuntimeError, match="no longer frozen.*backbone|no longer frozen.*stem"):
        cache.lookup([x])
    same.backbone.stem.conv1.weight.requires_grad_(False)
    with torch.no_grad():
        same.roi_heads.region_features.head.fc1.weight.mul_(1.0)  # an in-place change, even of nothing
    with pytest.raises(RuntimeError, match="its weights changed"):
        cache.lookup([x])


@pytest.mark.usefixtures("builtin_root")
def test_the_npa_table_scores_cached_ground_truth_regions_as_the_detector_does():
    from phrasedet.engine.npa_hook import ground_truth_scores

    cfg = _cfg("qa_rcnn_npa.yaml")
    model = _frozen_model(cfg)
    model.eval()
    inputs = _inputs(cfg, TRAIN, 3, is_train=False)
    vocabulary = sorted({p for x in inputs for p in x["phrases"]})
    slow_phrases, slow = ground_truth_scores(model, inputs, vocabulary)
    model.region_cache = RegionCache(model)
    phrases, fast = ground_truth_scores(model, inputs, vocabulary)
    assert phrases == slow_phrases and model.region_cache.computed == 3
    torch.testing.assert_close(fast, slow, rtol=1e-4, atol=1e-4)
