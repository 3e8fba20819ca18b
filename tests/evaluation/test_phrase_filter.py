"""Phrase filtering (paper 003 Sec. 6.2): filtered pairs get -inf and stay in the ranking; recall;
the JSON file; the predictions-file command agrees with the in-loop evaluator."""
import importlib.util
import json
import math
import os
import warnings

import numpy as np
import pytest
from detectron2.data import DatasetCatalog

import phrasedet  # noqa: F401
from phrasedet.evaluation import (PhraseDetectionEvaluator, PhraseFilter, evaluate_phrase_detection,
                                  evaluate_predictions_file, test_vocabulary)
from phrasedet.evaluation.phrase_detection.phrase_filter import (caption_tokens, evaluate_with_filter,
                                                                 phrase_tokens)
from phrasedet.evaluation.phrase_detection.ground_truth import PhraseGroundTruth
from phrasedet.fileio import BadFileError
from phrasedet.text.vocab import PhraseVocabulary

from .toy import A, B, FAR, TOY_TEST, ap_of, build, noisy_outputs, register_toy
from ..tool_runs import tool_path

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAN = float("nan")

# ----------------------------------------------------------------------------- the hand case
# i0 allows {red, a}, i1 allows {car, man}: "red car" shares a token with both (kept everywhere),
# "dog" with neither (filtered everywhere), "man" only with i1.
IMAGES = ["i0", "i1"]
PHRASES = ["dog", "man", "red car"]
GTS = [("i0", "red car", A), ("i1", "dog", A), ("i1", "man", B)]
DETS = {
    ("i0", "red car"): [(0.9, A), (0.5, FAR)],   # TP first
    ("i1", "red car"): [(0.8, FAR)],             # k=1: no detection (NaN)
    ("i0", "dog"): [(0.95, A), (0.1, FAR)],      # no dog in i0: false positives
    ("i1", "dog"): [(0.6, A), (0.2, FAR)],       # TP, ranked 2nd unfiltered
    ("i0", "man"): [(0.9, B)],                   # a false positive above the TP; k=1 NaN
    ("i1", "man"): [(0.5, B)],                   # TP
}
FILTER = {"i0": ["red", "a"], "i1": ["car", "man"]}


def _hand():
    return build(IMAGES, GTS, DETS, k=2, phrases=PHRASES)


def test_tokens_of_phrases_and_captions():
    assert phrase_tokens("red car") == ["red", "car"]
    assert phrase_tokens("The Red, car") == ["red", "car"]  # normalized: stop words and punctuation go
    assert caption_tokens("A man, in the RED car.") == ["a", "man", "in", "the", "red", "car"]  # stop words kept
    assert caption_tokens("...") == []


def test_filtered_pairs_get_minus_inf_and_stay_in_the_ranking():
    gt, dets = _hand()
    before = evaluate_phrase_detection(gt, dets)
    assert ap_of(before, "red car") == pytest.approx(1.0)
    assert ap_of(before, "dog") == pytest.approx(1 / 2)   # TP at rank 2 (after i0's 0.95)
    assert ap_of(before, "man") == pytest.approx(1 / 2)   # TP at rank 2 (after i0's 0.9)

    f = PhraseFilter(FILTER)
    assert f.apply(dets) == 3  # (i0, dog), (i1, dog), (i0, man) had detections
    s = dets.scores
    d, m, r = PHRASES.index("dog"), PHRASES.index("man"), PHRASES.index("red car")
    assert np.all(s[0, d] == -np.inf) and np.all(s[1, d] == -np.inf)
    assert s[0, m, 0] == -np.inf and np.isnan(s[0, m, 1])   # NaN = no detection stays NaN, also when filtered
    np.testing.assert_array_equal(s[1, m], [0.5, NAN])       # "man" is allowed in i1
    np.testing.assert_array_equal(s[0, r], np.float32([0.9, 0.5]))  # one shared token ("red") is enough
    np.testing.assert_array_equal(s[1, r], [np.float32(0.8), NAN])  # ("car")

    after = evaluate_phrase_detection(gt, dets)
    assert ap_of(after, "red car") == pytest.approx(1.0)
    # every dog entry is -inf: ties by (image, k) put i0's two entries first, the TP is 3rd of 4
    assert ap_of(after, "dog") == pytest.approx(1 / 3)
    assert int(after.num_tp[d]) == 1  # still found: filtered entries are entries, not removed
    # the false positive of i0 went to -inf: the TP of i1 is first
    assert ap_of(after, "man") == pytest.approx(1.0)


