"""Building the phrase filter with a retrieval model (phrasedet/engine/phrase_filtering.py): each
test image and each sentence is embedded once, every image gets its top-N sentences and their
tokens; a features model runs on pixels; the trainer's evaluator reports both tables."""
import logging
import math
import os
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from detectron2.config import get_cfg
from detectron2.data import DatasetCatalog, MetadataCatalog

import phrasedet  # noqa: F401
import phrasedet.engine.phrase_filtering as module
from phrasedet.config import add_phrasedet_config
from phrasedet.engine import PhrasedetTrainer
from phrasedet.engine.phrase_filtering import (build_phrase_filter, build_retrieval_model, random_phrase_filter,
                                               retrieval_config, sentence_database, top_n_indices)
from phrasedet.evaluation import PhraseFilter, test_vocabulary
from phrasedet.evaluation.phrase_detection.phrase_filter import caption_tokens, phrase_tokens
from phrasedet.modeling.meta_arch.image_text_embedding import ImageTextEmbedding
from .tool_runs import tool_path

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SMALL_TEST = "phrasefilter_builtin_test_small"
NUM_TEST = 6
TOP_N = 7
# a tiny VSE++ (random weights) on 32 x 32 images: the filter's mechanics, not its quality
TINY = ["INPUT.RETRIEVAL.CROP", "32", "MODEL.RETRIEVAL.EMBED_DIM", "16", "MODEL.RETRIEVAL.GRU.WORD_DIM", "8",
        "DATALOADER.NUM_WORKERS", "0", "TEST.RETRIEVAL.IMS_PER_BATCH", "4"]


def _register_small(builtin_root):
    if SMALL_TEST not in DatasetCatalog.list():
        DatasetCatalog.register(SMALL_TEST, lambda: DatasetCatalog.get("builtin_flickr30k_entities_test")[:NUM_TEST])
        MetadataCatalog.get(SMALL_TEST).set(evaluator_type="phrase_detection", train_dataset="builtin_flickr30k_entities_train")


def _cfg(out, **keys):
    cfg = get_cfg()
    add_phrasedet_config(cfg)
    cfg.MODEL.DEVICE = "cpu"
    cfg.OUTPUT_DIR = str(out)
    f = cfg.TEST.PHRASE_FILTER
    f.RETRIEVAL_CONFIG = os.path.join(ROOT, "configs", "retrieval", "vsepp.yaml")
    f.RETRIEVAL_OPTS = list(TINY)
    f.TOP_N = TOP_N
    for k, v in keys.items():
        setattr(f, k, v)
    return cfg


@pytest.fixture(scope="module")
def weights(builtin_root, tmp_path_factory):
    """A freshly built (random) tiny retrieval model's checkpoint, and its model."""
    _register_small(builtin_root)
    out = tmp_path_factory.mktemp("retrieval")
    rcfg, _ = retrieval_config(_cfg(out))
    torch.manual_seed(0)
    from detectron2.modeling import build_model

    model = build_model(rcfg).eval()
    path = out / "model_final.pth"
    torch.save({"model": model.state_dict(), "iteration": 0}, path)
    return str(path), model


class _Counting:
    """Counts the images and captions the retrieval model embeds."""

    def __init__(self, monkeypatch):
        self.images, self.captions, self.caption_calls = [], [], 0
        embed_images, embed_captions = ImageTextEmbedding.embed_images, ImageTextEmbedding.embed_captions
        counter = self

        def images(model, batched_inputs):
            counter.images.extend(x["image_id"] for x in batched_inputs)
            assert all(x["captions"] == [] for x in batched_inputs)  # the test captions are never read
            return embed_images(model, batched_inputs)

        def captions(model, caps):
            counter.captions.extend(caps)
            counter.caption_calls += 1
            return embed_captions(model, caps)

        monkeypatch.setattr(ImageTextEmbedding, "embed_images", images)
        monkeypatch.setattr(ImageTextEmbedding, "embed_captions", captions)


