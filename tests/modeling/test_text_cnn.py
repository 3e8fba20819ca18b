"""Paper 001's text CNN: fixed-length layout with position shift, word embedding with bias, 1-D
bottleneck ResNet, head; built from the config on the built-in captions."""
import logging
import os

import numpy as np
import pytest
import torch
from detectron2.config import get_cfg
from detectron2.data import DatasetCatalog
from detectron2.modeling import build_model
from gensim.models import KeyedVectors

from phrasedet.config import add_phrasedet_config
from phrasedet.data import CaptionDatasetMapper
from phrasedet.modeling.sentence_encoders import TextCNNSentenceEncoder, build_sentence_encoder
from phrasedet.modeling.sentence_encoders.text_cnn import TextBottleneck
from phrasedet.text import WordVocabulary
from phrasedet.text.build import build_word_vectors

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "retrieval")
SMALL = ["MODEL.RETRIEVAL.SENTENCE_ENCODER", "TextCNNSentenceEncoder", "MODEL.RETRIEVAL.EMBED_DIM", 16,
         "MODEL.RETRIEVAL.TEXT_CNN.WORD_DIM", 8, "MODEL.RETRIEVAL.TEXT_CNN.STAGE_DEPTHS", [1, 1, 1, 1],
         "MODEL.RETRIEVAL.TEXT_CNN.STAGE_WIDTHS", [8, 16, 16, 32], "PHRASEDET.TEXT.WORD2VEC_DIM", 8,
         "PHRASEDET.TEXT.WORD2VEC_EPOCHS", 1, "INPUT.RETRIEVAL.CROP", 32]
# a=2 red=3 circle=4 on=5 the=6 left=7 of=8 blue=9 square=10 (after <pad>=0 and <unk>=1)
WORDS = ["a", "red", "circle", "on", "the", "left", "of", "blue", "square"]
SMALL_NET = dict(stage_depths=[1, 1, 1, 1], stage_widths=[8, 16, 16, 32])


def _cfg(*opts):
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.merge_from_file(os.path.join(CONFIGS, "vsepp.yaml"))
    cfg.merge_from_list(SMALL + list(opts))
    return cfg


def _encoder(words=WORDS, max_length=5, word_dim=6, **kw):
    torch.manual_seed(0)
    kw = {**SMALL_NET, "dropout": 0.0, **kw}
    return TextCNNSentenceEncoder(WordVocabulary(words), embed_dim=4, word_dim=word_dim, max_length=max_length, **kw).eval()


def _kv(words, dim, seed=0):
    kv = KeyedVectors(dim)
    kv.add_vectors(list(words), np.random.RandomState(seed).randn(len(words), dim).astype(np.float32))
    return kv


@pytest.fixture(scope="module")
def cfg_encoder(builtin_root):
    cfg = _cfg("MODEL.RETRIEVAL.TEXT_CNN.WORD_LR_FACTOR", 0.25)
    torch.manual_seed(0)
    return cfg, build_sentence_encoder(cfg)


def test_built_from_the_config_it_gives_unnormalized_embed_dim_features(cfg_encoder):
    _, enc = cfg_encoder
    captions = ["a red circle on the left of a blue square", "a square", "..."]
    for mode in (enc.train, enc.eval):
        mode()
        out = enc(captions)
        assert out.shape == (3, 16) and torch.isfinite(out).all()
    assert not torch.allclose(out.norm(dim=1), torch.ones(3))
    assert enc([]).shape == (0, 16)
    assert [len(s) for s in enc.stages] == [1, 1, 1, 1] and enc.stages[-1][0].conv3.out_channels == 32
    assert enc.head.out_features == 16 and enc.head.layers[0].out_features == 16  # HEAD_HIDDEN_DIM 0 = EMBED_DIM


def test_word_vectors_initialize_the_rows_of_known_words(cfg_encoder):
    cfg, enc = cfg_encoder
    kv = build_word_vectors(cfg)  # word2vec of the training captions, cached by the encoder's build
    word = "circle"
    assert word in kv.key_to_index and word in enc.vocab
    assert torch.allclose(enc.embedding.weight[enc.vocab.index[word]], torch.tensor(kv[word]))
    assert not enc.embedding.weight[0].any()  # <pad>


