"""DSVELoc (paper 004) on the built-in data: its image trunk, its heatmaps and points, its checks."""
import os

import pytest
import torch
from detectron2.config import get_cfg
from detectron2.data import DatasetCatalog
from detectron2.modeling import build_model

from phrasedet.config import add_phrasedet_config
from phrasedet.data import PointingDatasetMapper
from phrasedet.modeling import DSVELoc
from phrasedet.modeling.heatmap import text_heatmaps

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "pointing")
SMALL = ["INPUT.RETRIEVAL.CROP", 32, "INPUT.POINTING.SIZE", 64, "MODEL.RETRIEVAL.EMBED_DIM", 16,
         "MODEL.RETRIEVAL.ADAPTATION_DIM", 12, "MODEL.RETRIEVAL.RNN.NUM_LAYERS", 1, "MODEL.POINTING.HEATMAP_TOPK", 4,
         "PHRASEDET.TEXT.WORD2VEC_EPOCHS", 1, "PHRASEDET.TEXT.WORD2VEC_DIM", 8]


def _cfg(*opts):
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(os.path.join(CONFIGS, "dsve_loc.yaml"))
    cfg.merge_from_list(SMALL + list(opts))
    return cfg


def _record(builtin_root, texts=("red cross", "the triangle")):
    record = DatasetCatalog.get("builtin_flickr30k_captions_test")[0]
    return {**record, "height": 96, "width": 128,
            "queries": [{"text": t, "bbox": [0.0, 0.0, 10.0, 10.0], "query_id": str(i)} for i, t in enumerate(texts)]}


def _build(*opts):
    torch.manual_seed(0)
    return build_model(_cfg(*opts)).eval()


@pytest.fixture(scope="module")
def model(builtin_root):
    return _build()


def test_the_image_trunk_is_adaptation_weldon_dropout_linear(model):
    enc = model.image_encoder
    assert isinstance(model, DSVELoc)
    assert enc.adaptation.kernel_size == (1, 1) and enc.adaptation.out_channels == 12 and enc.adaptation.bias is not None
    assert (enc.pooling.k_max, enc.pooling.k_min) == (1, 1) and enc.dropout.p == 0.5
    assert isinstance(enc.projection, torch.nn.Linear) and enc.pooled_dim == 12 and not enc.normalize_pooled


def test_inference_on_pointing_inputs_gives_one_point_per_query_from_the_heatmaps(model, builtin_root):
    cfg = _cfg()
    x = PointingDatasetMapper(cfg)(_record(builtin_root))
    assert x["image"].shape == (3, 64, 64)
    out = model([x])[0]
    maps = model.image_encoder.maps(model.image_inputs([x]))[0]  # [12, 8, 8] at res4 (stride 8) of a 64 x 64 image
    projected = torch.einsum("dc,chw->dhw", model.image_encoder.projection.weight, maps)
    texts = model.embed_captions(["red cross", "the triangle"])
    expected = text_heatmaps(projected, texts, 4, "value")
    assert torch.allclose(out["heatmaps"], expected, atol=1e-5)
    for heat, point in zip(expected, out["points"]):
        row, col = divmod(int(heat.argmax()), 8)
        assert point.tolist() == pytest.approx([(col + 0.5) * 128 / 8, (row + 0.5) * 96 / 8])  # the cell centre (the config), original pixels


def test_with_average_pooling_the_embedding_is_the_mean_of_the_projected_maps_plus_bias(builtin_root):
    """Eq. 8 is exact for a linear pooling: mean over cells of A G = A mean(G)."""
    model = _build("MODEL.RETRIEVAL.POOLING", "avg")
    x = PointingDatasetMapper(_cfg())(_record(builtin_root))
    projected = model.projected_maps([x])[0]
    embedding = model.image_encoder(model.image_inputs([x]))[0]  # before L2 normalization, eval: no dropout
    assert torch.allclose(projected.mean(dim=(1, 2)) + model.image_encoder.projection.bias, embedding, atol=1e-5)


def test_caption_inputs_still_give_retrieval_embeddings(model, builtin_root):
    from phrasedet.data import CaptionDatasetMapper

    cfg = _cfg()
    x = CaptionDatasetMapper(cfg, is_train=False)(DatasetCatalog.get("builtin_flickr30k_captions_test")[0])
    out = model([x])[0]
    assert out["image_embedding"].shape == (16,) and out["caption_embeddings"].shape == (5, 16)
    with pytest.raises(ValueError, match="mixes pointing-game inputs"):
        model([x, PointingDatasetMapper(cfg)(_record(builtin_root))])