def test_top_n_indices_best_first_ties_by_index():
    scores = np.array([[0.1, 0.9, 0.5, 0.9, 0.2], [3, 2, 1, 0, -1]], dtype=np.float32)
    np.testing.assert_array_equal(top_n_indices(scores, 3), [[1, 3, 2], [0, 1, 2]])
    assert top_n_indices(scores, 9).shape == (2, 5)


def test_filter_runs_once_per_image_and_once_per_sentence(weights, tmp_path, monkeypatch):
    path, _ = weights
    counting = _Counting(monkeypatch)
    cfg = _cfg(tmp_path, RETRIEVAL_WEIGHTS=path)
    f = build_phrase_filter(cfg, SMALL_TEST)

    records = DatasetCatalog.get(SMALL_TEST)
    ids = [r["image_id"] for r in records]
    rcfg, from_features = retrieval_config(cfg)
    sentences = sentence_database(rcfg)
    assert not from_features and len(sentences) == 3000  # 600 training images x 5
    assert sorted(counting.images) == sorted(ids)  # each test image once
    assert counting.captions == sentences and counting.caption_calls == 3  # every sentence once, in batches of 1024
    assert f.image_ids == ids and f.top_n == TOP_N
    for image_id in ids:
        idx = f.captions[image_id]
        assert len(idx) == TOP_N == len(set(idx))
        assert f.tokens[image_id] == frozenset(t for c in idx for t in caption_tokens(sentences[c]))

    saved = PhraseFilter.load(os.path.join(str(tmp_path), "inference", SMALL_TEST, "phrase_filter.json"))
    assert saved.tokens == f.tokens and saved.captions == f.captions and saved.top_n == TOP_N
    assert saved.retrieval_model["weights"] == path and saved.retrieval_model["num_sentences"] == 3000


def test_retrieved_sentences_are_the_top_scored(weights, tmp_path):
    path, _ = weights
    cfg = _cfg(tmp_path, RETRIEVAL_WEIGHTS=path)
    f = build_phrase_filter(cfg, SMALL_TEST, output_path="")
    assert not os.path.exists(os.path.join(str(tmp_path), "inference"))  # "" = not saved
    rcfg, _ = retrieval_config(cfg)
    model = build_retrieval_model(rcfg, path)
    sentences = sentence_database(rcfg)
    from phrasedet.data import CaptionDatasetMapper

    mapper = CaptionDatasetMapper(rcfg, is_train=False)
    with torch.no_grad():
        caps = model.embed_captions(sentences)
        for r in DatasetCatalog.get(SMALL_TEST):
            image = model.embed_images([mapper({**r, "captions": []})])
            scores = (image @ caps.t())[0].numpy()  # cosine: both sides are L2-normalized
            got = f.captions[r["image_id"]]
            assert np.all(np.diff(scores[got]) <= 1e-6)  # best first
            assert scores[got].min() >= np.sort(scores)[-TOP_N] - 1e-5


def test_saved_file_is_loaded_instead_of_running_the_model(weights, tmp_path, monkeypatch):
    path, _ = weights
    built = build_phrase_filter(_cfg(tmp_path, RETRIEVAL_WEIGHTS=path), SMALL_TEST)
    counting = _Counting(monkeypatch)
    saved = os.path.join(str(tmp_path), "inference", SMALL_TEST, "phrase_filter.json")
    loaded = build_phrase_filter(_cfg(tmp_path, RETRIEVAL_WEIGHTS=path, FILE=saved), SMALL_TEST)
    assert counting.images == [] and counting.captions == []
    assert loaded.tokens == built.tokens