def test_the_embedding_carries_the_configured_lr_factor(cfg_encoder):
    _, enc = cfg_encoder
    assert isinstance(enc.embedding.lr_factor, float) and enc.embedding.lr_factor == 0.25
    assert {n for n, _ in enc.embedding.named_parameters()} == {"weight", "bias"}
    assert _encoder(word_lr_factor=1e-3).embedding.lr_factor == 1e-3


def test_image_text_embedding_normalizes_the_text_cnn_features(builtin_root):
    torch.manual_seed(0)
    cfg = _cfg()
    model = build_model(cfg).eval()
    assert isinstance(model.sentence_encoder, TextCNNSentenceEncoder)
    mapper = CaptionDatasetMapper(cfg, is_train=False)
    inputs = [mapper(r) for r in DatasetCatalog.get(cfg.DATASETS.TEST[0])[:2]]
    for x, out in zip(inputs, model(inputs)):
        emb = out["caption_embeddings"]
        assert emb.shape == (len(x["captions"]), 16)
        assert torch.allclose(emb.norm(dim=1), torch.ones(len(x["captions"])), atol=1e-5)


def test_layout_clips_long_captions_and_pads_short_ones():
    enc = _encoder(max_length=5)
    layout = enc.layout(["A red circle on the left of a blue square.", "circle", "red zebra", "a red circle on the"])
    assert layout.dtype == torch.long and layout.tolist() == [
        [2, 3, 4, 5, 6],  # final words "left of a blue square" dropped
        [4, 0, 0, 0, 0],
        [3, 1, 0, 0, 0],  # unknown word = <unk>
        [2, 3, 4, 5, 6],  # exactly MAX_LENGTH words
    ]


def test_an_empty_caption_is_one_unk_counted_and_logged(caplog):
    enc = _encoder(max_length=4)
    with caplog.at_level(logging.WARNING):
        layout = enc.layout(["...", "", "red"])
    assert layout.tolist() == [[1, 0, 0, 0], [1, 0, 0, 0], [3, 0, 0, 0]]
    assert enc.empty_captions == 2 and "2 caption(s) without any word encoded as '<unk>' (2 so far)" in caplog.text
    enc.layout(["!"])
    assert enc.empty_captions == 3


def test_position_shift_draws_every_offset_and_keeps_the_words_in_order():
    enc = _encoder(max_length=6).train()
    torch.manual_seed(123)
    offsets = []
    for _ in range(200):
        row = enc.layout(["red circle on"])[0].tolist()
        start = next(i for i, x in enumerate(row) if x)
        assert row[start: start + 3] == [3, 4, 5] and sum(1 for x in row if x) == 3  # contiguous, in order
        offsets.append(start)
    assert set(offsets) == {0, 1, 2, 3}  # {0, ..., MAX_LENGTH - n}, nothing else
    # a caption of MAX_LENGTH words or more has a single offset; clipping still drops the final words
    long = enc.layout(["a red circle on the left of a blue square"] * 20)
    assert (long == torch.tensor([2, 3, 4, 5, 6, 7])).all()


def test_position_shift_follows_the_global_torch_rng():
    enc = _encoder(max_length=8).train()
    captions = ["red circle", "a blue square", "circle"] * 10
    torch.manual_seed(7)
    first = enc.layout(captions)
    torch.manual_seed(7)
    assert torch.equal(enc.layout(captions), first)
    assert (first[:, 0] == 0).any() and (first[:, 0] == 0).logical_not().any()  # some shifted, some not


def test_eval_mode_and_no_position_shift_are_left_aligned():
    captions = ["red circle on", "a", "blue square"] * 20
    expected = [[3, 4, 5, 0, 0, 0], [2, 0, 0, 0, 0, 0], [9, 10, 0, 0, 0, 0]] * 20
    assert _encoder(max_length=6).eval().layout(captions).tolist() == expected
    assert _encoder(max_length=6, position_shift=False).train().layout(captions).tolist() == expected