def test_training_step_reaches_the_adaptation_and_the_sru_but_not_the_frozen_backbone(builtin_root):
    from phrasedet.data import CaptionDatasetMapper

    cfg = _cfg()
    model = build_model(cfg).train()
    mapper = CaptionDatasetMapper(cfg, is_train=True)
    losses = model([mapper(r) for r in DatasetCatalog.get("builtin_flickr30k_captions_train")[:6]])
    sum(losses.values()).backward()
    enc = model.image_encoder
    assert enc.adaptation.weight.grad is not None and enc.projection.weight.grad is not None
    assert any(p.grad is not None for p in model.sentence_encoder.parameters())
    assert all(p.grad is None for p in enc.backbone.parameters())


def test_adaptation_frozen_with_the_backbone_gets_no_gradient(builtin_root):
    model = _build("MODEL.RETRIEVAL.ADAPTATION_FROZEN_WITH_BACKBONE", True)
    assert not any(p.requires_grad for p in model.image_encoder.adaptation.parameters())


@pytest.mark.parametrize("opts, message", [
    (["MODEL.RETRIEVAL.IMAGE_PROJECTION", "two_layer"], "IMAGE_PROJECTION must be 'linear'"),
    (["MODEL.RETRIEVAL.IMAGE_INPUT", "features"], "IMAGE_INPUT must be 'pixels'"),
    (["MODEL.POINTING.TOPK_SELECT", "abs"], "TOPK_SELECT must be one of"),
    (["MODEL.POINTING.POINT_MODE", "middle"], "POINT_MODE must be one of"),
    (["MODEL.POINTING.HEATMAP_TOPK", 17], r"HEATMAP_TOPK must be in \[1, EMBED_DIM = 16\]"),
])
def test_config_errors(builtin_root, opts, message):
    with pytest.raises(ValueError, match=message):
        build_model(_cfg(*opts))


def test_stored_cnn_maps_give_the_pixel_models_embeddings_heatmaps_and_points(builtin_root, tmp_path):
    """The shortcut behind compare_pointing's cnn rows: a frozen CNN's maps computed once
    (extract_image_features(maps=True)) and read back (IMAGE_INPUT maps) give what the same model
    computes from pixels, on the data the project generates."""
    from phrasedet.data import CaptionDatasetMapper
    from phrasedet.engine.feature_extraction import extract_image_features
    from phrasedet.engine.trainer import caption_records

    captions, pointing = "builtin_flickr30k_captions_val", "builtin_flickr30k_pointing_val"
    pixel = _build()
    cfg = _cfg()
    # the model reads the size of its maps from its training split's file
    extract_image_features(cfg, pixel, ["builtin_flickr30k_captions_train", captions, pointing], str(tmp_path), maps=True)
    stored_opts = ("MODEL.RETRIEVAL.IMAGE_INPUT", "maps", "MODEL.RETRIEVAL.IMAGE_FEATURES_DIR", str(tmp_path))
    stored = _build(*stored_opts)
    head = {k: v for k, v in pixel.state_dict().items() if not k.startswith("image_encoder.backbone.")}
    stored.load_state_dict(head, strict=True)
    stored.eval()
    scfg = _cfg(*stored_opts)
    with torch.no_grad():
        records = DatasetCatalog.get(captions)[:12]
        from_pixels = pixel.embed_images([CaptionDatasetMapper(cfg, is_train=False)(r) for r in records])
        from_maps = stored.embed_images([CaptionDatasetMapper(scfg, is_train=False)(r)
                                         for r in caption_records(scfg, [captions])[:12]])
        assert torch.allclose(from_pixels, from_maps, atol=1e-5)
        for a, b in zip(DatasetCatalog.get(pointing)[:6], caption_records(scfg, [pointing])[:6]):
            pa, pb = pixel([PointingDatasetMapper(cfg)(a)])[0], stored([PointingDatasetMapper(scfg)(b)])[0]
            assert torch.allclose(pa["heatmaps"], pb["heatmaps"], atol=1e-4) and torch.equal(pa["points"], pb["points"])