def test_features_model_runs_on_pixels_with_its_backbone(weights, tmp_path):
    path, model = weights
    state = model.state_dict()
    head = tmp_path / "features_model.pth"  # what a model trained on features saves: no backbone tensors
    torch.save({"model": {k: v for k, v in state.items() if not k.startswith("image_encoder.backbone.")}}, head)
    backbone = tmp_path / "extractor.pth"
    torch.save({"model": {k: v for k, v in state.items() if k.startswith("image_encoder.backbone.")}}, backbone)
    pixels = build_phrase_filter(_cfg(tmp_path / "a", RETRIEVAL_WEIGHTS=path), SMALL_TEST)
    on_features = TINY + ["MODEL.RETRIEVAL.IMAGE_INPUT", "features", "MODEL.RETRIEVAL.BACKBONE_WEIGHTS", str(backbone)]
    cfg = _cfg(tmp_path / "b", RETRIEVAL_WEIGHTS=str(head), RETRIEVAL_OPTS=on_features)
    rcfg, from_features = retrieval_config(cfg)
    assert from_features and rcfg.MODEL.RETRIEVAL.IMAGE_INPUT == "pixels"
    features = build_phrase_filter(cfg, SMALL_TEST)
    assert features.captions == pixels.captions and features.tokens == pixels.tokens
    assert features.retrieval_model["from_features"] is True
    # the features directory's extractor.pth is the CNN when BACKBONE_WEIGHTS is not set
    from_dir = TINY + ["MODEL.RETRIEVAL.IMAGE_INPUT", "features", "MODEL.RETRIEVAL.IMAGE_FEATURES_DIR", str(tmp_path)]
    assert build_phrase_filter(_cfg(tmp_path / "c", RETRIEVAL_WEIGHTS=str(head), RETRIEVAL_OPTS=from_dir),
                               SMALL_TEST).captions == pixels.captions
    # a pixel model without backbone tensors and without BACKBONE_WEIGHTS would run a random CNN: refused
    with pytest.raises(ValueError, match="missing.*image_encoder.backbone"):
        build_phrase_filter(_cfg(tmp_path / "d", RETRIEVAL_WEIGHTS=str(head)), SMALL_TEST)
    with pytest.raises(ValueError, match="MODEL.RETRIEVAL.BACKBONE_WEIGHTS"):
        build_phrase_filter(_cfg(tmp_path / "e", RETRIEVAL_WEIGHTS=str(head),
                                 RETRIEVAL_OPTS=TINY + ["MODEL.RETRIEVAL.IMAGE_INPUT", "features"]), SMALL_TEST)


def test_missing_files_name_the_config_key(weights, tmp_path):
    path, _ = weights
    with pytest.raises(FileNotFoundError, match="TEST.PHRASE_FILTER.RETRIEVAL_WEIGHTS"):
        build_phrase_filter(_cfg(tmp_path, RETRIEVAL_WEIGHTS=str(tmp_path / "nope.pth")), SMALL_TEST)
    with pytest.raises(FileNotFoundError, match="TEST.PHRASE_FILTER.RETRIEVAL_CONFIG"):
        build_phrase_filter(_cfg(tmp_path, RETRIEVAL_WEIGHTS=path, RETRIEVAL_CONFIG=str(tmp_path / "nope.yaml")), SMALL_TEST)
    with pytest.raises(ValueError, match="TEST.PHRASE_FILTER.RETRIEVAL_CONFIG"):
        build_phrase_filter(_cfg(tmp_path, RETRIEVAL_WEIGHTS=path, RETRIEVAL_CONFIG=""), SMALL_TEST)
    with pytest.raises(FileNotFoundError, match="TEST.PHRASE_FILTER.FILE"):
        build_phrase_filter(_cfg(tmp_path, FILE=str(tmp_path / "nope.json")), SMALL_TEST)
    # the trainer checks when it builds the evaluator, before any inference
    with pytest.raises(FileNotFoundError, match="TEST.PHRASE_FILTER.RETRIEVAL_WEIGHTS"):
        PhrasedetTrainer.build_evaluator(_cfg(tmp_path, RETRIEVAL_WEIGHTS=str(tmp_path / "nope.pth")), SMALL_TEST)