def test_padding_positions_enter_the_network_as_zeros():
    enc = _encoder(word_dim=3)
    with torch.no_grad():
        enc.embedding.bias.copy_(torch.tensor([1.0, -2.0, 0.5]))
    tokens = torch.tensor([[3, 1, 0, 0, 0]])
    x = enc.embedding(tokens)[0]
    assert torch.allclose(x[0], enc.embedding.weight[3] + enc.embedding.bias)
    assert torch.allclose(x[1], enc.embedding.weight[1] + enc.embedding.bias)
    assert not x[2:].any()  # no bias at padding
    x.sum().backward()
    assert not enc.embedding.weight.grad[0].any() and enc.embedding.weight.grad[3].any()


def test_word_vector_size_mismatch_names_the_key():
    with pytest.raises(ValueError, match=r"MODEL\.RETRIEVAL\.TEXT_CNN\.WORD_DIM is 6 but the word vectors "
                                         r"\(PHRASEDET.TEXT\) are 5-d"):
        _encoder(word_vectors=_kv(["red"], 5))
    kv = _kv(["red", "square", "zebra"], 6)
    enc = _encoder(word_vectors=kv)
    assert torch.equal(enc.embedding.weight[3], torch.tensor(kv["red"]))
    assert torch.equal(enc.embedding.weight[10], torch.tensor(kv["square"]))
    assert torch.equal(enc.embedding.weight[4], _encoder().embedding.weight[4])  # circle: its random row is kept


def test_a_checkpoint_of_another_vocabulary_is_refused():
    state = _encoder(WORDS).state_dict()
    with pytest.raises(ValueError, match="trained with other words than the word vocabulary.*TEXT_CNN.MIN_WORD_COUNT"):
        _encoder(WORDS[::-1]).load_state_dict(state)
    _encoder(WORDS).load_state_dict(state)


def test_width_two_convs_pad_one_zero_on_the_right():
    torch.manual_seed(0)
    block = TextBottleneck(4, 2, 4).eval()  # identity shortcut; BN in eval mode is per position
    with torch.no_grad():  # positive weights and inputs: every ReLU passes, every change propagates
        for p in block.parameters():
            p.abs_()
    x = torch.rand(1, 4, 6) + 0.1
    base = block(x)
    assert base.shape == (1, 4, 6)
    for j, affected in [(0, {0}), (3, {2, 3}), (5, {4, 5})]:  # position i sees positions i and i + 1
        y = x.clone()
        y[0, :, j] += 1.0
        changed = {i for i in range(6) if not torch.allclose(block(y)[0, :, i], base[0, :, i])}
        assert changed == affected, j


def test_strides_halve_the_length_as_in_the_paper_code():
    torch.manual_seed(0)
    enc = _encoder(max_length=32, stage_strides=[1, 2, 2, 1])
    lengths, x = [], torch.randn(2, 6, 32)
    for stage in enc.stages:
        x = stage(x)
        lengths.append(x.shape[-1])
    assert lengths == [32, 16, 8, 8]
    assert [TextBottleneck(2, 1, 2, stride=2)(torch.randn(2, 2, n)).shape[-1] for n in (5, 6, 1)] == [3, 3, 1]
    full = _encoder(stage_depths=[3, 4, 6, 1], stage_widths=[256, 512, 1024, 2048], max_length=32, word_dim=300)
    blocks = [b for s in full.stages for b in s]
    assert len(blocks) == 14 and [b.conv2.stride[0] for b in blocks] == [1] * 3 + [2, 1, 1, 1] + [2] + [1] * 5 + [1]
    assert (blocks[0].conv1.out_channels, blocks[0].conv3.out_channels, blocks[-1].conv2.out_channels) == (64, 256, 512)
    assert isinstance(blocks[1].shortcut, torch.nn.Identity) and not isinstance(blocks[3].shortcut, torch.nn.Identity)


@pytest.mark.parametrize("kw, key", [
    (dict(stage_widths=[8, 16, 16]), "STAGE_WIDTHS"),
    (dict(stage_strides=[1, 2]), "STAGE_STRIDES"),
    (dict(stage_depths=[1, 0, 1, 1]), "STAGE_DEPTHS"),
    (dict(stage_depths=[]), "STAGE_DEPTHS"),
    (dict(bottleneck_ratio=16), "BOTTLENECK_RATIO"),
    (dict(max_length=0), "MAX_LENGTH"),
])
def test_bad_stage_configs_name_the_key(kw, key):
    with pytest.raises(ValueError, match=rf"MODEL\.RETRIEVAL\.TEXT_CNN\.{key}"):
        _encoder(**kw)