def test_recall_on_the_hand_case_overall_and_per_bucket():
    gt, dets = _hand()
    f = PhraseFilter(FILTER)
    assert f.recall(gt) == pytest.approx(2 / 3)   # red car in i0 and man in i1 kept, dog in i1 not
    vocabulary = PhraseVocabulary({"red car": 150, "man": 5})  # dog: zero-shot, man: few-shot, red car: common
    stats = f.statistics(gt, vocabulary)
    assert stats["recall_zero_shot"] == 0.0 and stats["recall_few_shot"] == 1.0 and stats["recall_common"] == 1.0
    assert stats["kept"] == pytest.approx(3 / 6)  # i0: red car; i1: man, red car
    masks = dict(f.keep_masks(gt))
    np.testing.assert_array_equal(masks[0], [False, False, True])
    np.testing.assert_array_equal(masks[1], [False, True, True])
    np.testing.assert_array_equal(f.keep_mask(gt, 1), masks[1])

    results, filtered, unfiltered = evaluate_with_filter(gt, dets, f, vocabulary)
    m, u = results["phrase_detection"], results["phrase_detection_unfiltered"]
    assert m["filter_recall"] == pytest.approx(200 / 3) and round(m["filter_recall"], 2) == 66.67
    assert m["filter_recall_zero_shot"] == 0.0 and m["filter_top_n"] == -1 and m["filter_kept"] == pytest.approx(50.0)
    assert u["mAP_zero_shot"] == pytest.approx(50.0) and m["mAP_zero_shot"] == pytest.approx(100 / 3)
    assert u["mAP_few_shot"] == pytest.approx(50.0) and m["mAP_few_shot"] == pytest.approx(100.0)
    assert m["loc_acc"] == u["loc_acc"]  # the filter re-ranks; the top-1 box of a GT pair is unchanged
    assert "filter_recall" not in u