def test_trainer_evaluator_reports_filtered_and_unfiltered(weights, tmp_path, monkeypatch):
    from tests.evaluation.toy import noisy_outputs

    path, _ = weights
    cfg = _cfg(tmp_path, RETRIEVAL_WEIGHTS=path)
    cfg.TEST.PHRASE_DETECTION.SAVE_PREDICTIONS = False
    counting = _Counting(monkeypatch)
    evaluator = PhrasedetTrainer.build_evaluator(cfg, SMALL_TEST)
    assert counting.images == []  # built when evaluating
    records = DatasetCatalog.get(SMALL_TEST)
    phrases = test_vocabulary(records)
    evaluator.reset()
    for r in records:
        evaluator.process([r], [noisy_outputs(r, phrases)])
    results = evaluator.evaluate()
    assert sorted(counting.images) == sorted(r["image_id"] for r in records)
    m, u = results["phrase_detection"], results["phrase_detection_unfiltered"]
    assert m["filter_top_n"] == TOP_N and 0 <= m["filter_recall"] <= 100 and m["loc_acc"] == u["loc_acc"]
    saved = PhraseFilter.load(os.path.join(str(tmp_path), "inference", SMALL_TEST, "phrase_filter.json"))
    assert len(saved) == NUM_TEST
    # without the filter keys nothing changes
    plain = PhrasedetTrainer.build_evaluator(_cfg(tmp_path / "plain"), SMALL_TEST)
    plain.reset()
    for r in records:
        plain.process([r], [noisy_outputs(r, phrases)])
    got = plain.evaluate()
    assert set(got) == {"phrase_detection"} and got["phrase_detection"].keys() == u.keys()
    assert all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(got["phrase_detection"].values(), u.values()))


def test_build_tool_writes_the_filter_and_prints_its_recall(weights, tmp_path, capsys):
    import importlib.util

    path, _ = weights
    spec = importlib.util.spec_from_file_location("build_phrase_filter", tool_path("build_phrase_filter.py"))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    out = tmp_path / "filter.json"
    summary = tool.main(["--dataset", SMALL_TEST, "--output", str(out), "MODEL.DEVICE", "cpu",
                         "TEST.PHRASE_FILTER.RETRIEVAL_CONFIG", os.path.join(ROOT, "configs", "retrieval", "vsepp.yaml"),
                         "TEST.PHRASE_FILTER.RETRIEVAL_WEIGHTS", path, "TEST.PHRASE_FILTER.RETRIEVAL_OPTS", repr(TINY),
                         "TEST.PHRASE_FILTER.TOP_N", "3"])
    f = PhraseFilter.load(str(out))
    assert f.top_n == 3 and len(f) == NUM_TEST and all(len(c) == 3 for c in f.captions.values())
    from phrasedet.evaluation.phrase_detection.dataset import load_test_split

    gt = load_test_split(SMALL_TEST)[1]
    assert summary["recall"] == pytest.approx(100.0 * f.recall(gt))
    assert '"recall_zero_shot"' in capsys.readouterr().out
    # the random-sentences baseline: its pairs kept as a slow count over every (image, phrase) gives it
    baseline, _ = random_phrase_filter(tool_cfg := _cfg(tmp_path, TOP_N=3), list(f.tokens), seed=0)
    kept = sum(bool(set(phrase_tokens(p)) & baseline.tokens[i]) for i in f.tokens for p in gt.phrases)
    assert summary["random_sentences"]["kept_pairs"] == pytest.approx(100.0 * kept / (len(f) * gt.num_phrases))
    assert summary["tokens_allowed_per_image"] == pytest.approx(np.mean([len(t) for t in f.tokens.values()]))
    assert summary["database_tokens"] == len(set().union(*map(caption_tokens, sentence_database(retrieval_config(tool_cfg)[0]))))


