"""ImageTextEmbedding on the built-in captions: encoders, embeddings, frozen backbone, features path."""
import os

import pytest
import torch
from detectron2.config import get_cfg
from detectron2.data import DatasetCatalog
from detectron2.modeling import build_model

from phrasedet.config import add_phrasedet_config
from phrasedet.data import CaptionDatasetMapper, attach_image_features
from phrasedet.engine.feature_extraction import extract_image_features
from phrasedet.modeling.image_encoders import FeatureImageEncoder, PixelImageEncoder
from phrasedet.modeling.scorers import DotProductScorer, SimilarityNetwork

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "retrieval")
SMALL = ["INPUT.RETRIEVAL.CROP", 32, "MODEL.RETRIEVAL.EMBED_DIM", 16, "MODEL.RETRIEVAL.GRU.WORD_DIM", 8,
         "MODEL.RETRIEVAL.BRANCH.HIDDEN_DIM", 12, "PHRASEDET.TEXT.WORD2VEC_EPOCHS", 1, "PHRASEDET.TEXT.WORD2VEC_DIM", 8]


def _cfg(name="vsepp.yaml", *opts):
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(os.path.join(CONFIGS, name))
    cfg.merge_from_list(SMALL + list(opts))
    return cfg


def _inputs(cfg, n=3, is_train=False):
    mapper = CaptionDatasetMapper(cfg, is_train=is_train)
    return [mapper(r) for r in DatasetCatalog.get(cfg.DATASETS.TEST[0])[:n]]


@pytest.fixture(scope="module")
def model(builtin_root):
    torch.manual_seed(0)
    return build_model(_cfg()).eval()


def test_inference_gives_unit_embeddings_for_the_image_and_each_caption(model):
    inputs = _inputs(_cfg())
    outputs = model(inputs)
    assert len(outputs) == 3
    for x, out in zip(inputs, outputs):
        assert out["image_embedding"].shape == (16,)
        assert out["caption_embeddings"].shape == (len(x["captions"]), 16)
        assert torch.allclose(out["caption_embeddings"].norm(dim=1), torch.ones(len(x["captions"])), atol=1e-5)
        assert out["image_embedding"].norm().item() == pytest.approx(1.0, abs=1e-5)
    assert isinstance(model.scorer, DotProductScorer) and isinstance(model.image_encoder, PixelImageEncoder)