@pytest.mark.parametrize("phrases, kept", [([], math.nan), (["dog", "red car"], 0.5)])
def test_statistics_without_instances_are_nan_without_a_warning(phrases, kept):
    """No test instance: recall (and every bucket's) is NaN, not the mean of nothing; no phrase
    either: the kept share is NaN too (0 of 0 pairs). With phrases, i0 keeps "red car" only: 1 of
    2 (image, phrase) pairs."""
    gt = PhraseGroundTruth(["i0"], phrases, [], [], np.zeros((0, 4)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stats = PhraseFilter({"i0": ["red"]}).statistics(gt, PhraseVocabulary({"red car": 150}))
    assert set(stats) == {"recall", "kept", "recall_zero_shot", "recall_few_shot", "recall_common"}
    assert all(math.isnan(v) for k, v in stats.items() if k != "kept")
    assert stats["kept"] == pytest.approx(kept, nan_ok=True)


def test_an_image_where_nothing_is_filtered_does_not_stop_the_images_after_it():
    """i0 allows every phrase ("dog", "man", "car"): nothing to drop there; i1 still filters "dog"
    (its two detections, 0.6 and 0.2, go to -inf): 1 pair."""
    gt, dets = _hand()
    assert PhraseFilter({"i0": ["dog", "man", "car"], "i1": ["car", "man"]}).apply(dets) == 1
    np.testing.assert_array_equal(dets.scores[1, PHRASES.index("dog")], [-np.inf, -np.inf])
    np.testing.assert_array_equal(dets.scores[0, PHRASES.index("dog")], np.float32([0.95, 0.1]))


@pytest.mark.parametrize("images, missing", [
    (["i0", "i1"], "'i2'"),
    (["i0"], "'i1' (and 1 more of the 3 test images)"),
    ([], "'i0' (and 2 more of the 3 test images)"),
])
def test_check_images_names_the_first_missing_image_and_counts_the_others(images, missing):
    gt, _ = build(["i0", "i1", "i2"], [("i0", "dog", A)], {})
    f = PhraseFilter({i: ["dog"] for i in images})
    with pytest.raises(ValueError) as e:
        f.check_images(gt)
    assert str(e.value) == (f"<phrase filter in memory>: the phrase filter has no entry for test image {missing}; "
                            "build it for this test split")


def test_keep_mask_of_an_image_missing_from_the_filter_names_it_and_the_source():
    gt, _ = _hand()
    f = PhraseFilter({"i0": ["red"]}, source="filters/test.json")
    np.testing.assert_array_equal(f.keep_mask(gt, 0), [False, False, True])
    with pytest.raises(ValueError) as e:
        f.keep_mask(gt, 1)
    assert str(e.value) == "filters/test.json: the phrase filter has no entry for test image 'i1'"


def test_an_image_missing_from_the_filter_is_an_error_naming_it_and_the_file(tmp_path):
    gt, dets = _hand()
    path = tmp_path / "f.json"
    PhraseFilter({"i0": ["red"]}, top_n=3).save(str(path))
    f = PhraseFilter.load(str(path))
    with pytest.raises(ValueError, match=r"f\.json.*'i1'"):
        f.apply(dets)
    with pytest.raises(ValueError, match="'i1'"):
        f.recall(gt)


# ----------------------------------------------------------------------------- the file
def test_save_writes_utf8_whatever_the_locale_encoding(tmp_path, latin1_locale):
    """load reads UTF-8 only: a token "café" must be written as UTF-8 on a Latin-1 machine too."""
    import phrasedet.evaluation.phrase_detection.phrase_filter as phrase_filter_module

    latin1_locale(phrase_filter_module)
    path = tmp_path / "f.json"
    f = PhraseFilter({"i0": ["caf\u00e9"]}, {"i0": [3]})
    f.save(str(path))
    assert f.source == str(path)  # later errors name the file
    assert path.read_bytes() == ('{"top_n": null, "retrieval_model": null, '
                                 '"images": {"i0": {"captions": [3], "tokens": ["caf\u00e9"]}}}').encode("utf-8")


def test_save_load_round_trip_and_bom(tmp_path):
    f = PhraseFilter({"i0": {"red", "a", "été"}, "i1": []}, {"i0": [4, 1, 7], "i1": [0, 2, 3]}, top_n=3,
                     retrieval_model={"config": "configs/retrieval/vsepp.yaml", "weights": "m.pth"})
    path = tmp_path / "filter.json"
    f.save(str(path))
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["top_n"] == 3 and data["images"]["i0"] == {"captions": [4, 1, 7], "tokens": ["a", "red", "été"]}
    g = PhraseFilter.load(str(path))
    assert g.tokens == f.tokens and g.captions == f.captions and g.top_n == 3
    assert g.retrieval_model == f.retrieval_model and g.source == str(path)
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert PhraseFilter.load(str(bom)).tokens == f.tokens


def _write(tmp_path, data, name="bad.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


_GOOD = {"top_n": 2, "retrieval_model": None, "images": {"i0": {"captions": [0, 1], "tokens": ["red"]}}}


@pytest.mark.parametrize("data, message", [
    ({k: v for k, v in _GOOD.items() if k != "top_n"}, "missing key 'top_n'"),
    ({**_GOOD, "top_n": "75"}, "key 'top_n' must be an integer, got '75'"),
    ({**_GOOD, "top_n": True}, "key 'top_n' must be an integer, got True"),
    ({**_GOOD, "top_n": 0}, "key 'top_n': must be a positive integer, got 0"),
    ({**_GOOD, "retrieval_model": 5}, "key 'retrieval_model': must be an object, a string or null, got 5"),
    ({**_GOOD, "images": []}, "key 'images' must be a JSON object, got []"),
    ({**_GOOD, "images": {"i0": {"captions": [0, 1]}}}, "image 'i0': missing key 'tokens'"),
    ({**_GOOD, "images": {"i0": {"captions": [0, 1], "tokens": "red"}}},
     "image 'i0': key 'tokens' must be a list of strings, got 'red'"),
    ({**_GOOD, "images": {"i0": {"captions": ["0"], "tokens": []}}},
     "image 'i0': key 'captions': must be a list of caption indices (integers >= 0), got ['0']"),
    ({**_GOOD, "images": {"i0": {"captions": [-1], "tokens": []}}},
     "image 'i0': key 'captions': must be a list of caption indices (integers >= 0), got [-1]"),
    ({**_GOOD, "images": {"i0": ["red"]}}, "image 'i0': expected a JSON object, got list ['red']"),
    ([_GOOD], "expected a JSON object, got list [{'top_n': 2, 'retrieval_model': None, 'images': {'i0': {..."),
])
def test_malformed_files_are_named_in_full(tmp_path, data, message):
    path = _write(tmp_path, data)
    with pytest.raises(BadFileError) as e:
        PhraseFilter.load(path)
    assert str(e.value) == f"{path}: {message}"


@pytest.mark.parametrize("top_n, retrieval_model", [(1, "toy"), (75, {"config": "x.yaml"}), (2, None)])
def test_the_smallest_top_n_and_every_kind_of_retrieval_model_load(tmp_path, top_n, retrieval_model):
    f = PhraseFilter.load(_write(tmp_path, {**_GOOD, "top_n": top_n, "retrieval_model": retrieval_model}))
    assert (f.top_n, f.retrieval_model, f.captions, f.tokens) == (top_n, retrieval_model, {"i0": [0, 1]},
                                                                  {"i0": frozenset({"red"})})


def test_a_missing_filter_file_is_named_as_a_phrase_filter(tmp_path):
    path = str(tmp_path / "none.json")
    with pytest.raises(FileNotFoundError) as e:
        PhraseFilter.load(path)
    assert str(e.value) == f"phrase filter {path!r} does not exist"


def test_undecodable_and_broken_files_are_named(tmp_path):
    good = _GOOD
    latin1 = tmp_path / "latin1.json"
    latin1.write_bytes(json.dumps(good).replace("red", "r\u00e9d").encode("latin-1"))
    with pytest.raises(BadFileError, match=r"latin1\.json:1:\d+: byte 0xe9 \(byte offset \d+\) is not valid UTF-8"):
        PhraseFilter.load(str(latin1))
    broken = tmp_path / "broken.json"
    broken.write_text("{", encoding="utf-8")
    with pytest.raises(BadFileError, match=r"broken\.json:1:2: invalid JSON \(byte offset 1\): Expecting property name"):
        PhraseFilter.load(str(broken))


# ----------------------------------------------------------------------------- evaluator and command
def _toy_filter():
    """Even images allow {man, car, sky}, odd ones {dog, tree, thing} (toy phrases: man, woman,
    dog, red car, blue sky, tree, unseen thing)."""
    ids = [d["image_id"] for d in DatasetCatalog.get(TOY_TEST)]
    return PhraseFilter({i: (["man", "car", "sky"] if n % 2 == 0 else ["dog", "tree", "thing"]) for n, i in enumerate(ids)},
                        {i: [n, n + 1] for n, i in enumerate(ids)}, top_n=2, retrieval_model="toy")


def _evaluate(output_dir, phrase_filter=None, mode="reference"):
    dicts = DatasetCatalog.get(TOY_TEST)
    phrases = test_vocabulary(dicts)
    evaluator = PhraseDetectionEvaluator(TOY_TEST, mode=mode, output_dir=str(output_dir), distributed=False,
                                         phrase_filter=phrase_filter)
    evaluator.reset()
    for d in dicts:
        evaluator.process([d], [noisy_outputs(d, phrases, k=2)])
    return evaluator.evaluate()


def _same(a: dict, b: dict):
    assert a.keys() == b.keys()
    for task in a:
        assert a[task].keys() == b[task].keys()
        for key in a[task]:
            x, y = a[task][key], b[task][key]
            assert (math.isnan(x) and math.isnan(y)) or x == y, (task, key)


@pytest.mark.parametrize("mode", ["reference", "standard"])
def test_predictions_file_with_a_filter_equals_the_evaluator(tmp_path, mode):
    register_toy()
    f = _toy_filter()
    path = tmp_path / "phrase_filter.json"
    f.save(str(path))
    plain = _evaluate(tmp_path / "plain", mode=mode)
    in_loop = _evaluate(tmp_path / "filtered", PhraseFilter.load(str(path)), mode=mode)
    lazy = _evaluate(tmp_path / "lazy", lambda: PhraseFilter.load(str(path)), mode=mode)  # built when evaluating
    assert set(in_loop) == {"phrase_detection", "phrase_detection_unfiltered"}
    _same(in_loop, lazy)
    _same({"phrase_detection": in_loop["phrase_detection_unfiltered"]}, plain)  # the unfiltered part is unchanged
    m = in_loop["phrase_detection"]
    assert 0 < m["filter_recall"] < 100 and m["filter_top_n"] == 2 and m["mAP"] != plain["phrase_detection"]["mAP"]
    gt_rows = [(n, a["phrase"]) for n, d in enumerate(DatasetCatalog.get(TOY_TEST)) for a in d["annotations"]]
    allowed = [any(t in f.tokens[DatasetCatalog.get(TOY_TEST)[n]["image_id"]] for t in p.split()) for n, p in gt_rows]
    assert m["filter_recall"] == pytest.approx(100.0 * np.mean(allowed))
    assert (tmp_path / "filtered" / "phrase_aps_unfiltered.json").is_file()

    jsonl = tmp_path / "filtered" / "phrase_predictions.jsonl"  # unfiltered detections
    _same(in_loop, evaluate_predictions_file(str(jsonl), TOY_TEST, mode, phrase_filter=f))
    _same(in_loop, evaluate_predictions_file(str(jsonl), TOY_TEST, mode, phrase_filter=str(path)))
    _same(plain, evaluate_predictions_file(str(jsonl), TOY_TEST, mode))


def test_tool_with_phrase_filter_prints_both_tables(tmp_path, capsys):
    register_toy()
    path = tmp_path / "phrase_filter.json"
    _toy_filter().save(str(path))
    in_loop = _evaluate(tmp_path / "run", PhraseFilter.load(str(path)))
    spec = importlib.util.spec_from_file_location("evaluate_predictions", tool_path("evaluate_predictions.py"))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    got = tool.main(["--predictions", str(tmp_path / "run" / "phrase_predictions.jsonl"), "--dataset", TOY_TEST,
                     "--phrase-filter", str(path), "--output-dir", str(tmp_path / "out")])
    _same(in_loop, got)
    printed = capsys.readouterr().out
    assert "without phrase filtering" in printed and "with phrase filtering (top 2" in printed
    assert "filter recall" in printed and printed.count("all (mean of buckets)") == 3
    saved = json.loads((tmp_path / "out" / "phrase_detection_results.json").read_text())
    assert set(saved) == {"phrase_detection", "phrase_detection_unfiltered"}


def test_evaluator_refuses_a_filter_of_another_split(tmp_path):
    register_toy()
    with pytest.raises(ValueError, match="'1000'"):
        PhraseDetectionEvaluator(TOY_TEST, phrase_filter=PhraseFilter({"x": ["man"]}))
    with pytest.raises(TypeError):
        PhraseDetectionEvaluator(TOY_TEST, phrase_filter={"1000": ["man"]})


def test_large_vocabulary_is_filtered_image_by_image():
    """ReferIt-like shapes stay cheap: an inverted index (built once per vocabulary), one [V] mask per image."""
    from phrasedet.evaluation import PhraseDetections, PhraseGroundTruth

    rng = np.random.default_rng(0)
    V, N, W = 5000, 40, 3000
    phrases = sorted({" ".join(f"w{w}" for w in rng.integers(0, W, rng.integers(1, 4))) for _ in range(V)})
    gt = PhraseGroundTruth([str(i) for i in range(N)], phrases, rng.integers(0, N, 500), rng.integers(0, len(phrases), 500),
                           np.tile([0.0, 0.0, 10.0, 10.0], (500, 1)))
    dets = PhraseDetections(gt, 1)
    dets.scores[:] = rng.random(dets.scores.shape, dtype=np.float32)
    dets.filled[:] = True
    allowed = {str(i): {f"w{w}" for w in rng.integers(0, W, 300)} for i in range(N)}
    f = PhraseFilter(allowed)
    f.apply(dets)
    for i in (0, N - 1):
        expect = np.array([bool(set(p.split()) & allowed[str(i)]) for p in phrases])
        np.testing.assert_array_equal(np.isfinite(dets.scores[i, :, 0]), expect)
    instance_kept = [bool(set(phrases[j].split()) & allowed[str(i)]) for i, j in zip(gt.gt_image, gt.gt_phrase)]
    assert f.recall(gt) == pytest.approx(np.mean(instance_kept))


def test_from_retrieved_keeps_the_top_n_sentences_each_tokenized_once(monkeypatch):
    import phrasedet.evaluation.phrase_detection.phrase_filter as module

    calls = []

    def counting(caption):
        calls.append(caption)
        return caption_tokens(caption)

    monkeypatch.setattr(module, "caption_tokens", counting)
    sentences = ["A Dog runs.", "the cat", "Red CAR!"]
    retrieved = np.array([[2, 0, 1], [0, 0, 2]])  # the third column is beyond top_n 2
    f = PhraseFilter.from_retrieved([1, "b"], retrieved, sentences, 2, retrieval_model={"name": "toy"})
    assert f.tokens == {"1": {"red", "car", "a", "dog", "runs"}, "b": {"a", "dog", "runs"}}
    assert f.captions == {"1": [2, 0], "b": [0, 0]} and f.top_n == 2 and f.retrieval_model == {"name": "toy"}
    assert calls == ["Red CAR!", "A Dog runs."]  # sentence 0 retrieved three times, tokenized once
    assert (1 in f, "1" in f, "b" in f, "c" in f, 2 in f) == (True, True, True, False, False)
    assert f.image_ids == ["1", "b"] and len(f) == 2