def test_the_random_sentences_baseline_draws_top_n_distinct_sentences_per_image_again_with_its_seed(weights, tmp_path):
    cfg = _cfg(tmp_path)
    captions = sentence_database(retrieval_config(cfg)[0])
    ids = [str(i) for i in range(20)]
    a, tokens = random_phrase_filter(cfg, ids, seed=3)
    b, _ = random_phrase_filter(cfg, ids, seed=3)
    c, _ = random_phrase_filter(cfg, ids, seed=4)
    assert a.captions == b.captions != c.captions and a.retrieval_model == "random (seed 3)"
    for i in ids:
        assert len(set(a.captions[i])) == TOP_N and all(0 <= k < len(captions) for k in a.captions[i])
        assert a.tokens[i] == set().union(*(caption_tokens(captions[k]) for k in a.captions[i]))
    assert tokens == len({w for caption in captions for w in caption_tokens(caption)})
    assert len({tuple(a.captions[i]) for i in ids}) == len(ids)  # each image its own draw


def _features_model(weights="", features_dir=""):
    return SimpleNamespace(MODEL=SimpleNamespace(RETRIEVAL=SimpleNamespace(BACKBONE_WEIGHTS=weights,
                                                                          IMAGE_FEATURES_DIR=features_dir)))


NO_CNN = ("TEST.PHRASE_FILTER.RETRIEVAL_CONFIG has MODEL.RETRIEVAL.IMAGE_INPUT 'features': the filter runs the model on "
          "pixels and needs the CNN the features were extracted with; set MODEL.RETRIEVAL.BACKBONE_WEIGHTS (e.g. through "
          "TEST.PHRASE_FILTER.RETRIEVAL_OPTS) or keep the features directory's extractor.pth")


def test_a_features_model_s_cnn_is_its_backbone_weights_else_its_folder_s_extractor_else_an_error(tmp_path, monkeypatch):
    from phrasedet.engine.phrase_filtering import _extraction_backbone

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PHRASEDET_DATASETS", str(tmp_path / "datasets"))
    (tmp_path / "extractor.pth").write_bytes(b"")  # in the working directory: never the features folder's
    (tmp_path / "features").mkdir()
    with pytest.raises(ValueError) as error:
        _extraction_backbone(_features_model())
    assert str(error.value) == NO_CNN
    with pytest.raises(ValueError) as error:  # a features folder without extractor.pth
        _extraction_backbone(_features_model(features_dir=str(tmp_path / "features")))
    assert str(error.value) == NO_CNN
    (tmp_path / "features" / "extractor.pth").write_bytes(b"")
    assert _extraction_backbone(_features_model(features_dir="features")) == os.path.join("features", "extractor.pth")
    assert _extraction_backbone(_features_model(str(tmp_path / "extractor.pth"), "features")) == str(tmp_path / "extractor.pth")
    with pytest.raises(FileNotFoundError) as error:
        _extraction_backbone(_features_model(str(tmp_path / "cnn.pth")))
    assert str(error.value) == (f"MODEL.RETRIEVAL.BACKBONE_WEIGHTS of TEST.PHRASE_FILTER.RETRIEVAL_CONFIG: "
                                f"no file {str(tmp_path / 'cnn.pth')!r}")
    with pytest.raises(FileNotFoundError, match=r"^MODEL.RETRIEVAL.IMAGE_FEATURES_DIR 'gone': neither "):
        _extraction_backbone(_features_model(features_dir="gone"))


def test_the_random_baseline_s_default_seed_is_0_and_its_draw_never_repeats_a_sentence(weights, tmp_path):
    cfg = _cfg(tmp_path, TOP_N=10 ** 6)  # more than the sentence database: every image draws all of it, in some order
    captions = sentence_database(retrieval_config(cfg)[0])
    ids = [str(i) for i in range(3)]
    default, _ = random_phrase_filter(cfg, ids)
    assert default.retrieval_model == "random (seed 0)" and default.captions == random_phrase_filter(cfg, ids, seed=0)[0].captions
    assert default.top_n == len(captions)
    for i in ids:
        assert sorted(default.captions[i]) == list(range(len(captions)))