def test_a_batch_embeds_its_captions_at_once_as_each_image_alone_would(model):
    """Inference runs the sentence encoder once on all the batch's captions (lists of unequal
    length, one empty) and splits them back: each image's rows are its own captions' embeddings."""
    inputs = _inputs(_cfg(), n=4)
    inputs[1] = dict(inputs[1], captions=[])
    inputs[2] = dict(inputs[2], captions=inputs[2]["captions"][:2])
    outputs = model(inputs)
    assert [len(out["caption_embeddings"]) for out in outputs] == [len(x["captions"]) for x in inputs] == [5, 0, 2, 5]
    for x, out in zip(inputs, outputs):
        alone = model.embed_captions(x["captions"]) if x["captions"] else torch.zeros(0, 16)
        torch.testing.assert_close(out["caption_embeddings"], alone, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(out["image_embedding"], model.embed_images([x])[0], rtol=1e-5, atol=1e-6)


def test_gru_takes_each_caption_s_state_at_its_last_word(model):
    enc = model.sentence_encoder
    short, long = "a red circle", "a small blue square is on the left of the large green triangle"
    alone = enc([short])
    batched = enc([long, short])
    assert torch.allclose(alone[0], batched[1], atol=1e-6)
    tokens, lengths = enc.tokenize([long, short, "..."])
    assert lengths.tolist() == [13, 3, 1] and tokens[2, 0].item() == 1  # an empty caption is one <unk>


def test_a_checkpoint_of_another_vocabulary_is_refused(model):
    state = {k: v.clone() for k, v in model.state_dict().items()}
    state["sentence_encoder.vocab_fingerprint"] += 1
    with pytest.raises(ValueError, match="trained with other words than the word vocabulary"):
        model.load_state_dict(state)


def test_training_returns_the_configured_losses(builtin_root):
    torch.manual_seed(0)
    cfg = _cfg("vse0.yaml")
    m = build_model(cfg).train()
    losses = m(_inputs(cfg, n=4, is_train=True))
    assert set(losses) == {"loss_image_anchored", "loss_caption_anchored"}
    assert all(v.item() > 0 for v in losses.values())


def test_a_frozen_backbone_gets_no_gradient_and_keeps_its_statistics(builtin_root):
    torch.manual_seed(0)
    cfg = _cfg("vsepp.yaml", "MODEL.RETRIEVAL.FREEZE_BACKBONE_ITERS", 5)
    m = build_model(cfg).train()
    bn = m.image_encoder.backbone.stem.conv1.norm
    before = bn.running_mean.clone()
    sum(m(_inputs(cfg, n=4, is_train=True)).values()).backward()
    assert all(p.grad is None for p in m.image_encoder.backbone.parameters())
    assert torch.equal(bn.running_mean, before) and m.image_encoder.backbone.training  # mode restored
    assert m.image_encoder.projection.weight.grad is not None and m.needs_unused_parameters
    m.image_encoder.backbone_trainable = True  # what the trainer's hook does at iteration 5
    sum(m(_inputs(cfg, n=4, is_train=True)).values()).backward()
    assert any(p.grad is not None for p in m.image_encoder.backbone.parameters())
    assert not torch.equal(bn.running_mean, before) and not m.needs_unused_parameters


def test_frozen_throughout_has_no_trainable_backbone_parameter(model):
    assert not any(p.requires_grad for p in model.image_encoder.backbone.parameters())
    assert not model.needs_unused_parameters


def test_features_path_equals_the_pixel_path(model, tmp_path):
    cfg = _cfg()
    paths = extract_image_features(cfg, model, [cfg.DATASETS.TEST[0]], str(tmp_path))
    assert os.path.isfile(paths[cfg.DATASETS.TEST[0]])
    feat_cfg = _cfg("vsepp.yaml", "MODEL.RETRIEVAL.IMAGE_INPUT", "features", "MODEL.RETRIEVAL.IMAGE_FEATURES_DIR", str(tmp_path),
                    "DATASETS.TRAIN", "()")
    with pytest.raises(ValueError, match="vocabulary from the captions of DATASETS.TRAIN"):
        build_model(feat_cfg)
    feat_cfg.DATASETS.TRAIN = cfg.DATASETS.TEST  # only the test split was extracted
    feat_model = build_model(feat_cfg).eval()
    assert isinstance(feat_model.image_encoder, FeatureImageEncoder) and feat_model.image_encoder.pooled_dim == 128  # the built-in CNN's res4 width
    state = {k: v for k, v in model.state_dict().items() if not k.startswith(("image_encoder.backbone.", "sentence_encoder."))}
    feat_model.load_state_dict(state, strict=False)
    name = cfg.DATASETS.TEST[0]
    records = attach_image_features(DatasetCatalog.get(name), name, str(tmp_path))[:3]
    feat_inputs = [CaptionDatasetMapper(feat_cfg, is_train=False)(r) for r in records]
    got = torch.stack([o["image_embedding"] for o in feat_model(feat_inputs)])
    want = torch.stack([o["image_embedding"] for o in model(_inputs(cfg))])
    assert torch.allclose(got, want, atol=1e-5)


def test_paper_000_models_build(builtin_root):
    torch.manual_seed(0)
    two = build_model(_cfg("two_branch.yaml"))
    sim = build_model(_cfg("similarity_net.yaml"))
    assert isinstance(sim.scorer, SimilarityNetwork)
    assert type(two.sentence_encoder).__name__ == "FixedVectorSentenceEncoder"
    two.train()
    losses = two(_inputs(_cfg("two_branch.yaml"), n=4, is_train=True))
    assert set(losses) == {"loss_image_anchored", "loss_caption_anchored", "loss_neighbourhood"}
    sim.eval()
    out = sim(_inputs(_cfg("similarity_net.yaml"), n=2))
    scores = sim.scorer.pairwise(torch.stack([o["image_embedding"] for o in out]), out[0]["caption_embeddings"])
    paired = sim.scorer.paired(out[0]["image_embedding"].expand(5, -1), out[0]["caption_embeddings"])
    assert scores.shape == (2, 5) and torch.allclose(scores[0], paired, atol=1e-6)


@pytest.mark.parametrize("opts, message", [
    (["MODEL.RETRIEVAL.SCORE", "similarity_network"], "goes with LOSS.TYPE 'logistic'"),
    (["MODEL.RETRIEVAL.IMAGE_INPUT", "video"], "IMAGE_INPUT must be one of"),
    (["MODEL.RETRIEVAL.BACKBONE_FEATURE", "res5"], "is not a backbone output"),
    (["MODEL.RETRIEVAL.POOLING", "gem"], "pooling must be one of"),
    (["MODEL.RETRIEVAL.IMAGE_PROJECTION", "mlp"], "projection must be one of"),
])
def test_config_errors(builtin_root, opts, message):
    with pytest.raises(ValueError, match=message):
        build_model(_cfg("vsepp.yaml", *opts))