def test_the_config_check_names_each_bad_value_in_full(tmp_path):
    from phrasedet.engine.phrase_filtering import check_phrase_filter_config

    check_phrase_filter_config(_cfg(tmp_path, TOP_N=1))  # one sentence per image is a filter
    with pytest.raises(ValueError) as error:
        check_phrase_filter_config(_cfg(tmp_path, TOP_N=0))
    assert str(error.value) == "TEST.PHRASE_FILTER.TOP_N must be >= 1, got 0"
    weights = tmp_path / "w.pth"
    weights.write_bytes(b"")
    with pytest.raises(ValueError) as error:
        check_phrase_filter_config(_cfg(tmp_path, RETRIEVAL_WEIGHTS=str(weights), RETRIEVAL_CONFIG=""))
    assert str(error.value) == ("TEST.PHRASE_FILTER.RETRIEVAL_WEIGHTS is set but TEST.PHRASE_FILTER.RETRIEVAL_CONFIG is "
                                "not: name the retrieval model's config (a yaml of configs/retrieval/ or its run's config.yaml)")
    with pytest.raises(ValueError) as error:
        check_phrase_filter_config(_cfg(tmp_path, RETRIEVAL_WEIGHTS=str(weights), RETRIEVAL_OPTS=TINY + ["A"]))
    assert str(error.value) == f"TEST.PHRASE_FILTER.RETRIEVAL_OPTS must be KEY VALUE pairs, got {TINY + ['A']}"
    with pytest.raises(ValueError) as error:
        build_phrase_filter(_cfg(tmp_path), SMALL_TEST)
    assert str(error.value) == ("no phrase filter configured: set TEST.PHRASE_FILTER.RETRIEVAL_WEIGHTS (with "
                                "RETRIEVAL_CONFIG) or TEST.PHRASE_FILTER.FILE")


def test_top_n_indices_are_int64_and_top_0_is_empty():
    scores = np.array([[0.3, 0.1], [0.2, 0.4]], dtype=np.float32)
    top = top_n_indices(scores, 1)
    assert top.dtype == np.int64 and top.tolist() == [[0], [1]]
    assert top_n_indices(scores, 0).shape == (2, 0)


def _warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_saved_filter_of_another_top_n_is_used_with_a_warning(weights, tmp_path, caplog):
    path, _ = weights
    build_phrase_filter(_cfg(tmp_path, RETRIEVAL_WEIGHTS=path), SMALL_TEST)
    saved = os.path.join(str(tmp_path), "inference", SMALL_TEST, "phrase_filter.json")
    with caplog.at_level(logging.WARNING, logger="phrasedet.engine"):
        same = build_phrase_filter(_cfg(tmp_path, FILE=saved), SMALL_TEST)
    assert same.top_n == TOP_N and not _warnings(caplog)
    with caplog.at_level(logging.WARNING, logger="phrasedet.engine"):
        other = build_phrase_filter(_cfg(tmp_path, FILE=saved, TOP_N=TOP_N + 1), SMALL_TEST)
    assert other.top_n == TOP_N
    assert _warnings(caplog) == [
        f"TEST.PHRASE_FILTER.FILE {saved} was built with the top {TOP_N} sentences, TEST.PHRASE_FILTER.TOP_N is "
        f"{TOP_N + 1}: using the file's"]


def test_weights_that_do_not_fit_are_refused_with_a_hint_only_for_a_missing_backbone(weights, tmp_path):
    path, model = weights
    rcfg, _ = retrieval_config(_cfg(tmp_path))
    state = model.state_dict()
    prefix = ("TEST.PHRASE_FILTER.RETRIEVAL_WEIGHTS does not fit TEST.PHRASE_FILTER.RETRIEVAL_CONFIG: ")
    hint = (" (a model trained on pixels with the backbone untouched: set MODEL.RETRIEVAL.BACKBONE_WEIGHTS through "
            "TEST.PHRASE_FILTER.RETRIEVAL_OPTS)")
    headless = tmp_path / "headless.pth"
    torch.save({"model": {k: v for k, v in state.items() if not k.startswith("image_encoder.backbone.")}}, headless)
    with pytest.raises(ValueError) as error:
        build_retrieval_model(rcfg, str(headless))
    assert str(error.value).startswith(prefix + f"{headless} does not fit the model: missing ['image_encoder.backbone.")
    assert str(error.value).endswith("], unexpected []" + hint)
    extra = tmp_path / "extra.pth"
    torch.save({"model": {**state, "bogus.weight": torch.zeros(1)}}, extra)
    with pytest.raises(ValueError) as error:
        build_retrieval_model(rcfg, str(extra))
    assert str(error.value) == prefix + f"{extra} does not fit the model: missing [], unexpected ['bogus.weight']"


def test_a_features_model_keeps_its_extraction_cnn_even_when_its_checkpoint_holds_another(weights, tmp_path):
    path, model = weights
    state = model.state_dict()
    backbone = tmp_path / "extractor.pth"
    torch.save({"model": {k: v for k, v in state.items() if k.startswith("image_encoder.backbone.")}}, backbone)
    other = tmp_path / "other_backbone.pth"  # the head, and a backbone of zeros that must not be read
    torch.save({"model": {k: torch.zeros_like(v) if k.startswith("image_encoder.backbone.") else v
                          for k, v in state.items()}}, other)
    opts = TINY + ["MODEL.RETRIEVAL.IMAGE_INPUT", "features", "MODEL.RETRIEVAL.BACKBONE_WEIGHTS", str(backbone)]
    rcfg, from_features = retrieval_config(_cfg(tmp_path, RETRIEVAL_OPTS=opts))
    loaded = build_retrieval_model(rcfg, str(other), skip_backbone=from_features).state_dict()
    for k, v in state.items():
        if k.startswith("image_encoder.backbone.") and v.is_floating_point():
            assert torch.equal(loaded[k], v), k


def _scripted_clock(monkeypatch, *ticks):
    """The module's ``time.perf_counter`` returns ``ticks`` in turn, then 0."""
    import itertools

    clock = itertools.chain(ticks, itertools.repeat(0.0))
    monkeypatch.setattr(module, "time", SimpleNamespace(perf_counter=lambda: next(clock)))


def test_the_filter_s_description_and_log_give_its_model_and_timings_by_hand(weights, tmp_path, monkeypatch, caplog):
    path, _ = weights
    if "phrasefilter_builtin_test_one" not in DatasetCatalog.list():
        DatasetCatalog.register("phrasefilter_builtin_test_one", lambda: DatasetCatalog.get(SMALL_TEST)[:1])
    real_retrieve = module.retrieve

    def retrieve(*args):
        retrieved, _ = real_retrieve(*args)
        return retrieved, {"caption_seconds": 1.23456, "image_seconds": 0.0740741}

    monkeypatch.setattr(module, "retrieve", retrieve)
    cfg = _cfg(tmp_path, RETRIEVAL_WEIGHTS=path)
    rcfg, _ = retrieval_config(cfg)
    captions = sentence_database(rcfg)
    cases = ((SMALL_TEST, NUM_TEST, 0.01235, 12.3), ("phrasefilter_builtin_test_one", 1, 0.07407, 74.1))
    for dataset, images, per_image, per_image_ms in cases:  # seconds per image: 0.0740741 s over the images
        _scripted_clock(monkeypatch, 100.0, 102.5)  # the model is built in 2.5 s
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="phrasedet.engine"):
            built = build_phrase_filter(cfg, dataset, output_path="")
        assert built.retrieval_model == {
            "config": cfg.TEST.PHRASE_FILTER.RETRIEVAL_CONFIG, "weights": path, "backbone_weights": "",
            "from_features": False, "score": rcfg.MODEL.RETRIEVAL.SCORE, "sentence_datasets": list(rcfg.DATASETS.TRAIN),
            "num_sentences": len(captions), "caption_seconds": 1.235, "seconds_per_image": per_image}
        assert (f"Phrase filter of {dataset}: top {TOP_N} of {len(captions)} sentences ({', '.join(rcfg.DATASETS.TRAIN)}) "
                f"for {images} images; model built in 2.5 s, sentences embedded in 1.2 s, {per_image_ms} ms per test "
                f"image, {built.mean_tokens():.1f} allowed tokens per image on average") in caplog.messages


def test_top_n_above_the_sentence_database_warns_and_an_empty_database_is_refused(weights, tmp_path, monkeypatch, caplog):
    path, _ = weights
    rcfg, _ = retrieval_config(_cfg(tmp_path, RETRIEVAL_WEIGHTS=path))
    n = len(sentence_database(rcfg))

    with caplog.at_level(logging.WARNING, logger="phrasedet.engine"):
        every = build_phrase_filter(_cfg(tmp_path, RETRIEVAL_WEIGHTS=path, TOP_N=n), SMALL_TEST, output_path="")
    assert _warnings(caplog) == [] and all(sorted(c) == list(range(n)) for c in every.captions.values())
    with caplog.at_level(logging.WARNING, logger="phrasedet.engine"):
        build_phrase_filter(_cfg(tmp_path, RETRIEVAL_WEIGHTS=path, TOP_N=n + 1), SMALL_TEST, output_path="")
    assert _warnings(caplog) == [f"TEST.PHRASE_FILTER.TOP_N {n + 1} is more than the {n} sentences of "
                          f"{list(rcfg.DATASETS.TRAIN)}: every sentence is retrieved"]
    monkeypatch.setattr(module, "sentence_database", lambda rcfg: [])
    with pytest.raises(ValueError) as error:
        build_phrase_filter(_cfg(tmp_path, RETRIEVAL_WEIGHTS=path), SMALL_TEST, output_path="")
    assert str(error.value) == (f"TEST.PHRASE_FILTER.RETRIEVAL_CONFIG: DATASETS.TRAIN {list(rcfg.DATASETS.TRAIN)} "
                                "has no captions")


def test_the_retrieval_config_refuses_what_is_not_a_retrieval_model_and_clears_what_the_filter_sets(tmp_path):
    cite = os.path.join(ROOT, "configs", "cite_cca.yaml")
    with pytest.raises(ValueError) as error:
        retrieval_config(_cfg(tmp_path, RETRIEVAL_CONFIG=cite, RETRIEVAL_OPTS=[]))
    assert str(error.value) == (f"TEST.PHRASE_FILTER.RETRIEVAL_CONFIG {cite!r}: MODEL.META_ARCHITECTURE is 'PhraseRCNN', "
                                "the filter needs an ImageTextEmbedding (configs/retrieval/)")
    cfg = _cfg(tmp_path, RETRIEVAL_OPTS=TINY + ["DATASETS.TRAIN", "()"])
    with pytest.raises(ValueError) as error:
        retrieval_config(cfg)
    assert str(error.value) == (f"TEST.PHRASE_FILTER.RETRIEVAL_CONFIG {cfg.TEST.PHRASE_FILTER.RETRIEVAL_CONFIG!r}: "
                                "DATASETS.TRAIN (the sentence database) is empty")
    with pytest.raises(ValueError) as error:
        sentence_database(SimpleNamespace(DATASETS=SimpleNamespace(TRAIN=[])))
    assert str(error.value) == ("TEST.PHRASE_FILTER.RETRIEVAL_CONFIG builds its vocabulary from the captions of "
                                "DATASETS.TRAIN, which is empty")
    backbone = tmp_path / "extractor.pth"
    backbone.write_bytes(b"")
    opts = TINY + ["MODEL.WEIGHTS", "x.pth", "MODEL.RETRIEVAL.IMAGE_INPUT", "features",
                   "MODEL.RETRIEVAL.BACKBONE_WEIGHTS", str(backbone), "MODEL.RETRIEVAL.FREEZE_BACKBONE_ITERS", "5"]
    rcfg, from_features = retrieval_config(_cfg(tmp_path, RETRIEVAL_OPTS=opts))
    # the weights come from RETRIEVAL_WEIGHTS, never MODEL.WEIGHTS; the CNN stays frozen, as the features were
    assert from_features and rcfg.MODEL.WEIGHTS == "" and rcfg.MODEL.RETRIEVAL.FREEZE_BACKBONE_ITERS == -1
